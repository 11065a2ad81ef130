"""The table-driven reference: freeze and rebuild by walking SPEC_FIELDS at run time.

It is the oracle generated code is tested against and the baseline it is measured
against, so it is written to be obviously right, not fast: every field goes through
the kind functions of ``shardplan.convert.kinds``, looked up by the names in the table.
"""

from __future__ import annotations

from typing import Any

from shardplan.artifact.meta import CodegenMeta, check_meta
from shardplan.artifact.plan_meta import (
    MATCH_KEY,
    check_entry,
    check_modules,
    entry_path,
    index_rules,
    meta_for_plan,
    module_path,
    plan_shell,
    rule_path,
)
from shardplan.convert.kinds import (
    FREEZE_KINDS,
    REBUILD_KINDS,
    WRITTEN_WHEN,
    absent_value,
    admit,
    read_renamed,
    refuse_none,
    written,
)
from shardplan.convert.trust import begin_rebuild, end_rebuild
from shardplan.errors import field_path
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import (
    GROUP_INJECTIONS,
    GROUP_PARAM_PLAN,
    INJECTION_SPEC_FIELDS,
    PARAM_PLAN_SPEC_FIELDS,
    SpecField,
    accepted_keys,
)


def _freeze_fields(
    spec: ModuleShardingSpec, fields: tuple[SpecField, ...], path: str
) -> dict[str, Any]:
    frozen: dict[str, Any] = {}
    for spec_field in fields:
        value = getattr(spec, spec_field.name)
        where = field_path(path, spec_field.name)
        if written(spec_field.freeze, value):
            converted = FREEZE_KINDS[spec_field.freeze](value, where)
            # Always read back with the row's rebuild kind: the oracle need not be fast.
            frozen[spec_field.key] = admit(REBUILD_KINDS[spec_field.rebuild], converted, where)
        elif WRITTEN_WHEN[spec_field.freeze] == "not None" and (
            absent_value(spec_field.rebuild) is not None
        ):
            # None means "absent" and must read back as None, or the plan would not come
            # back (the truthy kinds' other falsy values normalise, as SPEC §5 says).
            refuse_none(absent_value(spec_field.rebuild), where)
    return frozen


def freeze_param_plan(plan: ShardingPlan) -> dict[str, dict[str, Any]]:
    """Freeze every module's param_plan entry, keys in table order."""
    check_modules(plan)
    return {
        fqn: _freeze_fields(spec, PARAM_PLAN_SPEC_FIELDS, module_path(fqn))
        for fqn, spec in plan.modules.items()
    }


def freeze_injections(plan: ShardingPlan) -> list[dict[str, Any]]:
    """One rule per module with any injection written, in plan.modules order."""
    check_modules(plan)
    rules = []
    for fqn, spec in plan.modules.items():
        written = _freeze_fields(spec, INJECTION_SPEC_FIELDS, module_path(fqn))
        if written:
            rules.append({MATCH_KEY: fqn, **written})
    return rules


def freeze_plan(plan: ShardingPlan) -> CodegenMeta:
    """Freeze a whole plan into a CodegenMeta."""
    return meta_for_plan(plan, freeze_param_plan(plan), freeze_injections(plan))


def _rebuild_fields(
    obj: dict[str, Any], fields: tuple[SpecField, ...], path: str
) -> dict[str, Any]:
    values = {}
    for spec_field in fields:
        value, where = read_renamed(obj, spec_field.key, spec_field.aliases, path)
        rebuild = REBUILD_KINDS[spec_field.rebuild]
        values[spec_field.name] = (
            absent_value(spec_field.rebuild) if value is None else rebuild(value, where)
        )
    return values


PARAM_PLAN_KEYS = accepted_keys(GROUP_PARAM_PLAN)
INJECTION_KEYS = accepted_keys(GROUP_INJECTIONS)


def rebuild_live_plan_from_meta(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: tuple[str, ...] = ()
) -> ShardingPlan:
    """Rebuild a live plan from a meta. Strict by default: unknown keys are MetaErrors;
    ``strict=False`` ignores them and nothing else. Targets are admitted only under
    ``allow_targets``, module prefixes the caller trusts (shardplan.convert.trust)."""
    token = begin_rebuild(allow_targets)
    try:
        return _rebuild(meta, strict)
    finally:
        end_rebuild(token)


def _rebuild(meta: CodegenMeta, strict: bool) -> ShardingPlan:
    check_meta(meta)
    rules = index_rules(meta, INJECTION_KEYS, strict)
    plan = plan_shell(meta)
    for fqn, entry in meta.param_plan.items():
        entry = check_entry(entry, fqn, PARAM_PLAN_KEYS, strict)
        values = _rebuild_fields(entry, PARAM_PLAN_SPEC_FIELDS, entry_path(fqn))
        index, rule = rules.get(fqn, (-1, {}))
        values.update(_rebuild_fields(rule, INJECTION_SPEC_FIELDS, rule_path(index)))
        post_init = {
            f.name: values.pop(f.name)
            for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS)
            if f.post_init
        }
        spec = ModuleShardingSpec(**values)
        for name, value in post_init.items():
            setattr(spec, name, value)
        plan.modules[fqn] = spec
    return plan


def rebuild_plan(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: tuple[str, ...] = ()
) -> ShardingPlan:
    """``rebuild_live_plan_from_meta``, under the public name ``shardplan.api`` gives it."""
    return rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)
