"""Test helpers: where the test data lives, a throwaway copy of the repository, and a
way to run specgen and Python in it. Fixtures and Hypothesis profiles are in conftest.py.

``../shared/fixtures`` (beside the repository) holds a real artifact written by another
planner. CI has it; a clone without it must still pass, so every test that reads it
asks for it through ``shared_fixture``, which skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
QWEN3_MOE = "qwen3_moe_codegen_meta.json"
CORPUS = REPO / "tests" / "corpus"
CORPUS_FILES = sorted(CORPUS.glob("*.json"))
# What the generator needs to run in a copy: the config, the table and spec, itself, its templates.
COPIED = ("pyproject.toml", "shardplan", "generator", "templates", "generated")
# Where the installed dependencies are, read off sys.path (not site.getsitepackages(), which
# under -S forgets the venv): a nested run_in must find them too.
SITE_PACKAGES = [
    entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")
]
SPEC_FILE = "shardplan/table/spec.py"
TABLE_FILE = "shardplan/table/spec_fields.py"
# Where add_field() puts a new dataclass field (last) and its row (before the exempt rows).
LAST_SPEC_FIELD = "    _resolved_inner_target: Any = None\n"
FIRST_EXEMPT_ROW = '    SpecField("_tp_local_attr_plan", "", GROUP_EXEMPT),\n'


def copy_repo(destination: Path) -> Path:
    """Copy the parts of the repository the generator reads into ``destination``."""
    destination.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, destination / name)
    return destination


def run_in(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python args...`` with ``root`` as the working folder and first on the path.

    ``-S`` skips the .pth files of site-packages, and with them the editable install of the
    real checkout: otherwise a module missing from the copy would be found in the checkout.
    The installed dependencies stay importable through PYTHONPATH.
    """
    path = os.pathsep.join([str(root), *SITE_PACKAGES])
    environ = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=root,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_specgen(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the generator's command line in ``root``."""
    return run_in(root, "-m", "generator", "--root", str(root), *args, env=env)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes, to prove nothing was touched."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def insert_text(path: Path, anchor: str, text: str, *, before: bool = False) -> None:
    """Insert ``text`` right after (or before) ``anchor``, which must occur exactly once."""
    content = path.read_text()
    assert content.count(anchor) == 1, f"test setup: {anchor!r} not once in {path}"
    path.write_text(content.replace(anchor, text + anchor if before else anchor + text))


def add_field(root: Path, name: str, row: str) -> None:
    """Add ``name: object = None`` to the spec class and ``row`` to the table of ``root``.

    Rows go after the last crossing row, so an added row's number is ``added_row_number()``.
    """
    insert_text(root / SPEC_FILE, LAST_SPEC_FIELD, f"    {name}: object = None\n")
    insert_text(root / TABLE_FILE, FIRST_EXEMPT_ROW, f"    {with_doc(row)},\n", before=True)


def with_doc(row: str) -> str:
    """``row`` with a doc, as every crossing row needs one, unless it has one or is exempt."""
    if "doc=" in row or "GROUP_EXEMPT" in row or not row.endswith(")"):
        return row
    return row[:-1] + ', doc="A field added by a test.")'


def added_row_number(index: int = 0) -> int:
    """The table row number of the ``index``-th row add_field() added to a copy."""
    from shardplan.table.spec_fields import SPEC_FIELDS

    names = [f.name for f in SPEC_FIELDS]
    return names.index("_tp_local_attr_plan") + 1 + index


def shared_fixture_or_none(name: str) -> Path | None:
    """The shared fixture's path, or None when ``../shared/fixtures`` is absent."""
    path = SHARED_FIXTURES / name
    return path if path.is_file() else None


def shared_fixture(name: str) -> Path:
    """The shared fixture's path; skips the calling test when the folder is absent."""
    path = shared_fixture_or_none(name)
    if path is None:
        pytest.skip(f"{SHARED_FIXTURES} is absent (no {name}): the shared conformance vector")
    return path
