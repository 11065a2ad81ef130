"""Reflection tests: the field table and ModuleShardingSpec describe the same fields."""

from __future__ import annotations

import dataclasses

from shardplan.table.kinds import KIND_NAMES
from shardplan.table.spec import ModuleShardingSpec
from shardplan.table.spec_fields import (
    FROZEN_SPEC_KEYS,
    GROUP_EXEMPT,
    GROUPS,
    INJECTION_SPEC_FIELDS,
    PARAM_PLAN_SPEC_FIELDS,
    POST_INIT_SPEC_FIELDS,
    SPEC_FIELDS,
    table_digest,
)

SPEC_DATACLASS_FIELDS = {f.name: f for f in dataclasses.fields(ModuleShardingSpec)}


def test_table_names_are_the_spec_fields_in_order() -> None:
    assert [f.name for f in SPEC_FIELDS] == list(SPEC_DATACLASS_FIELDS)


# The rows of docs/contract.md §2, in order. A field added by README's "Adding a spec field"
# steps adds a row anywhere; these must all stay, in this order, with these keys and groups.
CONTRACT_ROWS = [
    ("params", "params", "param_plan"),
    ("in_src", "in_src", "param_plan"),
    ("in_dst", "in_dst", "param_plan"),
    ("out_src", "out_src", "param_plan"),
    ("out_dst", "out_dst", "param_plan"),
    ("out_names", "out_names", "param_plan"),
    ("tp_divide_attrs", "tp_divide_attrs", "param_plan"),
    ("is_boundary", "is_boundary", "param_plan"),
    ("region_dispatch", "region_dispatch", "param_plan"),
    ("_deferred_bias_params", "deferred_bias_params", "param_plan"),
    ("skip_source_lowering", "skip_source_lowering", "param_plan"),
    ("inner_wrapper", "inner_wrapper", "injections"),
    ("inner_target", "inner_target", "injections"),
    ("inner_out_src", "inner_out_src", "injections"),
    ("local_compute_fn", "local_compute_fn", "injections"),
    ("_ep_stack", "ep_stack", "injections"),
    ("_ep_size", "ep_size", "injections"),
    ("_tp_local_attr_plan", "", "exempt"),
    ("_is_terminal", "", "exempt"),
    ("_needs_cp_attn", "", "exempt"),
    ("_resolved_inner_wrapper", "", "exempt"),
    ("_resolved_inner_target", "", "exempt"),
]


def test_table_holds_the_rows_of_the_contract_in_order() -> None:
    rows = [(f.name, f.key, f.group) for f in SPEC_FIELDS]
    assert [row for row in rows if row in CONTRACT_ROWS] == CONTRACT_ROWS


def test_groups_partition_the_table() -> None:
    exempt = [f for f in SPEC_FIELDS if f.group == GROUP_EXEMPT]
    assert len(PARAM_PLAN_SPEC_FIELDS) + len(INJECTION_SPEC_FIELDS) + len(exempt) == len(
        SPEC_FIELDS
    )


def test_frozen_keys_are_unique_and_in_table_order() -> None:
    assert len(set(FROZEN_SPEC_KEYS)) == len(FROZEN_SPEC_KEYS)
    assert FROZEN_SPEC_KEYS == tuple(
        f.key for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS)
    )


def test_every_row_names_a_known_group_and_known_kinds() -> None:
    for row in SPEC_FIELDS:
        assert row.group in GROUPS, row
        if row.group != GROUP_EXEMPT:
            assert KIND_NAMES[row.freeze].freeze is not None, row
            assert KIND_NAMES[row.rebuild].rebuild is not None, row


# The seed table's runtime state (docs/contract.md §1); a user may add more exempt rows.
SEED_EXEMPT = (
    "_tp_local_attr_plan",
    "_is_terminal",
    "_needs_cp_attn",
    "_resolved_inner_wrapper",
    "_resolved_inner_target",
)


def test_exempt_rows_have_no_key_and_no_kinds() -> None:
    exempt = [f for f in SPEC_FIELDS if f.group == GROUP_EXEMPT]
    names = [f.name for f in exempt]
    assert [name for name in names if name in SEED_EXEMPT] == list(SEED_EXEMPT)
    assert all((f.key, f.freeze, f.rebuild, f.post_init) == ("", "", "", False) for f in exempt)


def test_post_init_flag_matches_dataclass_init_flag() -> None:
    for row in SPEC_FIELDS:
        if row.group != GROUP_EXEMPT:
            assert row.post_init == (not SPEC_DATACLASS_FIELDS[row.name].init), row.name
    assert "_deferred_bias_params" in [f.name for f in POST_INIT_SPEC_FIELDS]


# The seed fields' defaults as the contract states them (None unless listed); a field a user
# adds states its own default, which this test does not presume.
SEED_NOT_NONE = {
    "is_boundary": True,
    "_is_terminal": False,
    "_needs_cp_attn": False,
    "_ep_stack": {},
    "_ep_size": 0,
    "_deferred_bias_params": (),
}
SEED_NONE = (
    "params", "in_src", "in_dst", "out_src", "out_dst", "out_names", "tp_divide_attrs",
    "region_dispatch", "skip_source_lowering", "inner_wrapper", "inner_target",
    "inner_out_src", "local_compute_fn", "_tp_local_attr_plan", "_resolved_inner_wrapper",
    "_resolved_inner_target",
)  # fmt: skip


def test_spec_defaults_follow_the_contract() -> None:
    spec = ModuleShardingSpec()
    seed = {**dict.fromkeys(SEED_NONE), **SEED_NOT_NONE}
    assert {name: getattr(spec, name) for name in seed} == seed
    assert ModuleShardingSpec()._ep_stack is not spec._ep_stack  # a factory, not a shared dict


def test_post_construction_fields_are_not_compared_or_shown() -> None:
    for name in ("_tp_local_attr_plan", "_deferred_bias_params"):
        spec_field = SPEC_DATACLASS_FIELDS[name]
        assert (spec_field.init, spec_field.repr, spec_field.compare) == (False, False, False)


def test_table_digest_changes_with_any_row_and_with_order() -> None:
    digest = table_digest()
    assert len(digest) == 64 and digest == table_digest(SPEC_FIELDS)
    renamed = (dataclasses.replace(SPEC_FIELDS[0], key="param"), *SPEC_FIELDS[1:])
    swapped = (SPEC_FIELDS[1], SPEC_FIELDS[0], *SPEC_FIELDS[2:])
    assert len({digest, table_digest(renamed), table_digest(swapped)}) == 3
