"""The table-driven reference: freeze and rebuild by walking both tables at run time.

It is the oracle generated code is tested against and the baseline it is measured
against, so it is written to be obviously right, not fast: every field goes through
the kind functions of ``shardplan.convert.kinds``, looked up by the names in the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from shardplan.artifact.meta import CodegenMeta, check_meta
from shardplan.artifact.plan_meta import (
    check_entry,
    check_modules,
    entry_path,
    frozen_other_keys,
    index_rules,
    module_path,
    other_keys_of,
    rule_path,
)
from shardplan.artifact.shapes import UNSET
from shardplan.convert import kinds
from shardplan.convert.kinds import (
    admit,
    read_renamed,
    refuse_default,
    refuse_falsy,
    refuse_none,
    refuse_null,
)
from shardplan.convert.trust import READ_BACK, Admission, AllowTargets, admission
from shardplan.errors import MetaError, check_argument, field_path
from shardplan.table.format import (
    GROUP_DERIVED,
    GROUP_INJECTIONS,
    GROUP_OTHERS,
    GROUP_PARAM_PLAN,
    GROUP_PLAN,
    MATCH_KEY,
)
from shardplan.table.kinds import Crossing, crossings
from shardplan.table.plan_fields import PLAN_FIELDS, PLAN_RETIRED_KEYS
from shardplan.table.rows import rows_of_group
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import (
    INJECTION_SPEC_FIELDS,
    PARAM_PLAN_SPEC_FIELDS,
    SPEC_FIELDS,
    SpecField,
    accepted_keys,
)

# Each keyed row's crossing, resolved once, by row name, a table each.
SPEC_CROSSINGS: dict[str, Crossing] = crossings(SPEC_FIELDS, ModuleShardingSpec)
PLAN_CROSSINGS: dict[str, Crossing] = crossings(PLAN_FIELDS, ShardingPlan)


def function(crossing: Crossing, step: str) -> Callable[..., Any]:
    """The kinds' function ``crossing`` names for ``step`` (freeze, rebuild, check)."""
    return getattr(kinds, crossing.function(step))  # type: ignore[no-any-return]


def rebuild_function(crossing: Crossing, targets: Admission) -> Callable[[Any, str], Any]:
    """The row's rebuild as ``(value, path)``: one that builds Targets (its record's
    ``targets``) is passed ``targets``, what the rebuild's caller allowed."""
    rebuild = function(crossing, "rebuild")
    if crossing.rebuild_record.targets:
        return lambda value, path: rebuild(value, path, targets)
    return rebuild


def _freeze_fields(
    spec: ModuleShardingSpec, fields: tuple[SpecField, ...], path: str
) -> dict[str, Any]:
    frozen: dict[str, Any] = {}
    for spec_field in fields:
        value = getattr(spec, spec_field.name)
        where = field_path(path, spec_field.name)
        crossing = SPEC_CROSSINGS[spec_field.name]
        if crossing.writes(value) and value is None and crossing.writes_null:
            frozen[spec_field.key] = None  # null reads back as None, not through the kind
        elif crossing.writes(value):
            converted = function(crossing, "freeze")(value, where)
            # Always read back with the row's rebuild kind: the oracle need not be fast. A
            # planner's own Targets are trusted code (READ_BACK).
            rebuild = rebuild_function(crossing, READ_BACK)
            frozen[spec_field.key] = admit(rebuild, converted, where)
        elif value is None and crossing.refuses_none:
            # None means "absent" and must read back as None, or the plan would not come
            # back (the truthy kinds' other falsy values normalise, as docs/contract.md §6 says).
            refuse_none(where, absent=crossing.absent_value())
    return frozen


def freeze_param_plan(plan: ShardingPlan) -> dict[str, dict[str, Any]]:
    """Freeze every module's param_plan entry, keys in table order."""
    check_modules(plan)
    return {
        fqn: _freeze_fields(spec, PARAM_PLAN_SPEC_FIELDS, module_path(fqn))
        for fqn, spec in plan.modules.items()
    }


def freeze_injections(plan: ShardingPlan) -> list[dict[str, Any]]:
    """One rule per module with any injection written, ordered by match."""
    check_modules(plan)
    rules = []
    for fqn, spec in plan.modules.items():
        written = _freeze_fields(spec, INJECTION_SPEC_FIELDS, module_path(fqn))
        if written:
            rules.append({MATCH_KEY: fqn, **written})
    return sorted(rules, key=lambda rule: rule[MATCH_KEY])


