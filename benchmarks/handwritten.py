"""Hand-written straight-line freeze and rebuild for the current table: the speed limit.

This is what a careful engineer would write by hand for these 17 fields, using the
same kind helpers as generated code and producing the same output and errors (the
benchmark checks that before timing). If the table changes, this file is stale:
`make bench` compares outputs first and says so.
"""

from __future__ import annotations

from typing import Any

from shardplan.artifact.meta import CodegenMeta, check_meta
from shardplan.artifact.plan_meta import (
    check_entry,
    entry_path,
    index_rules,
    module_path,
    plan_shell,
    rule_path,
)
from shardplan.convert.kinds import (
    freeze_attr_list,
    freeze_dict_copy,
    freeze_int_truthy,
    freeze_name_list,
    freeze_named_placements,
    freeze_placement_map,
    freeze_plain,
    freeze_scalar,
    freeze_value_to_dict,
    rebuild_attr_list,
    rebuild_bool_default_true,
    rebuild_dict_copy,
    rebuild_injection_target,
    rebuild_int_truthy,
    rebuild_name_list,
    rebuild_named_placements,
    rebuild_opt_scalar,
    rebuild_placement_map,
    rebuild_tuple_empty,
)
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

PARAM_PLAN_KEYS = (
    "params",
    "in_src",
    "in_dst",
    "out_src",
    "out_dst",
    "out_names",
    "tp_divide_attrs",
    "is_boundary",
    "region_dispatch",
    "deferred_bias_params",
    "skip_source_lowering",
)
INJECTION_KEYS = (
    "inner_wrapper",
    "inner_target",
    "inner_out_src",
    "local_compute_fn",
    "ep_stack",
    "ep_size",
)


def freeze_param_plan(plan: ShardingPlan) -> dict[str, dict[str, Any]]:
    param_plan: dict[str, dict[str, Any]] = {}
    for fqn, spec in plan.modules.items():
        path = module_path(fqn)
        entry: dict[str, Any] = {}
        if spec.params is not None:
            entry["params"] = freeze_placement_map(spec.params, path + ".params")
        if spec.in_src is not None:
            entry["in_src"] = freeze_named_placements(spec.in_src, path + ".in_src")
        if spec.in_dst is not None:
            entry["in_dst"] = freeze_named_placements(spec.in_dst, path + ".in_dst")
        if spec.out_src is not None:
            entry["out_src"] = freeze_named_placements(spec.out_src, path + ".out_src")
        if spec.out_dst is not None:
            entry["out_dst"] = freeze_named_placements(spec.out_dst, path + ".out_dst")
        if spec.out_names:
            entry["out_names"] = freeze_name_list(spec.out_names, path + ".out_names")
        if spec.tp_divide_attrs is not None:
            entry["tp_divide_attrs"] = freeze_attr_list(
                spec.tp_divide_attrs, path + ".tp_divide_attrs"
            )
        if spec.is_boundary is not None:
            entry["is_boundary"] = freeze_scalar(spec.is_boundary, path + ".is_boundary")
        if spec.region_dispatch is not None:
            entry["region_dispatch"] = freeze_scalar(
                spec.region_dispatch, path + ".region_dispatch"
            )
        if spec._deferred_bias_params:
            entry["deferred_bias_params"] = freeze_name_list(
                spec._deferred_bias_params, path + "._deferred_bias_params"
            )
        if spec.skip_source_lowering:
            entry["skip_source_lowering"] = freeze_int_truthy(
                spec.skip_source_lowering, path + ".skip_source_lowering"
            )
        param_plan[fqn] = entry
    return param_plan


