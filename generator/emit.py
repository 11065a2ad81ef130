"""The last step: black, the header stamp, then write-if-changed or compare.

This is the only module that touches the disk. Writes are atomic and only happen
after every file has rendered and formatted, so a failure leaves generated/ as it was.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import importlib.metadata

import black
from black.mode import Mode, TargetVersion
from black.parsing import InvalidInput

import generator
from generator.config import Config
from generator.errors import GeneratorError
from generator.table import Table
from shardplan.atomic import atomic_write_bytes

MARKER = "@generated"
FIX_COMMAND = "make codegen"
# The formatting of generated code is part of its bytes: never derive it from local config.
BLACK_MODE = Mode(target_versions={TargetVersion.PY311}, line_length=100)
BLACK_VERSION = importlib.metadata.version("black")


def check_formatter(config: Config) -> None:
    """Refuse a black other than the pinned one: it would show as a diff nobody can explain."""
    if BLACK_VERSION != config.black_pin:
        raise GeneratorError(
            f"black {BLACK_VERSION} is installed, but generated code is formatted with the "
            f"pinned black {config.black_pin}.\n  Install the pinned version (`make venv`, or "
            f"pip install -c constraints-dev.txt -e '.[codegen]') and run again."
        )


def inputs_digest(table: Table, config: Config) -> str:
    """sha256 over everything the output depends on: table, templates, generator, black."""
    templates = sorted(p for p in config.templates.rglob("*.j2") if p.is_file())
    inputs = {
        "table": table.digest,
        "templates": [
            [p.relative_to(config.templates).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()]
            for p in templates
        ],
        "generator": generator.__version__,
        "black": BLACK_VERSION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()


def format_source(source: str, name: str) -> str:
    """Format with the pinned black mode."""
    try:
        return black.format_str(source, mode=BLACK_MODE)
    except InvalidInput as exc:
        raise GeneratorError(f"black cannot format the rendered {name}: {exc}") from None


def stamp(body: str, table: Table, config: Config, digest: str) -> str:
    """Prefix the header: marker, do-not-edit, how to regenerate, and the two digests."""
    templates = config.templates.relative_to(config.root).as_posix()
    header = (
        f"# {MARKER} by `{FIX_COMMAND}` from {table.source_file} and {templates}/. DO NOT EDIT.\n"
        f"# Regenerate with `{FIX_COMMAND}` (python -m generator); `make check` fails on drift.\n"
        f"# table sha256: {table.digest}\n"
        f"# inputs sha256: {digest}\n"
    )
    return header + body


def build_outputs(sources: dict[str, str], table: Table, config: Config) -> dict[str, str]:
    """Format and stamp every rendered source."""
    digest = inputs_digest(table, config)
    return {
        name: stamp(format_source(src, name), table, config, digest)
        for name, src in sources.items()
    }


@dataclass
class Drift:
    """How generated/ on disk differs from what the table and templates give."""

    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    diff: str = ""

    def __bool__(self) -> bool:
        return bool(self.changed or self.missing or self.orphans)

    def report(self, config: Config) -> str:
        """The message --check prints after the diff: what differs and the fix."""
        out = config.output_name
        lines = [
            f"{out}/{name} is stale: it differs from what the table and templates give."
            for name in self.changed
        ]
        lines += [f"{out}/{name} is missing." for name in self.missing]
        lines += [
            f"{out}/{name} is an orphan: no template produces it (remove it, or restore its template)."
            for name in self.orphans
        ]
        lines.append(f"Run `{FIX_COMMAND}` and commit {out}/.")
        return "\n".join(lines)


def _orphans(config: Config, expected: dict[str, str]) -> list[str]:
    if not config.output.is_dir():
        return []
    return sorted(p.name for p in config.output.glob("*.py") if p.name not in expected)


def compare(config: Config, expected: dict[str, str]) -> Drift:
    """Compare the expected files with the disk, byte for byte; write nothing."""
    drift = Drift(orphans=_orphans(config, expected))
    diffs: list[str] = []
    for name, text in expected.items():
        path = config.output / name
        label = f"{config.output_name}/{name}"
        if not path.is_file():
            drift.missing.append(name)
            current = ""
        else:
            current = path.read_bytes().decode("utf-8", errors="replace")
            if current == text:
                continue
            drift.changed.append(name)
        diffs.extend(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"{label} (on disk)",
                tofile=f"{label} (regenerated)",
            )
        )
    drift.diff = "".join(line if line.endswith("\n") else line + "\n" for line in diffs)
    return drift


def write(config: Config, expected: dict[str, str]) -> list[str]:
    """Write the files whose bytes changed, atomically; remove orphans we generated. Returns what changed."""
    config.output.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in expected.items():
        path = config.output / name
        data = text.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            continue  # write-if-changed: keep mtimes, so tools see no change
        atomic_write_bytes(path, data)
        changed.append(name)
    for name in _orphans(config, expected):
        path = config.output / name
        if MARKER in path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]:
            path.unlink()
            changed.append(name)
    return changed
