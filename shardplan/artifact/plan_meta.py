"""Plan-level parts of freeze and rebuild, shared by the reference and generated code.

Nothing here looks at a spec field: per-field work is the table's (reference) or the
generated code's. This module handles what surrounds it: plan settings, the list of
sharded parameters, and indexing and checking injection rules and entries.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from shardplan.artifact.meta import CodegenMeta
from shardplan.convert.json_values import frozen_strings
from shardplan.errors import (
    FreezeError,
    MetaError,
    described,
    field_path,
    json_type,
    key_path,
    shown,
)
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

MATCH_KEY = "match"


def module_path(fqn: str) -> str:
    """Where a module's spec lives in a plan, for freeze errors."""
    return key_path("modules", fqn)


def entry_path(fqn: str) -> str:
    """Where a module's entry lives in a meta, for rebuild errors."""
    return key_path("param_plan", fqn)


def rule_path(index: int) -> str:
    """Where an injection rule lives in a meta, for rebuild errors."""
    return f"injections[{index}]"


def check_modules(plan: object) -> None:
    """Refuse (FreezeError) a plan whose modules rebuild could not give back: a module name
    that is not a str, a spec that is not a ModuleShardingSpec. Both freeze functions run
    it first, so neither fails later with an AttributeError."""
    if not isinstance(plan, ShardingPlan):
        raise FreezeError("", f"expected a ShardingPlan, got {described(plan)}")
    if not isinstance(plan.modules, dict):
        raise FreezeError(
            "modules", f"expected a dict of FQN -> spec, got {described(plan.modules)}"
        )
    for fqn, spec in plan.modules.items():
        if not isinstance(fqn, str):
            raise FreezeError(
                key_path("modules", fqn), f"a module name must be a str, got {described(fqn)}"
            )
        if not isinstance(spec, ModuleShardingSpec):
            raise FreezeError(
                module_path(fqn), f"expected a ModuleShardingSpec, got {described(spec)}"
            )


def frozen_settings(plan: ShardingPlan) -> dict[str, Any]:
    """The plan-level settings in their JSON shapes, refusing (FreezeError) any value the
    artifact could not carry back: rebuild reads exactly these shapes."""
    handlers = plan.special_handlers
    if not isinstance(handlers, Mapping):
        raise FreezeError(
            "special_handlers", f"expected a dict of FQN -> handler, got {described(handlers)}"
        )
    for name, handler in handlers.items():
        if not isinstance(name, str):
            raise FreezeError(
                key_path("special_handlers", name),
                f"a module name must be a str, got {described(name)}",
            )
        if not isinstance(handler, str):
            raise FreezeError(
                key_path("special_handlers", name), f"expected a str, got {described(handler)}"
            )
    mesh = plan.mesh_dim_names
    mesh_dim_names = None if mesh is None else frozen_strings(mesh, "mesh_dim_names", "str")
    if not isinstance(plan.tied_pairs, (list, tuple)):
        raise FreezeError(
            "tied_pairs", f"expected a list of pairs, got {described(plan.tied_pairs)}"
        )
    tied_pairs = []
    for index, pair in enumerate(plan.tied_pairs):
        frozen = frozen_strings(pair, f"tied_pairs[{index}]", "two FQNs")
        if len(frozen) != 2:
            raise FreezeError(
                f"tied_pairs[{index}]", f"expected a pair of two FQNs, got {len(frozen)}"
            )
        tied_pairs.append(frozen)
    for flag in ("sequence_parallel", "loss_parallel"):
        if not isinstance(getattr(plan, flag), bool):
            raise FreezeError(flag, f"expected a bool, got {described(getattr(plan, flag))}")
    return {
        "special_handlers": dict(handlers),
        "mesh_dim_names": mesh_dim_names,
        "tied_pairs": tied_pairs,
        "parallel_dims": {
            "loss_parallel": plan.loss_parallel,
            "sequence_parallel": plan.sequence_parallel,
        },
    }


def frozen_sharded_params(param_plan: dict[str, dict[str, Any]]) -> list[str]:
    """Sorted FQNs of the parameters with any axis not replicated."""
    sharded = []
    for fqn, entry in param_plan.items():
        for param, named in (entry.get("params") or {}).items():
            if any(text != "R" for text in named.values()):
                sharded.append(f"{fqn}.{param}" if fqn else param)
    return sorted(sharded)


def meta_for_plan(
    plan: ShardingPlan, param_plan: dict[str, dict[str, Any]], injections: list[dict[str, Any]]
) -> CodegenMeta:
    """Wrap frozen entries and rules with the plan-level settings into a CodegenMeta."""
    return CodegenMeta(
        param_plan=param_plan,
        injections=injections,
        frozen_sharded_params=frozen_sharded_params(param_plan),
        **frozen_settings(plan),
    )


def plan_shell(meta: CodegenMeta) -> ShardingPlan:
    """A plan with the meta's plan-level settings and no modules yet."""
    return ShardingPlan(
        modules={},
        special_handlers=dict(meta.special_handlers),
        mesh_dim_names=None if meta.mesh_dim_names is None else tuple(meta.mesh_dim_names),
        tied_pairs=[(first, second) for first, second in meta.tied_pairs],
        sequence_parallel=meta.parallel_dims.get("sequence_parallel", True),
        loss_parallel=meta.parallel_dims.get("loss_parallel", False),
    )


def check_keys(obj: dict[str, Any], known: Collection[str], path: str) -> None:
    """Refuse a key of ``obj`` that is not in ``known`` (strict rebuild only)."""
    for key in obj:
        if key not in known:
            raise MetaError(
                field_path(path, key), f"unknown key {shown(key)}; known keys: {', '.join(known)}"
            )


def check_entry(entry: object, fqn: str, known: Collection[str], strict: bool) -> dict[str, Any]:
    """Check one param_plan entry is an object (and, if strict, has only known keys)."""
    if not isinstance(entry, dict):
        raise MetaError(entry_path(fqn), f"expected an object, got {json_type(entry)}")
    if strict:
        check_keys(entry, known, entry_path(fqn))
    return entry


def index_rules(
    meta: CodegenMeta, known: Collection[str], strict: bool
) -> dict[str, tuple[int, dict[str, Any]]]:
    """Map each rule's ``match`` FQN to (index, rule), refusing orphans and duplicates."""
    rules: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, rule in enumerate(meta.injections):
        path = rule_path(index)
        if not isinstance(rule, dict):
            raise MetaError(path, f"expected an object, got {json_type(rule)}")
        if MATCH_KEY not in rule:
            raise MetaError(path, f'a rule needs a "{MATCH_KEY}" key naming a module FQN')
        fqn = rule[MATCH_KEY]
        match_path = field_path(path, MATCH_KEY)
        if not isinstance(fqn, str):
            raise MetaError(match_path, f"expected a string, got {json_type(fqn)}")
        if fqn not in meta.param_plan:
            raise MetaError(match_path, f"no param_plan entry for {fqn!r}; every rule needs one")
        if fqn in rules:
            first = rules[fqn][0]
            raise MetaError(
                match_path, f"a second rule for {fqn!r}; the first is {rule_path(first)}"
            )
        if strict:
            check_keys(rule, (MATCH_KEY, *known), path)
        rules[fqn] = (index, rule)
    return rules
