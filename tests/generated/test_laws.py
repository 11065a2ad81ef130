"""The laws of freeze and rebuild, both ways and through the file (issue 19, docs/contract.md §6).

1. Strict rebuild accepts only what freeze gives back: for every meta M strict rebuild
   accepts, dump(freeze(rebuild(M))) is dump(M), with the keys freeze writes even at
   their absent value added where M lacks them (tests/older_artifacts.py: for a row
   written always, "unwritten" is no state). Lenient rebuild may normalise (it reads
   null, a falsy value under a key written only when truthy, and a rule with no injection
   as absent). Absent keys are read as their kind's absent value, and a derived key that
   is absent or null is recomputed: the law speaks of the keys a document holds.
2. The first write is a fixed point: rules are written ordered by match.
3. No aliasing: a meta and the plans rebuilt from it share no mutable container.
One depth limit holds on both sides, and the reader takes in only what the writer writes.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st
from torch.distributed.tensor import Replicate, Shard

from shardplan.artifact.meta import (
    MAX_DOCUMENT_DEPTH,
    dump_meta,
    load_meta,
    meta_from_dict,
    meta_to_bytes,
)
from shardplan.convert.json_values import MAX_DEPTH
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError, MetaError
from shardplan.table.format import GROUP_DERIVED
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests import strategies
from tests.cases import (
    ODD_VALUES,
    REFUSED_STRICTLY,
    bases,
    entry_document,
    nested,
    planted,
    rule_document,
)
from tests.implementations import IMPLEMENTATIONS
from tests.older_artifacts import frozen_again

TRUSTED = strategies.TARGET_ENTRIES


def strict_accepts(implementation: str, meta: Any) -> bool:
    try:
        IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(
            copy.deepcopy(meta), strict=True, allow_targets=TRUSTED
        )
    except MetaError:
        return False
    return True


def refrozen_bytes(implementation: str, meta: Any) -> bytes:
    impl = IMPLEMENTATIONS[implementation]
    plan = impl.rebuild_live_plan_from_meta(meta, strict=True, allow_targets=TRUSTED)
    return meta_to_bytes(impl.freeze_plan(plan))


# ------------------------------------------------------------------ law 1, drawn


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
@given(
    index=st.integers(0, 39),
    seed=st.integers(0, 2**32),
    value=st.sampled_from(ODD_VALUES),
)
def test_what_strict_rebuild_accepts_freezes_back_to_the_same_bytes(
    implementation: str, index: int, seed: int, value: Any
) -> None:
    """Law 1: a frozen document with a drawn value planted at a crossing key (odd scalars,
    empties, other kinds' shapes, nesting around the depth limit): if strict rebuild
    accepts it, freezing the rebuilt plan writes the document's bytes again (with any key
    written always that it lacks)."""
    document = planted(bases()[index], random.Random(seed), value)
    try:
        meta = meta_from_dict(document)
    except MetaError:
        return  # refused at load (a wrong JSON type at the top level)
    if strict_accepts(implementation, meta):
        expected = meta_to_bytes(meta_from_dict(frozen_again(document)))
        assert refrozen_bytes(implementation, meta) == expected


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
def test_an_older_artifact_gains_exactly_the_keys_written_always(implementation: str) -> None:
    """Law 1 for an artifact written before rows the table writes even at their absent
    value: holding no key it need not hold, it comes back with those keys at that value
    (tests/older_artifacts.py, which every byte-for-byte test expects) and nothing else,
    derived keys recomputed."""
    bare = {"param_plan": {"m": {}, "n": {}}, "injections": []}
    plan = IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(meta_from_dict(bare))
    again = json.loads(meta_to_bytes(IMPLEMENTATIONS[implementation].freeze_plan(plan)))
    for row in PLAN_FIELDS:
        if row.group == GROUP_DERIVED:
            again.pop(row.key)
    assert again == frozen_again(bare)


# ------------------------------------------------------------------ law 1, the cases


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize("case", sorted(REFUSED_STRICTLY))
def test_strict_rebuild_refuses_what_freeze_would_not_give_back(
    implementation: str, case: str
) -> None:
    document, path = REFUSED_STRICTLY[case]
    impl = IMPLEMENTATIONS[implementation]
    with pytest.raises(MetaError) as caught:
        impl.rebuild_live_plan_from_meta(meta_from_dict(document), allow_targets=("json.dumps",))
    assert caught.value.path.startswith(path), str(caught.value)


# What lenient rebuild reads as absent (a wrong type, or nesting past the limit, is an
# error in both modes).
LENIENT_NORMALISES = [
    "skip_source_lowering 0",
    "skip_source_lowering False",
    "out_names []",
    "deferred_bias_params []",
    "ep_size 0",
    "ep_stack {}",
    "a rule holding only match",
    "is_boundary null",
    "inner_target null",
    "parallel_dims.loss_parallel null",
]


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize("case", LENIENT_NORMALISES)
def test_lenient_rebuild_reads_the_unwritten_values_as_absent(
    implementation: str, case: str
) -> None:
    """Lenient mode normalises, as README says: the value is read as the key absent, so
    freezing again writes what it writes for the document without it (the keys written
    always among them: for such a row, unwritten is no state)."""
    document, _ = REFUSED_STRICTLY[case]
    impl = IMPLEMENTATIONS[implementation]
    plan = impl.rebuild_live_plan_from_meta(
        meta_from_dict(document), strict=False, allow_targets=("json.dumps",)
    )
    again = json.loads(meta_to_bytes(impl.freeze_plan(plan)))
    without = frozen_again(entry_document())
    assert again["param_plan"] == without["param_plan"]
    assert again["injections"] == without["injections"]


# ------------------------------------------------------------------ one depth limit


# The places a value nests freely, as a plan holds it and as the artifact holds it.
DEEP_PLACES = {
    "ep_stack": (
        lambda value: ShardingPlan(modules={"m": ModuleShardingSpec(_ep_stack={"v": value})}),
        lambda value: rule_document(ep_stack={"v": value}),
    ),
    "Target kwarg": (
        lambda value: ShardingPlan(
            modules={"m": ModuleShardingSpec(local_compute_fn=Target("json.dumps", v=value))}
        ),
        lambda value: rule_document(local_compute_fn={"_target_": "json.dumps", "v": value}),
    ),
    "other producer's key": (
        lambda value: ShardingPlan(other_keys={"meta": value}),
        lambda value: {**entry_document(), "meta": value},
    ),
    "other parallel_dims key": (
        lambda value: ShardingPlan(other_keys={"parallel_dims": {"meta": value}}),
        lambda value: {**entry_document(), "parallel_dims": {"meta": value}},
    ),
}


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize("place", sorted(DEEP_PLACES))
def test_freeze_and_rebuild_share_one_depth_limit(implementation: str, place: str) -> None:
    """A value nested around the limit, in each place values nest freely: freeze writes it
    exactly when strict rebuild reads it, and what it writes reads back."""
    impl = IMPLEMENTATIONS[implementation]
    as_plan, as_document = DEEP_PLACES[place]
    outcomes = []
    for depth in range(MAX_DEPTH - 3, MAX_DEPTH + 3):
        try:
            meta = impl.freeze_plan(as_plan(nested(depth)))
        except FreezeError:
            frozen = False
        else:
            frozen = True
            assert strict_accepts(implementation, meta), depth
        read = strict_accepts(implementation, meta_from_dict(as_document(nested(depth))))
        assert frozen == read, depth
        outcomes.append(frozen)
    assert True in outcomes and False in outcomes  # the limit lies in the range tried


def test_the_reader_takes_in_only_what_the_writer_writes(tmp_path: Path) -> None:
    """load_meta refuses a document nested deeper than dump_meta writes; at the limit,
    load then dump works."""
    for depth, readable in ((MAX_DOCUMENT_DEPTH, True), (MAX_DOCUMENT_DEPTH + 1, False)):
        document = {"param_plan": {}, "injections": [], "x": nested(depth - 1)}
        path = tmp_path / f"{depth}.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        if readable:
            dump_meta(load_meta(path), tmp_path / "again.json")
        else:
            with pytest.raises(MetaError, match="deeper than"):
                load_meta(path)
        compact = tmp_path / f"{depth}-compact.json"  # the strict reader's path
        compact.write_text(json.dumps(document))
        if readable:
            load_meta(compact)
        else:
            with pytest.raises(MetaError, match="deeper than"):
                load_meta(compact)


# ------------------------------------------------------------------ law 2


def _with_rules(order: list[int]) -> ShardingPlan:
    return ShardingPlan(
        modules={f"m.{n}": ModuleShardingSpec(inner_target="self", _ep_size=2) for n in order}
    )


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
def test_the_first_write_is_a_fixed_point_for_rules_in_any_order(
    implementation: str, tmp_path: Path
) -> None:
    """Rules were written in plan.modules order, and a rebuilt plan's modules come back in
    the file's sorted order: 0,1,2,...,10,11 became 0,1,10,11,2,... Now ordered by match."""
    impl = IMPLEMENTATIONS[implementation]
    plan = _with_rules(list(range(12)))
    first = meta_to_bytes(impl.freeze_plan(plan))
    path = tmp_path / "codegen_meta.json"
    dump_meta(impl.freeze_plan(plan), path)
    rebuilt = impl.rebuild_live_plan_from_meta(load_meta(path))
    assert meta_to_bytes(impl.freeze_plan(rebuilt)) == first
    rules = [rule["match"] for rule in json.loads(first)["injections"]]
    assert rules == sorted(rules) == [f"m.{n}" for n in (0, 1, 10, 11, *range(2, 10))]


