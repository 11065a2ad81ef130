"""Test helpers: where the test data lives, a throwaway copy of the repository, the edits
tests make to it, and two ways to run specgen in it. Fixtures and Hypothesis profiles are
in conftest.py.

Running the generator: ``run_specgen_here`` runs it in this test process (``run(argv)``),
with the copy's project modules imported for the run and the real ones put back after:
use it for table, template and configuration cases. ``run_specgen`` and ``run_in`` start
a real ``python -S`` process: use them only for what needs one (another hash seed, what a
fresh interpreter imports, concurrent runs, a script), and say why in the test module.

``../shared/fixtures`` (beside the repository) holds a real artifact written by another
planner. CI has it; a clone without it must still pass, so every test that reads it
asks for it through ``shared_fixture``, which skips with the reason.
"""

from __future__ import annotations

import importlib
import io
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
# A crossing row, and its field, that the table-edit tests remove, retire or rename.
REGION_ROW = (
    '    SpecField("region_dispatch", "region_dispatch", GROUP_PARAM_PLAN, "scalar", "opt_scalar",\n'
    '              doc="Whether the module dispatches its region as a whole."),\n'
)
REGION_FIELD = "    region_dispatch: Scalar | None = None\n"


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


def make_codegen(root: Path) -> subprocess.CompletedProcess[str]:
    """`make codegen` in ``root``, the README's recipe itself, with this interpreter's
    folder standing in for the project's venv."""
    return subprocess.run(
        ["make", "-s", "codegen", "STAMP=", f"BIN={Path(sys.executable).parent}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_in(
    root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
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
        timeout=timeout,
    )


def run_specgen(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the generator's command line in ``root``."""
    return run_in(root, "-m", "generator", "--root", str(root), *args, env=env)


# The project's own packages, which a copy holds its own versions of. The generator is not
# one of them: an in-process run always uses the real one (tests never edit a copy's).
PROJECT_PACKAGES = ("shardplan", "generated")
T = TypeVar("T")


def _project_modules() -> list[str]:
    return [name for name in sys.modules if name.partition(".")[0] in PROJECT_PACKAGES]


@contextmanager
def project_imported_from(root: Path) -> Iterator[None]:
    """Within the block, the project's packages (``PROJECT_PACKAGES``) import from ``root``
    (first on ``sys.path``, and the working folder).

    Every module of those packages is taken out of ``sys.modules`` before the block, so an
    import in it reads the copy's files (no bytecode is written, so an edit made within the
    same second is never hidden by a stale .pyc), and taken out again after it; then the
    real checkout's modules, ``sys.path`` and the working folder are put back, so a test that
    holds the real ``ModuleShardingSpec`` still sees the same class afterwards. Blocks do
    not nest: the inner one's exit would drop what the outer one imported. Not thread-safe
    (sys.modules, the working folder); pytest-xdist workers are processes, which is fine.
    """
    saved_modules = {name: sys.modules.pop(name) for name in _project_modules()}
    saved_path = sys.path[:]
    saved_cwd = os.getcwd()
    saved_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    importlib.invalidate_caches()
    try:
        sys.path.insert(0, str(root))
        os.chdir(root)
        yield
    finally:
        for name in _project_modules():
            del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        sys.dont_write_bytecode = saved_bytecode
        importlib.invalidate_caches()


def call_in(root: Path, function: Callable[[], T]) -> T:
    """``function()``, with the project's packages imported from ``root`` (see above)."""
    with project_imported_from(root):
        return function()


@dataclass(frozen=True)
class Ran:
    """What a run gave, named as subprocess.CompletedProcess names it."""

    returncode: int
    stdout: str
    stderr: str


def run_specgen_here(root: Path, *args: str, root_option: bool = True) -> Ran:
    """Run the generator's command line in this process, in ``root`` (its working folder).

    ``generator.__main__.run(argv)`` with stdout and stderr captured. An exception that
    escapes it is printed as the interpreter would (a traceback, exit status 1), so a test
    asserting "no traceback" sees one. ``root_option=False`` leaves out ``--root``: the
    generator then finds the project from the working folder.
    """
    from generator.__main__ import run

    argv = ["--root", str(root), *args] if root_option else list(args)
    out, err = io.StringIO(), io.StringIO()
    with project_imported_from(root), redirect_stdout(out), redirect_stderr(err):
        try:
            status = int(run(argv))
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            traceback.print_exc()
            status = 1
    return Ran(status, out.getvalue(), err.getvalue())


def run_python_here(root: Path, option: str, code: str, *argv: str) -> Ran:
    """``python -c code argv...`` in this process, in ``root``: the code runs with the copy's
    project packages (project_imported_from), ``sys.argv`` as the interpreter would set it,
    stdout and stderr captured, and an escaping exception printed as a traceback (status 1).
    """
    assert option == "-c", "run_python_here runs code given with -c; use run_in for others"
    out, err = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    status = 0
    with project_imported_from(root), redirect_stdout(out), redirect_stderr(err):
        sys.argv = ["-c", *argv]
        try:
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.argv = saved_argv
    return Ran(status, out.getvalue(), err.getvalue())


def replace_once(root: Path, relative: str, old: str, new: str) -> None:
    """Replace ``old`` with ``new`` in ``root/relative``; ``old`` must occur exactly once
    (a test whose anchor moved fails at its setup, saying so)."""
    path = root / relative
    text = path.read_text()
    assert text.count(old) == 1, f"test setup: {old!r} is not in {relative} once"
    path.write_text(text.replace(old, new))


def collector_restored() -> Iterator[None]:
    """Generator for an autouse fixture: the collector's switch and thresholds as they were
    before the test, whatever it did to them."""
    import gc

    was, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    (gc.enable if was else gc.disable)()
    gc.set_threshold(*thresholds)


def automatic_collection_on() -> bool:
    """What gc.isenabled() said before the pause changed mechanism: is a collection
    started automatically when allocations pass the first threshold?"""
    import gc

    return gc.isenabled() and gc.get_threshold()[0] != 0


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes, to prove nothing was touched."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def remove_region_dispatch(root: Path) -> None:
    """Take the region_dispatch row and its field out of the copy at ``root``."""
    replace_once(root, TABLE_FILE, REGION_ROW, "")
    replace_once(root, SPEC_FILE, REGION_FIELD, "")


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


# ------------------------------------------------------------------ edits to a copy
# Each returns an Edit: a function that makes the change in the copy it is given, so a case
# table can hold the edit beside the message it should produce.

Edit = Callable[[Path], None]


def edit_replace(relative: str, old: str, new: str) -> Edit:
    """Replace the first ``old`` (which must occur) by ``new`` in the copy's ``relative``."""

    def edit(root: Path) -> None:
        path = root / relative
        text = path.read_text()
        assert old in text, f"test setup: {old!r} not in {relative}"
        path.write_text(text.replace(old, new, 1))

    return edit


def edit_table(old: str, new: str) -> Edit:
    """Replace text in the copy's spec table."""
    return edit_replace(TABLE_FILE, old, new)


def edit_add_field(name: str, row: str) -> Edit:
    """add_field() as an Edit."""

    def edit(root: Path) -> None:
        add_field(root, name, row)

    return edit


def edit_add_row(row: str) -> Edit:
    """Add ``row`` (with a doc) before the exempt rows of the spec table, with no field."""
    return edit_table(FIRST_EXEMPT_ROW, f"    {with_doc(row)},\n" + FIRST_EXEMPT_ROW)


def edit_write(relative: str, data: bytes | None) -> Edit:
    """Write ``data`` to a file of the copy, or remove the file or folder when None."""

    def edit(root: Path) -> None:
        path = root / relative
        if data is None:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        else:
            path.write_bytes(data)

    return edit


def edit_append(relative: str, data: bytes) -> Edit:
    """Append ``data`` to a file of the copy."""

    def edit(root: Path) -> None:
        path = root / relative
        path.write_bytes(path.read_bytes() + data)

    return edit


def line_of(relative: str, text: str) -> int:
    """The 1-based number of the first line of a repository file that contains ``text``."""
    lines = (REPO / relative).read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if text in line)
