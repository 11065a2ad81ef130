"""The field table: which ModuleShardingSpec field crosses the artifact boundary, and how.

This module is pure data. It imports nothing but the standard library, because the
generator and the staleness guard of every generated module read it, and neither may
pay for importing torch.

Row order is load-bearing: it is the key insertion order of every frozen entry and rule.
"""

from __future__ import annotations

from shardplan.table.format import (
    GROUP_EXEMPT,
    GROUP_INJECTIONS,
    GROUP_PARAM_PLAN,
    TABLE_GROUPS,
)
from shardplan.table.rows import (
    RetiredKey,
    SpecField,
    accepted_keys as _accepted_keys,
    rows_digest,
    rows_of_group,
)

GROUPS = TABLE_GROUPS["spec"]

# One row a field, in frozen key order, each with the one-line doc the artifact's schema
# and field reference show. Kept as a table (black would put every argument on a line).
# fmt: off
SPEC_FIELDS: tuple[SpecField, ...] = (
    SpecField("params", "params", GROUP_PARAM_PLAN, "placement_map", "placement_map",
              doc="Parameter path (relative to the module) -> named placement; {} shards nothing."),
    SpecField("in_src", "in_src", GROUP_PARAM_PLAN, "named_placements", "named_placements",
              doc="Input name -> the placement the input arrives in."),
    SpecField("in_dst", "in_dst", GROUP_PARAM_PLAN, "named_placements", "named_placements",
              doc="Input name -> the placement the module computes on."),
    SpecField("out_src", "out_src", GROUP_PARAM_PLAN, "named_placements", "named_placements",
              doc="Output name -> the placement the module produces."),
    SpecField("out_dst", "out_dst", GROUP_PARAM_PLAN, "named_placements", "named_placements",
              doc="Output name -> the placement the output is redistributed to."),
    SpecField("out_names", "out_names", GROUP_PARAM_PLAN, "name_list", "name_list",
              doc="The declared order of the module's outputs."),
    SpecField("tp_divide_attrs", "tp_divide_attrs", GROUP_PARAM_PLAN, "attr_list", "attr_list",
              doc="Attributes divided by the TP degree; [] clears an inherited list."),
    SpecField("is_boundary", "is_boundary", GROUP_PARAM_PLAN, "scalar", "bool_default_true",
              doc="Whether inputs and outputs are redistributed at this module."),
    SpecField("region_dispatch", "region_dispatch", GROUP_PARAM_PLAN, "scalar", "opt_scalar",
              doc="Whether the module dispatches its region as a whole."),
    SpecField("_deferred_bias_params", "deferred_bias_params", GROUP_PARAM_PLAN,
              "name_list", "tuple_empty", post_init=True,
              doc="Biases added after the reduction instead of inside the sharded op."),
    SpecField("skip_source_lowering", "skip_source_lowering", GROUP_PARAM_PLAN,
              "int_truthy", "int_or_true",
              doc="A producer's marker (a truthy int or true): keep the module's source."),
    SpecField("inner_wrapper", "inner_wrapper", GROUP_INJECTIONS,
              "value_to_dict", "injection_target",
              doc="Wraps the module's inner computation: a Target or a registry name."),
    SpecField("inner_target", "inner_target", GROUP_INJECTIONS, "plain", "opt_scalar",
              doc='What the inner wrapper wraps: an attribute name, or "self".'),
    SpecField("inner_out_src", "inner_out_src", GROUP_INJECTIONS,
              "value_to_dict", "injection_target",
              doc="The inner wrapper's output: a registry name, named placement or contract."),
    SpecField("local_compute_fn", "local_compute_fn", GROUP_INJECTIONS,
              "value_to_dict", "injection_target",
              doc="Computes the module's local shard (e.g. expert compute): a Target."),
    SpecField("_ep_stack", "ep_stack", GROUP_INJECTIONS, "dict_copy", "dict_copy",
              doc="Expert-parallel configuration handed to local_compute_fn."),
    SpecField("_ep_size", "ep_size", GROUP_INJECTIONS, "int_truthy", "int_truthy",
              doc="The expert-parallel degree; absent means 0, no expert parallelism."),
    SpecField("_tp_local_attr_plan", "", GROUP_EXEMPT),
    SpecField("_is_terminal", "", GROUP_EXEMPT),
    SpecField("_needs_cp_attn", "", GROUP_EXEMPT),
    SpecField("_resolved_inner_wrapper", "", GROUP_EXEMPT),
    SpecField("_resolved_inner_target", "", GROUP_EXEMPT),
)
# fmt: on

# Keys of removed rows that artifacts may still hold: rebuild accepts and drops them.
RETIRED_KEYS: tuple[RetiredKey, ...] = ()


def fields_for_group(
    group: str, fields: tuple[SpecField, ...] = SPEC_FIELDS
) -> tuple[SpecField, ...]:
    """Return the rows of ``group``, in table order."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; known groups: {', '.join(GROUPS)}")
    return rows_of_group(fields, group)


def table_digest(
    fields: tuple[SpecField, ...] | None = None, retired: tuple[RetiredKey, ...] | None = None
) -> str:
    """sha256 over the table rows and the retired keys (default: as they are now), in order."""
    return rows_digest(
        SPEC_FIELDS if fields is None else fields, RETIRED_KEYS if retired is None else retired
    )


def accepted_keys(group: str) -> tuple[str, ...]:
    """The keys strict rebuild accepts in ``group``: current keys, aliases, retired keys."""
    return _accepted_keys(SPEC_FIELDS, RETIRED_KEYS, group)


PARAM_PLAN_SPEC_FIELDS = fields_for_group(GROUP_PARAM_PLAN)
INJECTION_SPEC_FIELDS = fields_for_group(GROUP_INJECTIONS)
POST_INIT_SPEC_FIELDS = tuple(f for f in SPEC_FIELDS if f.post_init)
FROZEN_SPEC_KEYS = tuple(f.key for f in SPEC_FIELDS if f.group != GROUP_EXEMPT)

__all__ = [
    "FROZEN_SPEC_KEYS",
    "GROUPS",
    "GROUP_EXEMPT",
    "GROUP_INJECTIONS",
    "GROUP_PARAM_PLAN",
    "INJECTION_SPEC_FIELDS",
    "PARAM_PLAN_SPEC_FIELDS",
    "POST_INIT_SPEC_FIELDS",
    "RETIRED_KEYS",
    "SPEC_FIELDS",
    "RetiredKey",
    "SpecField",
    "accepted_keys",
    "fields_for_group",
    "table_digest",
]
