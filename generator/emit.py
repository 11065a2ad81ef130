"""The last step: black, the header stamp, then compare or write (all or nothing across
files), the only module that touches the disk."""

from __future__ import annotations

import difflib
import importlib.metadata
import json
import os
import re
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from . import __version__
from .cache import STORE, digest
from .config import OUTPUT_NAME, Config
from .errors import GeneratorError
from .table import Tables

if TYPE_CHECKING:
    from shardplan.artifact.staging import StagedFile

MARKER = "@generated"
FIX_COMMAND = "make codegen"
# The formatting of generated code is part of its bytes: never derive it from local config.
BLACK_TARGET, BLACK_LINE_LENGTH = "PY311", 100
BLACK_VERSION = importlib.metadata.version("black")
HERE = Path(__file__).parent
# A file's name, its old bytes and its new ones (None: no file, as after an orphan's removal).
Change = tuple[str, bytes | None, bytes | None]
# A change, by whether there is no file before it and no file after it.
_SAYS = {
    (False, False): "is stale: it differs from what the table and templates give.",
    (True, False): "is missing.",
    (False, True): "is an orphan: no declared output (remove it, or declare it in outputs).",
}
# How each file type starts with the @generated marker (see build_outputs); "# " for others.
_HEADERS = {".json": rb'\{\s*"\$comment":\s*"', ".md": rb"<!-- "}


def check_formatter(config: Config) -> None:
    """Refuse a black other than the pinned one: it would show as a diff nobody can explain."""
    if BLACK_VERSION != config.black_pin:
        raise GeneratorError(
            f"black {BLACK_VERSION} is installed, not the pinned {config.black_pin}: run "
            "`make venv` (pip install -c constraints-dev.txt -e '.[codegen]') and run again"
        )


def format_source(source: str, name: str, template: str = "") -> str:
    """Format with the pinned black (cached); its parse is the one check of a template's Python."""
    key = f"black {BLACK_VERSION} {BLACK_TARGET} {BLACK_LINE_LENGTH}\n{source}"
    if (kept := STORE.get(key)) is not None:
        return kept.decode("utf-8")
    import black
    from black.mode import Mode, TargetVersion
    from black.parsing import InvalidInput

    mode = Mode(target_versions={TargetVersion[BLACK_TARGET]}, line_length=BLACK_LINE_LENGTH)
    try:
        formatted = black.format_str(source, mode=mode)
    except InvalidInput as exc:
        # "cannot parse for target version Python 3.11: 241:18 ...ParseError: bad input"
        line = str(exc).partition(": ")[2].partition(":")[0]
        if not (template and line.isdigit() and 0 < int(line) <= len(source.splitlines())):
            raise GeneratorError(f"black cannot format the rendered {name}: {exc}") from None
        reason = str(exc).rstrip().rpartition("\n")[2].partition(": ")[2] or "invalid syntax"
        raise GeneratorError(
            f"{template} rendered invalid Python at line {line} of {name} ({reason}):\n  "
            f"{line} | {source.splitlines()[int(line) - 1].strip()}"
        ) from None
    STORE.put(key, formatted.encode("utf-8"))
    return formatted


def build_outputs(
    sources: dict[str, str], tables: Tables, config: Config, functions: Path
) -> dict[str, str]:
    """Format (black for Python) every rendered source and head it with the header, in the file
    type's own comment form (JSON has none: its first key, "$comment", a JSON Schema keyword)."""
    # Every file of the templates folder, not only the declared outputs' templates (kinds.j2).
    templates = [
        p for p in config.templates.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ]
    modules = [config.root / (m.replace(".", "/") + ".py") for m in (config.kinds, config.format)]
    inputs = {  # all the output depends on (``functions``: the kinds')
        "table": tables.digest,
        "templates": sorted(
            [p.relative_to(config.templates).as_posix(), digest(p.read_bytes())] for p in templates
        ),
        "modules": [digest(path.read_bytes()) for path in (*modules, functions)],
        "generator": [[p.name, digest(p.read_bytes())] for p in sorted(HERE.glob("*.py"))],
        "versions": [__version__, BLACK_VERSION],
    }
    files = " and ".join(dict.fromkeys(t.source_file for t in tables))
    header = [
        f"{MARKER} by `{FIX_COMMAND}` from {files} and {config.templates_name}/. DO NOT EDIT.",
        f"Regenerate with `{FIX_COMMAND}` (python -m generator); `make check` fails on drift.",
        f"tables sha256: {tables.digest} (over the {' and '.join(t.name for t in tables)} "
        "tables' own digests)",
        f"inputs sha256: {digest(json.dumps(inputs).encode('utf-8'))}",
    ]
    outputs: dict[str, str] = {}
    for name, body in sources.items():
        if name.endswith(".json"):  # two-space indent and key order as rendered
            document = {"$comment": " ".join(header), **json.loads(body)}
            outputs[name] = json.dumps(document, indent=2) + "\n"
        elif name.endswith(".md"):
            outputs[name] = "<!-- " + "\n     ".join(header) + " -->\n\n" + body.strip("\n") + "\n"
        else:
            if name.endswith(".py"):
                body = format_source(body, name, f"{config.templates_name}/{name}.j2")
            outputs[name] = "".join(f"# {line}\n" for line in header) + body
    return outputs