PLAN_LEVEL_FIELDS = rows_of_group(PLAN_FIELDS, GROUP_PLAN)
DERIVED_FIELDS = rows_of_group(PLAN_FIELDS, GROUP_DERIVED)
OTHERS_FIELD = rows_of_group(PLAN_FIELDS, GROUP_OTHERS)[0]
# The keys the plan table owns (keys, aliases, retired keys), by the object they live in
# ("" for the top level); the rest of the document rides along.
_OWNED: dict[str, list[str]] = {"": []}
for _within, _leaf in [
    place
    for f in (*PLAN_LEVEL_FIELDS, *DERIVED_FIELDS)
    for place in ((f.within, f.leaf), *f.alias_places)
] + [(r.within, r.leaf) for r in PLAN_RETIRED_KEYS]:
    _OWNED.setdefault(_within, []).append(_leaf)
    if _within and _within not in _OWNED[""]:
        _OWNED[""].append(_within)
OWNED_KEYS = tuple(_OWNED[""])
NESTED_KEYS = {outer: tuple(keys) for outer, keys in _OWNED.items() if outer}


def _plan_level_names() -> set[str]:
    """CodegenMeta's fields for the plan level: all but the spec table's containers and extra."""
    structural = {GROUP_PARAM_PLAN, GROUP_INJECTIONS, "extra"}
    return {f.name for f in fields(CodegenMeta)} - structural


def freeze_plan(plan: ShardingPlan) -> CodegenMeta:
    """Freeze a whole plan into a CodegenMeta: the entries and rules, then every row of the
    plan table, then the keys no row owns as the plan carries them."""
    param_plan = freeze_param_plan(plan)
    injections = freeze_injections(plan)
    other = getattr(plan, OTHERS_FIELD.name)
    document, nested = frozen_other_keys(other, OTHERS_FIELD.name, OWNED_KEYS, NESTED_KEYS)
    document.update(nested)
    for spec_field in PLAN_LEVEL_FIELDS:
        value = getattr(plan, spec_field.name)
        crossing = PLAN_CROSSINGS[spec_field.name]
        if crossing.writes(value):
            # null reads back as the absent value (mesh_dim_names: None), not through the kind.
            frozen = (
                None
                if value is None and crossing.writes_null
                else admit(
                    rebuild_function(crossing, READ_BACK),
                    function(crossing, "freeze")(value, spec_field.name),
                    spec_field.name,
                )
            )
            within = spec_field.within
            (document[within] if within else document)[spec_field.leaf] = frozen
        elif value is None and crossing.refuses_none:
            refuse_none(spec_field.name, absent=crossing.absent_value())
    for spec_field in DERIVED_FIELDS:
        freeze = function(PLAN_CROSSINGS[spec_field.name], "freeze")
        document[spec_field.key] = freeze(param_plan)
    known = _plan_level_names()
    return CodegenMeta(
        param_plan=param_plan,
        injections=injections,
        extra={k: v for k, v in document.items() if k not in known},
        **{k: v for k, v in document.items() if k in known},
    )


def _rebuild_fields(
    obj: dict[str, Any],
    fields: tuple[SpecField, ...],
    path: str,
    strict: bool,
    targets: Admission,
) -> dict[str, Any]:
    values = {}
    for spec_field in fields:
        crossing = SPEC_CROSSINGS[spec_field.name]
        missing = UNSET if crossing.null_is_none else None  # else null reads as absent
        value, where = read_renamed(obj, spec_field.key, spec_field.aliases, path, missing)
        values[spec_field.name] = _rebuilt(spec_field, crossing, value, where, strict, targets)
    return values


def _rebuilt(
    spec_field: SpecField,
    crossing: Crossing,
    value: Any,
    where: str,
    strict: bool,
    targets: Admission,
) -> Any:
    """One row's live value from the ``value`` read (UNSET: the key is absent)."""
    if value is UNSET or value is None and not crossing.null_is_none:
        return crossing.absent_value()
    if value is None:
        return None
    rebuilt = rebuild_function(crossing, targets)(value, where)
    if strict and crossing.written == "truthy" and not value:
        refuse_falsy(value, where)  # freeze would drop it: strict reads only what freeze writes
    if strict and crossing.written == "not default" and crossing.is_absent_value(rebuilt):
        refuse_default(value, where)
    return rebuilt