@given(seed=st.integers(0, 2**32))
def test_the_first_write_is_a_fixed_point_for_random_plans(seed: int) -> None:
    """Law 2 on random plans, modules in a shuffled order: one write through the file and
    back writes the same bytes."""
    plan = strategies.random_plan(seed)
    items = list(plan.modules.items())
    random.Random(seed).shuffle(items)
    plan.modules = dict(items)
    impl = IMPLEMENTATIONS["generated"]
    first = meta_to_bytes(impl.freeze_plan(plan))
    rebuilt = impl.rebuild_live_plan_from_meta(
        meta_from_dict(json.loads(first)), allow_targets=TRUSTED
    )
    assert meta_to_bytes(impl.freeze_plan(rebuilt)) == first


# ------------------------------------------------------------------ law 3


def _plan_with_nested_values() -> ShardingPlan:
    return ShardingPlan(
        modules={
            "m": ModuleShardingSpec(
                params={"w": {"tp": Shard(0), "dp": Replicate()}},
                local_compute_fn=Target("json.dumps", shape=[1, [2]], opts={"a": {"b": 1}}),
                _ep_stack={"experts": {"per_rank": [4, 4]}},
                _ep_size=2,
            )
        },
        other_keys={"source": {"files": ["a.py"]}, "parallel_dims": {"tp_size": 2}},
    )


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
def test_a_frozen_meta_shares_nothing_with_the_live_plan(implementation: str) -> None:
    impl = IMPLEMENTATIONS[implementation]
    plan = _plan_with_nested_values()
    meta = impl.freeze_plan(plan)
    before = meta_to_bytes(meta)
    spec = plan.modules["m"]
    spec._ep_stack["experts"]["per_rank"].append(8)
    assert isinstance(spec.local_compute_fn, Target)
    spec.local_compute_fn.kwargs["shape"][1].append(3)
    spec.local_compute_fn.kwargs["opts"]["a"]["b"] = 2
    plan.other_keys["source"]["files"].append("b.py")
    plan.other_keys["parallel_dims"]["tp_size"] = 4
    assert meta_to_bytes(meta) == before


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
def test_two_rebuilds_share_nothing_with_the_meta_or_each_other(implementation: str) -> None:
    impl = IMPLEMENTATIONS[implementation]
    meta = impl.freeze_plan(_plan_with_nested_values())
    before = meta_to_bytes(meta)
    first = impl.rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
    second = impl.rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
    spec = first.modules["m"]
    spec._ep_stack["experts"]["per_rank"].append(8)
    assert isinstance(spec.local_compute_fn, Target)
    spec.local_compute_fn.kwargs["shape"][1].append(3)
    first.other_keys["source"]["files"].append("b.py")
    first.other_keys["parallel_dims"]["tp_size"] = 4
    assert meta_to_bytes(meta) == before
    assert second.modules["m"]._ep_stack == {"experts": {"per_rank": [4, 4]}}
    assert second.other_keys == {"source": {"files": ["a.py"]}, "parallel_dims": {"tp_size": 2}}
    target = second.modules["m"].local_compute_fn
    assert isinstance(target, Target) and target.kwargs["shape"] == [1, [2]]