def freeze_injections(plan: ShardingPlan) -> list[dict[str, Any]]:
    injections: list[dict[str, Any]] = []
    for fqn, spec in plan.modules.items():
        rule: dict[str, Any] = {"match": fqn}
        if spec.inner_wrapper is not None:
            rule["inner_wrapper"] = freeze_value_to_dict(
                spec.inner_wrapper, module_path(fqn) + ".inner_wrapper"
            )
        if spec.inner_target is not None:
            rule["inner_target"] = freeze_plain(
                spec.inner_target, module_path(fqn) + ".inner_target"
            )
        if spec.inner_out_src is not None:
            rule["inner_out_src"] = freeze_value_to_dict(
                spec.inner_out_src, module_path(fqn) + ".inner_out_src"
            )
        if spec.local_compute_fn is not None:
            rule["local_compute_fn"] = freeze_value_to_dict(
                spec.local_compute_fn, module_path(fqn) + ".local_compute_fn"
            )
        if spec._ep_stack:
            rule["ep_stack"] = freeze_dict_copy(spec._ep_stack, module_path(fqn) + "._ep_stack")
        if spec._ep_size:
            rule["ep_size"] = freeze_int_truthy(spec._ep_size, module_path(fqn) + "._ep_size")
        if len(rule) > 1:
            injections.append(rule)
    return injections


def rebuild_live_plan_from_meta(meta: CodegenMeta, *, strict: bool = True) -> ShardingPlan:
    check_meta(meta)
    rules = index_rules(meta, INJECTION_KEYS, strict)
    plan = plan_shell(meta)
    no_rule: tuple[int, dict[str, Any]] = (-1, {})
    for fqn, entry in meta.param_plan.items():
        entry = check_entry(entry, fqn, PARAM_PLAN_KEYS, strict)
        path = entry_path(fqn)
        get = entry.get
        v = get("params")
        params = None if v is None else rebuild_placement_map(v, path + ".params")
        v = get("in_src")
        in_src = None if v is None else rebuild_named_placements(v, path + ".in_src")
        v = get("in_dst")
        in_dst = None if v is None else rebuild_named_placements(v, path + ".in_dst")
        v = get("out_src")
        out_src = None if v is None else rebuild_named_placements(v, path + ".out_src")
        v = get("out_dst")
        out_dst = None if v is None else rebuild_named_placements(v, path + ".out_dst")
        v = get("out_names")
        out_names = None if v is None else rebuild_name_list(v, path + ".out_names")
        v = get("tp_divide_attrs")
        tp_divide_attrs = None if v is None else rebuild_attr_list(v, path + ".tp_divide_attrs")
        v = get("is_boundary")
        is_boundary = True if v is None else rebuild_bool_default_true(v, path + ".is_boundary")
        v = get("region_dispatch")
        region_dispatch = None if v is None else rebuild_opt_scalar(v, path + ".region_dispatch")
        v = get("deferred_bias_params")
        deferred = () if v is None else rebuild_tuple_empty(v, path + ".deferred_bias_params")
        v = get("skip_source_lowering")
        skip = None if v is None else rebuild_opt_scalar(v, path + ".skip_source_lowering")
        index, rule = rules.get(fqn, no_rule)
        if rule:
            path = rule_path(index)
            get = rule.get
            v = get("inner_wrapper")
            inner_wrapper = (
                None if v is None else rebuild_injection_target(v, path + ".inner_wrapper")
            )
            v = get("inner_target")
            inner_target = None if v is None else rebuild_opt_scalar(v, path + ".inner_target")
            v = get("inner_out_src")
            inner_out_src = (
                None if v is None else rebuild_injection_target(v, path + ".inner_out_src")
            )
            v = get("local_compute_fn")
            local_compute_fn = (
                None if v is None else rebuild_injection_target(v, path + ".local_compute_fn")
            )
            v = get("ep_stack")
            ep_stack = {} if v is None else rebuild_dict_copy(v, path + ".ep_stack")
            v = get("ep_size")
            ep_size = 0 if v is None else rebuild_int_truthy(v, path + ".ep_size")
        else:
            inner_wrapper = inner_target = inner_out_src = local_compute_fn = None
            ep_stack, ep_size = {}, 0
        spec = ModuleShardingSpec(
            params=params,
            in_src=in_src,
            in_dst=in_dst,
            out_src=out_src,
            out_dst=out_dst,
            out_names=out_names,
            tp_divide_attrs=tp_divide_attrs,
            is_boundary=is_boundary,
            region_dispatch=region_dispatch,
            skip_source_lowering=skip,
            inner_wrapper=inner_wrapper,
            inner_target=inner_target,
            inner_out_src=inner_out_src,
            local_compute_fn=local_compute_fn,
            _ep_stack=ep_stack,
            _ep_size=ep_size,
        )
        spec._deferred_bias_params = deferred
        plan.modules[fqn] = spec
    return plan