def _null_keys(group: str) -> tuple[str, ...]:
    """The keys of ``group`` freeze may write null under, with their older names."""
    rows = [f for f in rows_of_group(SPEC_FIELDS, group) if SPEC_CROSSINGS[f.name].writes_null]
    return tuple(key for f in rows for key in (f.key, *f.aliases))


PARAM_PLAN_KEYS = accepted_keys(GROUP_PARAM_PLAN)
INJECTION_KEYS = accepted_keys(GROUP_INJECTIONS)
PARAM_PLAN_NULL_KEYS = _null_keys(GROUP_PARAM_PLAN)
INJECTION_NULL_KEYS = _null_keys(GROUP_INJECTIONS)


def rebuild_live_plan_from_meta(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """Rebuild a live plan from a meta. Strict by default: unknown keys are MetaErrors;
    ``strict=False`` ignores them, and reads as absent a null, a falsy value under a key
    written only when truthy, the default under a key written only when not it and a rule
    holding only ``match``, and recomputes a stale derived key; a wrong type is an error in
    both. Targets are admitted only under
    ``allow_targets``, what the caller trusts (shardplan.convert.trust)."""
    check_argument(meta, CodegenMeta, "a CodegenMeta", MetaError)
    check_argument(strict, bool, "True or False", MetaError, "strict")
    return _rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)


def _rebuild_live_plan_from_meta(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """The table walk under the name upstream's runtime calls, as generated/rebuild.py
    defines it; Targets admitted only under ``allow_targets`` (none by default)."""
    targets = admission(allow_targets)  # trust: checked here, passed down to each Target
    check_meta(meta)
    rules = index_rules(meta, INJECTION_KEYS, strict, INJECTION_NULL_KEYS)
    # The document as the file holds it: a field that is UNSET is a key it does not have.
    held = {name: getattr(meta, name) for name in _plan_level_names()}
    document = {**meta.extra, **{name: v for name, v in held.items() if v is not UNSET}}
    settings: dict[str, Any] = {}
    for spec_field in PLAN_LEVEL_FIELDS:
        within = spec_field.within
        source = document.get(within, {}) if within else document
        value, where = read_renamed(source, spec_field.leaf, spec_field.alias_leaves, within, UNSET)
        where = where.lstrip(".")
        crossing = PLAN_CROSSINGS[spec_field.name]
        if value is None and strict and not crossing.writes_null:
            refuse_null(
                where, absent=crossing.absent_value()
            )  # freeze writes the value, never null
        settings[spec_field.name] = _rebuilt(spec_field, crossing, value, where, strict, targets)
    plan = ShardingPlan(modules={}, **settings)
    containers = {within: document.get(within) for within in NESTED_KEYS}
    extra = {key: v for key, v in document.items() if key not in NESTED_KEYS}
    other = other_keys_of(extra, containers, OWNED_KEYS, NESTED_KEYS)  # type: ignore[arg-type]
    setattr(plan, OTHERS_FIELD.name, other)
    for fqn, entry in meta.param_plan.items():
        entry = check_entry(entry, fqn, PARAM_PLAN_KEYS, strict, PARAM_PLAN_NULL_KEYS)
        values = _rebuild_fields(entry, PARAM_PLAN_SPEC_FIELDS, entry_path(fqn), strict, targets)
        index, rule = rules.get(fqn, (-1, {}))
        values.update(
            _rebuild_fields(rule, INJECTION_SPEC_FIELDS, rule_path(index), strict, targets)
        )
        post_init = {
            f.name: values.pop(f.name)
            for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS)
            if f.post_init
        }
        spec = ModuleShardingSpec(**values)
        for name, value in post_init.items():
            setattr(spec, name, value)
        plan.modules[fqn] = spec
    for spec_field in DERIVED_FIELDS:
        value = document.get(spec_field.key)
        if strict and value is not None:  # absent or null: recomputed by freeze
            check = function(PLAN_CROSSINGS[spec_field.name], "check")
            check(value, spec_field.key, meta.param_plan)
    return plan


def rebuild_plan(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """``rebuild_live_plan_from_meta``, under the public name ``shardplan.api`` gives it."""
    return rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)
