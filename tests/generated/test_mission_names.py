"""The names the mission asked for stand in generated/, so an integrator swaps upstream's
table walk (``hyper_parallel/codegen/runtime.py``) for an import of the generated code.

The names are read from the mission's own sentence: renaming one in a template fails here.
"""

from __future__ import annotations

import ast
import inspect
import re

import generated.freeze
import generated.rebuild
import shardplan
from generated.freeze import freeze_param_plan
from generated.rebuild import _rebuild_live_plan_from_meta
from shardplan.examples.llama import LlamaConfig
from shardplan.examples.plan import tensor_parallel_plan
from tests.helpers import REPO

MISSION = (
    "straight-line `freeze_param_plan`, `freeze_injections` and `_rebuild_live_plan_from_meta`"
)
MISSION_NAMES = re.findall(r"`(\w+)`", MISSION)
# The signature upstream's runtime calls each with.
SIGNATURES = {
    "freeze_param_plan": "(plan: 'ShardingPlan') -> 'dict[str, dict[str, Any]]'",
    "freeze_injections": "(plan: 'ShardingPlan') -> 'list[dict[str, Any]]'",
    "_rebuild_live_plan_from_meta": "(meta: 'CodegenMeta', *, strict: 'bool' = True, "
    "allow_targets: 'AllowTargets' = ()) -> 'ShardingPlan'",
}


def _defined_in(template: str) -> set[str]:
    """The functions a template's module defines, read off its rendered output."""
    tree = ast.parse((REPO / "generated" / template).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_the_missions_three_names_are_defined_by_the_generated_modules() -> None:
    assert MISSION_NAMES == list(SIGNATURES)
    defined = _defined_in("freeze.py") | _defined_in("rebuild.py")
    assert set(MISSION_NAMES) <= defined, set(MISSION_NAMES) - defined
    for name in MISSION_NAMES:
        module = generated.freeze if name.startswith("freeze") else generated.rebuild
        assert str(inspect.signature(getattr(module, name))) == SIGNATURES[name], name


def test_the_generated_rebuild_by_upstreams_name_rebuilds_the_example_plan() -> None:
    plan = tensor_parallel_plan(LlamaConfig())
    meta = shardplan.freeze_plan(plan)
    assert freeze_param_plan(plan) == meta.param_plan
    assert _rebuild_live_plan_from_meta(meta).modules == plan.modules
    assert _rebuild_live_plan_from_meta(meta, strict=False).modules == plan.modules
