"""`specgen --root B` reads B's table, spec class and kinds, whichever checkout runs it
(docs/cli.md): run from inside another checkout A, with A first on
PYTHONPATH, or in a process that already imported A's package, it renders B from B's
own modules or refuses with one message (exit 2) and leaves B's generated/ untouched.

A and B are two copies of the repository; A's table differs (a row's doc), so output
rendered from A's table would differ from B's generated/, and `check` would say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SITE_PACKAGES, copy_repo, snapshot

# Every test here starts fresh interpreters to watch what they import and run.
pytestmark = pytest.mark.processes

TABLE = "shardplan/table/spec_fields.py"
DOC = 'doc="The declared order of the module\'s outputs."'


@pytest.fixture
def checkouts(tmp_path: Path) -> tuple[Path, Path]:
    """Two checkouts: A, whose table differs, and B, clean."""
    a, b = copy_repo(tmp_path / "A"), copy_repo(tmp_path / "B")
    table = a / TABLE
    text = table.read_text()
    assert text.count(DOC) == 1, "test setup: the doc is not in the table once"
    table.write_text(text.replace(DOC, 'doc="Output order, as checkout A has it."'))
    return a, b


def run(cwd: Path, path: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -S args`` in ``cwd`` with ``path`` first on PYTHONPATH (no .pth files: the
    real checkout's editable install stays out)."""
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*map(str, path), *SITE_PACKAGES]),
    }
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "where",
    ["cwd-A", "A-first-on-PYTHONPATH", "A-installed-before-B"],
)
@pytest.mark.parametrize("command", ["check", "generate"])
def test_root_b_renders_b_from_bs_own_table(
    checkouts: tuple[Path, Path], where: str, command: str
) -> None:
    a, b = checkouts
    cwd, path = {
        # `python -m generator --root B` typed inside checkout A: A's generator runs.
        "cwd-A": (a, [a]),
        # A first on the path, run from B.
        "A-first-on-PYTHONPATH": (b, [a]),
        # An editable install of A is a path entry after the working folder: emulate it.
        "A-installed-before-B": (Path("/"), [a, b]),
    }[where]
    before = snapshot(b / "generated")
    result = run(cwd, path, "-m", "generator", "--root", str(b), command)
    assert result.returncode in (0, 2), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    if result.returncode == 0:  # rendered: from B's table, so nothing differs
        assert "is stale" not in result.stderr
    else:  # refused: one message naming both places
        assert str(a) in result.stderr and str(b) in result.stderr
    assert snapshot(b / "generated") == before


def test_a_process_that_already_imported_another_checkouts_package_is_refused(
    checkouts: tuple[Path, Path],
) -> None:
    """Before: refused, but blaming the path ("another checkout comes first on the path")."""
    a, b = checkouts
    script = (
        "import sys\n"
        "import shardplan.table.spec_fields\n"
        "from generator.__main__ import run\n"
        f"sys.exit(run(['--root', {str(b)!r}, 'generate']))\n"
    )
    before = snapshot(b / "generated")
    result = run(a, [a], "-c", script)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"this process already imported 'shardplan' from {a}" in result.stderr
    assert "Run specgen in a fresh process" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(b / "generated") == before


def test_a_process_that_imported_the_projects_own_package_runs(
    checkouts: tuple[Path, Path],
) -> None:
    _, b = checkouts
    script = (
        "import sys\n"
        "import shardplan.table.spec_fields\n"
        "from generator.__main__ import run\n"
        f"sys.exit(run(['--root', {str(b)!r}, 'check']))\n"
    )
    result = run(b, [b], "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_venvs_editable_install_of_this_checkout_renders_b_from_bs_table(
    tmp_path: Path,
) -> None:
    """The venv installs this checkout (A) editable: its generator runs. B's table differs
    from A's, so B's generated/ is stale against B's table (exit 1), and would be clean
    against A's (exit 0: the bug)."""
    b = copy_repo(tmp_path / "B")
    table = b / TABLE
    table.write_text(table.read_text().replace(DOC, 'doc="Output order, as checkout B has it."'))
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    before = snapshot(b / "generated")
    result = subprocess.run(
        # Outside any checkout the editable install's name is the installed one (pyproject.toml).
        [sys.executable, "-m", "specgen.generator", "--root", str(b), "check"],
        cwd="/",
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "generated/fields.md is stale" in result.stderr
    assert snapshot(b / "generated") == before


def test_another_checkouts_generator_says_whose_generator_rendered_what_differs(
    repo_copy: Path,
) -> None:
    """This checkout's generator, run on a copy (--root), names itself where the output
    differs from what is on disk: the difference may be the generators', not the table's."""
    from tests.helpers import REPO, replace_once, run_specgen_here

    replace_once(repo_copy, TABLE, DOC, 'doc="Output order, as the copy has it."')
    check = run_specgen_here(repo_copy, "check")
    assert check.returncode == 1
    assert f"rendered by the generator of {REPO.resolve()} (specgen " in check.stderr
    generate = run_specgen_here(repo_copy, "generate")
    assert generate.returncode == 0 and f"generator of {REPO.resolve()}" in generate.stdout
    again = run_specgen_here(repo_copy, "check")
    assert again.returncode == 0 and "generator of" not in again.stdout + again.stderr
