"""The runtime guard (shardplan/staleness.py): a stale or missing generated module refuses
to load, naming the fix, before torch is imported.

Real processes throughout: "before torch is imported" is only true of a fresh interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    edit_table,
    edit_write,
    run_in,
)


def test_stale_generated_module_refuses_to_import(repo_copy: Path) -> None:
    edit_table('SpecField("out_names", "out_names"', 'SpecField("out_names", "output_names"')(
        repo_copy
    )
    result = run_in(repo_copy, "-c", "import generated.rebuild")
    assert result.returncode == 1
    assert (
        "StaleGeneratedCode: generated/rebuild.py is stale: the field table changed"
        in result.stderr
    )
    assert "Run `make codegen` and commit generated/." in result.stderr


# ------------------------------------------------------------------- runtime guards

# Runs ``code`` and reports the ImportError it raises, whether torch was imported by then,
# and how long it took.
IMPORT_PROBE = """
import json, sys, time
start = time.perf_counter()
try:
    {code}
except ImportError as exc:
    print(json.dumps({{
        "error": f"{{type(exc).__name__}}: {{exc}}",
        "torch_imported": "torch" in sys.modules,
        "seconds": time.perf_counter() - start,
    }}))
"""


def _probe_import(root: Path, code: str) -> dict[str, Any]:
    result = run_in(root, "-c", IMPORT_PROBE.format(code=code))
    assert result.returncode == 0 and result.stdout, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout)
    return outcome


@pytest.mark.parametrize(
    ("code", "stale_module"),
    [
        ("import shardplan; shardplan.rebuild_plan", "generated/meta.py"),
        ("import generated.rebuild", "generated/rebuild.py"),
    ],
)
def test_a_stale_generated_module_refuses_at_once_before_torch_is_imported(
    repo_copy: Path, code: str, stale_module: str
) -> None:
    edit_table('SpecField("out_names", "out_names"', 'SpecField("out_names", "output_names"')(
        repo_copy
    )
    outcome = _probe_import(repo_copy, code)
    assert outcome["error"] == (
        f"StaleGeneratedCode: {stale_module} is stale: the field table changed since it was "
        "generated.\n  Run `make codegen` and commit generated/."
    )
    assert not outcome["torch_imported"]
    assert outcome["seconds"] < 1.0


@pytest.mark.parametrize("removed", ["generated/rebuild.py", "generated"])
def test_a_missing_generated_module_says_run_make_codegen_before_torch_is_imported(
    repo_copy: Path, removed: str
) -> None:
    edit_write(removed, None)(repo_copy)
    outcome = _probe_import(repo_copy, "import shardplan; shardplan.rebuild_plan")
    missing = "generated/meta.py" if removed == "generated" else removed
    assert outcome["error"] == (
        f"MissingGeneratedCode: {missing} is missing: the generated code was never generated "
        "here, or was deleted.\n  Run `make codegen` and commit generated/."
    )
    assert not outcome["torch_imported"]


def test_a_spec_class_reordered_since_generation_refuses_to_import(repo_copy: Path) -> None:
    """The rebuild gives the spec its fields by position, in the class's order when it was
    generated: a class whose first fields are others since refuses to load (it would mix
    them up), naming both orders."""
    spec = repo_copy / "shardplan" / "table" / "spec.py"
    docstring = '    """How one module is sharded. Field order is the field table\'s order."""\n'
    assert docstring in spec.read_text()
    spec.write_text(spec.read_text().replace(docstring, docstring + "    moved_first: int = 0\n"))
    outcome = _probe_import(repo_copy, "import generated.rebuild")
    assert outcome["error"].startswith(
        "StaleGeneratedCode: generated/rebuild.py is stale: it passes ModuleShardingSpec's fields "
    )
    assert "by position, and the class now starts with moved_first, " in outcome["error"]
    assert outcome["error"].endswith("Run `make codegen` and commit generated/.")
    assert not outcome["torch_imported"]  # at once, as the tables' guard


def test_check_parameters_holds_the_classes_leading_init_fields_in_order() -> None:
    """Only the order of the __init__ parameters counts: a field set after construction
    (init=False) between them, or fields after the ones given, change nothing."""
    from dataclasses import dataclass, field

    from shardplan.staleness import StaleGeneratedCode, check_parameters

    @dataclass
    class Spec:
        a: int = 0
        later: int = field(default=0, init=False)
        b: int = 0
        c: int = 0

    check_parameters("generated/x.py", Spec, ("a", "b"))
    check_parameters("generated/x.py", Spec, ("a", "b", "c"))
    for names in (("b", "a"), ("a", "c"), ("a", "b", "c", "d")):
        with pytest.raises(StaleGeneratedCode, match="generated/x.py is stale: it passes Spec"):
            check_parameters("generated/x.py", Spec, names)
