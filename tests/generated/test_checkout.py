"""Generated code comes from the checkout shardplan was imported from (issue 19, point 6).

The venv installs this checkout editable. Run from another checkout (a git worktree for
`make bench --before REV`), a generated module missing there must not be loaded from this
one: MissingGeneratedCode names the file and the fix, before torch is imported.

Real processes throughout: the editable install and "before torch" are only true of a
fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, copy_repo

# What the other checkout's import gives, as JSON: the error, and whether torch got loaded.
PROBE = """
import json, sys
try:
    import shardplan.api
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
import shardplan
print(json.dumps({
    "error": error,
    "shardplan": shardplan.__file__,
    # under either name of the generated package (shardplan.staleness)
    "rebuild": next((module.__file__ for name, module in sys.modules.items()
                     if name in ("generated.rebuild", "shardplan._generated.rebuild")), None),
    "torch_imported": "torch" in sys.modules,
}))
"""


def editable_install_points_here() -> bool:
    # As import_from() runs: without PYTHONPATH, the editable install alone decides (a copy
    # of the repository run with its own PYTHONPATH is not what the venv points at). The
    # editable install maps the folder generated/ to shardplan._generated (pyproject.toml).
    probe = "import shardplan._generated as g; print(g.__file__)"
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd="/", env=environ, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return found.stdout.strip().startswith(str(REPO))


pytestmark = pytest.mark.skipif(
    not editable_install_points_here(), reason="the venv has no editable install of this checkout"
)


@pytest.fixture
def other_checkout(tmp_path: Path) -> Path:
    return copy_repo(tmp_path / "other")


def import_from(checkout: Path) -> dict[str, Any]:
    """``import shardplan.api`` run from ``checkout`` with the venv as it is (the editable
    install of this checkout active), as `python -m benchmarks.run` would be."""
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=checkout,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout)
    assert Path(outcome["shardplan"]).resolve().is_relative_to(checkout.resolve()), outcome
    return outcome


@pytest.mark.parametrize(
    "removed", ["generated/rebuild.py", "generated/freeze.py", "generated/meta.py"]
)
def test_a_module_missing_in_the_other_checkout_is_not_loaded_from_this_one(
    other_checkout: Path, removed: str
) -> None:
    (other_checkout / removed).unlink()
    outcome = import_from(other_checkout)
    # Its package is there, under the checkout's name: nothing maps that name to this one.
    assert outcome["error"] == (
        f"MissingGeneratedCode: {removed} is missing: the generated code was never generated "
        "here, or was deleted.\n  Run `make codegen` and commit generated/."
    )
    assert outcome["rebuild"] is None and not outcome["torch_imported"]


def test_a_generated_folder_missing_in_the_other_checkout_is_not_loaded_from_this_one(
    other_checkout: Path,
) -> None:
    shutil.rmtree(other_checkout / "generated")
    outcome = import_from(other_checkout)
    assert outcome["error"].startswith(
        f"MissingGeneratedCode: generated/meta.py is missing in {other_checkout.resolve()}"
    )
    assert f"Run `make codegen` in {other_checkout.resolve()}" in outcome["error"]
    assert not outcome["torch_imported"]


def test_a_complete_other_checkout_loads_its_own_generated_code(
    other_checkout: Path, tmp_path: Path
) -> None:
    """Reached through a symlink, too: the folders are compared resolved."""
    link = tmp_path / "link"
    link.symlink_to(other_checkout)
    outcome = import_from(link)
    assert outcome["error"] is None
    assert Path(outcome["rebuild"]).resolve() == (other_checkout / "generated/rebuild.py").resolve()