@dataclass
class Drift:
    """How generated/ on disk differs from what the table and templates give."""

    changes: list[Change] = field(default_factory=list)  # what generate writes or removes
    foreign: list[str] = field(default_factory=list)  # modules there specgen did not write
    diff: str = ""

    def __bool__(self) -> bool:
        return bool(self.changes or self.foreign)

    def report(self, config: Config, breaking: bool = False) -> str:
        """What differs and the fix (``breaking``: plain `make codegen` refuses the table edit)."""
        out = config.output_name
        lines = [
            f"{out}/{name} {_SAYS[old is None, new is None]}" for name, old, new in self.changes
        ]
        lines += [
            f"{out}/{name} is no declared output and specgen did not write it: move it out of "
            f"{out}/ or delete it."
            for name in self.foreign
        ]
        if self.changes and breaking:
            lines.append(
                f"The table edit breaks old artifacts, so `{FIX_COMMAND}` refuses it: add "
                'aliases=("old_key",) or a RetiredKey, or run `specgen generate --allow-breaking`; '
                f"then commit {out}/."
            )
        elif self.changes:
            lines.append(f"Run `{FIX_COMMAND}` and commit {out}/.")
        return "\n".join(lines)


def _failed(
    config: Config, doing: str, name: str, exc: OSError, stuck: list[str] | None = None
) -> GeneratorError:
    out = config.output_name
    left = (
        f"could not restore {', '.join(f'{out}/{n}' for n in stuck or [])} (the rest is as it was)"
    )
    return GeneratorError(
        f"{doing} {out}/{name}: {exc.strerror}; {left if stuck else 'nothing was changed'}: make "
        f"{out}/{name} writable (chmod u+w; lsattr/chattr -i if immutable) and run again"
    )


def _current(config: Config, name: str) -> bytes | None:
    try:
        return (config.output / name).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _failed(config, "cannot read", name, exc) from None


def _generated_by_us(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError:  # gone (another run removed an orphan first), or unreadable: not ours
        return False
    return re.match(_HEADERS.get(path.suffix, rb"# ") + MARKER.encode(), head) is not None


def _changes(config: Config, expected: dict[str, str]) -> tuple[list[Change], list[str]]:
    """The changes that make the output folder hold ``expected``; the foreign modules there."""
    out = config.output_name
    if config.output.exists() and not config.output.is_dir():
        raise GeneratorError(f"{out} is not a folder: remove or rename it, then run again")
    for name in config.outputs:
        if (config.output / name).exists() and not (config.output / name).is_file():
            raise GeneratorError(f"{out}/{name} is not a file: remove it and run again")
    ours, foreign = [], []
    for path in sorted(config.output.iterdir()) if config.output.is_dir() else []:
        if path.name in expected or not OUTPUT_NAME.fullmatch(path.name):
            continue
        if _generated_by_us(path):
            ours.append(path.name)
        elif path.suffix == ".py" and path.exists():  # gone: another run removed our orphan
            foreign.append(path.name)
    wanted = {name: text.encode("utf-8") for name, text in expected.items()} | dict.fromkeys(ours)
    changes = [
        (name, old, new) for name, new in wanted.items() if (old := _current(config, name)) != new
    ]
    return changes, foreign


def compare(config: Config, expected: dict[str, str]) -> Drift:
    """Compare the expected files with the disk, byte for byte; write nothing."""
    drift = Drift(*_changes(config, expected))
    for name, old, new in drift.changes:
        if new is None:
            continue  # an orphan is named, not shown
        label = f"{config.output_name}/{name}"
        was = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        now = expected[name].splitlines(keepends=True)
        diff = difflib.unified_diff(was, now, f"{label} (on disk)", f"{label} (regenerated)")
        drift.diff += "".join(line if line.endswith("\n") else line + "\n" for line in diff)
    return drift


def write(config: Config, expected: dict[str, str]) -> list[Change]:
    """Write the files whose bytes changed and remove orphans we generated, all or nothing;
    the changes made (an orphan's, to no file)."""
    changes, foreign = _changes(config, expected)
    if foreign:  # as check reports it; nothing is written
        raise GeneratorError(Drift(foreign=foreign).report(config))
    if changes:
        _change(config, changes)
    return changes


def _change(config: Config, changes: list[Change]) -> None:
    # Imported after table.py loaded the project's own `shardplan`: its artifact writer's.
    try:
        from shardplan.artifact import staging
    except ImportError as exc:
        raise GeneratorError(
            f"cannot import shardplan.artifact.staging ({exc}): run `python -m generator` in "
            "the project's folder"
        ) from None
    staging.remove_stale_temporaries(config.output)  # what a killed run left
    doing, current, done = "write to", "", []
    staged: dict[str, StagedFile] = {}
    created, folder = not config.output.exists(), -1
    try:
        config.output.mkdir(parents=True, exist_ok=True)
        folder = staging.open_folder(config.output)
        for name, _, new in changes:
            if new is not None:
                staged[name] = staging.stage(config.output, new, None, folder)
        for current, old, new in changes:
            doing = "replace" if new is not None else "remove"
            if new is None:
                (config.output / current).unlink(missing_ok=True)
            else:
                staged[current].replace(config.output / current)
            done.append((current, old, new))
        staging.sync_folder(folder)
    except OSError as exc:
        stuck = _undo(config, staging, done, folder, staged)
        for file in staged.values():
            with suppress(OSError):  # a staged file we cannot remove is hidden and ignored
                file.discard()
        if created:
            with suppress(OSError):
                config.output.rmdir()  # only if empty: then nothing of ours is in it
        raise _failed(config, f"cannot {doing}", current, exc, stuck) from None
    finally:
        if folder >= 0:
            os.close(folder)


def _undo(
    config: Config, staging: ModuleType, done: list[Change], fd: int, staged: dict[str, StagedFile]
) -> list[str]:
    stuck = []
    for name, old, _ in reversed(done):
        try:
            if old is None:
                (config.output / name).unlink(missing_ok=True)
            else:
                staged[name] = staging.stage(config.output, old, None, fd)  # new bytes: in place
                staged[name].replace(config.output / name)
        except OSError:
            stuck.append(name)
    return sorted(stuck)
