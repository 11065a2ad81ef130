"""Plan-level parts of freeze and rebuild, shared by the reference and generated code.

Nothing here looks at a spec field: per-field work is the table's (reference) or the
generated code's. This module handles what surrounds it: plan settings, the list of
sharded parameters, and indexing and checking injection rules and entries.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from shardplan.errors import MetaError, field_path, json_type, key_path
from shardplan.meta import CodegenMeta
from shardplan.spec import ShardingPlan

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
        special_handlers=dict(plan.special_handlers),
        mesh_dim_names=list(plan.mesh_dim_names),
        tied_pairs=[list(pair) for pair in plan.tied_pairs],
        frozen_sharded_params=frozen_sharded_params(param_plan),
        parallel_dims={
            "loss_parallel": plan.loss_parallel,
            "sequence_parallel": plan.sequence_parallel,
        },
    )


def plan_shell(meta: CodegenMeta) -> ShardingPlan:
    """A plan with the meta's plan-level settings and no modules yet."""
    return ShardingPlan(
        modules={},
        special_handlers=dict(meta.special_handlers),
        mesh_dim_names=tuple(meta.mesh_dim_names),
        tied_pairs=[(first, second) for first, second in meta.tied_pairs],
        sequence_parallel=meta.parallel_dims.get("sequence_parallel", True),
        loss_parallel=meta.parallel_dims.get("loss_parallel", False),
    )


def check_keys(obj: dict[str, Any], known: Collection[str], path: str) -> None:
    """Refuse a key of ``obj`` that is not in ``known`` (strict rebuild only)."""
    for key in obj:
        if key not in known:
            raise MetaError(
                field_path(path, key), f"unknown key {key!r}; known keys: {', '.join(known)}"
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
