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
    run_specgen_here,
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


def test_a_spec_class_reordered_since_generation_refuses_to_import(repo_copy: Path) -> None:
    """The rebuild gives the spec its fields by position, in the class's order when it was
    generated: a class whose fields moved since refuses to load (it would mix them up), and
    `make codegen` follows the new order."""
    spec = repo_copy / "shardplan" / "table" / "spec.py"
    in_src, in_dst = (
        "    in_src: PlacementMap | None = None\n",
        "    in_dst: PlacementMap | None = None\n",
    )
    assert in_src + in_dst in spec.read_text()
    spec.write_text(spec.read_text().replace(in_src + in_dst, in_dst + in_src))
    result = run_in(repo_copy, "-c", "import generated.rebuild")
    assert result.returncode == 1
    assert (
        "StaleGeneratedCode: generated/rebuild.py is stale: it passes ModuleShardingSpec's "
        "fields params, in_src, in_dst," in result.stderr
    )
    assert "the class now starts with params, in_dst, in_src," in result.stderr
    assert "Run `make codegen` and commit generated/." in result.stderr
    assert run_specgen_here(repo_copy).returncode == 0
    probe = (
        "import generated.rebuild as r, shardplan.api as a, shardplan as s\n"
        "p = s.ShardingPlan(modules={'m': s.ModuleShardingSpec(in_dst={'x': {}})})\n"
        "print(a.rebuild_plan(a.freeze_plan(p)) == p)"
    )
    result = run_in(repo_copy, "-c", probe)
    assert result.stdout.strip() == "True", result.stderr


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
