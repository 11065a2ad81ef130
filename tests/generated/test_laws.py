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
import functools
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
from shardplan.table.spec_fields import INJECTION_SPEC_FIELDS, PARAM_PLAN_SPEC_FIELDS
from tests import strategies
from tests.implementations import IMPLEMENTATIONS
from tests.older_artifacts import frozen_again

TRUSTED = strategies.TARGET_ENTRIES


def nested(depth: int, leaf: Any = "x") -> Any:
    """A value whose containers nest ``depth`` levels (alternating objects and arrays)."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


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

ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 7, 2**60, 1.5, 2.0, -0.0, "", "s", "S(0)", "R", "self",
    [], ["a"], [1], [["a", "b"]], [["a"]], {}, {"tp": "S(0)"}, {"x": {"tp": "R"}},
    {"k": "v"}, {"_target_": "json.dumps"}, {"_target_": "json.dumps", "k": [1]},
    nested(MAX_DEPTH - 1), nested(MAX_DEPTH), nested(MAX_DEPTH + 1),
]  # fmt: skip
ENTRY_KEYS = [f.key for f in PARAM_PLAN_SPEC_FIELDS]
RULE_KEYS = [f.key for f in INJECTION_SPEC_FIELDS]
PLAN_PLACES: list[tuple[str, ...]] = [
    ("special_handlers",),
    ("mesh_dim_names",),
    ("tied_pairs",),
    ("parallel_dims", "sequence_parallel"),
    ("parallel_dims", "loss_parallel"),
    ("parallel_dims", "tp_size"),  # another producer's key
    ("frozen_sharded_params",),
    ("codegen_version",),  # another producer's key
]


def _planted(document: dict[str, Any], rng: random.Random, value: Any) -> dict[str, Any]:
    """``document`` with ``value`` planted at one crossing key (or inside one: a Target's
    kwarg, an ep_stack value), chosen by ``rng``."""
    document = copy.deepcopy(document)
    value = copy.deepcopy(value)
    place = rng.randrange(5)
    if place == 0 and document["param_plan"]:
        entry = document["param_plan"][rng.choice(sorted(document["param_plan"]))]
        entry[rng.choice(ENTRY_KEYS)] = value
    elif place == 1 and document["injections"]:
        rng.choice(document["injections"])[rng.choice(RULE_KEYS)] = value
    elif place == 2 and document["injections"]:
        # Inside a value: a Target's kwarg, or an ep_stack member.
        rule = rng.choice(document["injections"])
        targets = [v for v in rule.values() if isinstance(v, dict) and "_target_" in v]
        holder = targets[0] if targets and rng.random() < 0.5 else rule.setdefault("ep_stack", {})
        if isinstance(holder, dict):
            holder["planted"] = value
    else:
        where = rng.choice(PLAN_PLACES)
        if where == ("frozen_sharded_params",) and value is None:
            return document  # a derived key's null reads as absent: recomputed (docstring)
        parent = document
        for step in where[:-1]:
            parent = parent.setdefault(step, {})
        parent[where[-1]] = value
    return document


@functools.cache
def bases() -> list[dict[str, Any]]:
    """Forty drawn documents, drawn when a test first asks (not at collection, where a kind
    without its pool would stop the whole suite instead of failing the tests that draw)."""
    return [strategies.frozen_json(strategies.random_plan(seed)) for seed in range(40)]


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
    document = _planted(bases()[index], random.Random(seed), value)
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


def _entry(**keys: Any) -> dict[str, Any]:
    return {"param_plan": {"m": {"is_boundary": True, **keys}}, "injections": []}


def _rule(**keys: Any) -> dict[str, Any]:
    return {"param_plan": {"m": {"is_boundary": True}}, "injections": [{"match": "m", **keys}]}


REFUSED_STRICTLY: dict[str, tuple[dict[str, Any], str]] = {
    # skip_source_lowering: int_truthy writes a truthy int or true, nothing else.
    **{
        f"skip_source_lowering {value!r}": (
            _entry(skip_source_lowering=value),
            'param_plan["m"].skip_source_lowering',
        )
        for value in (1.5, 2.0, "s", "S(0)", 0, False, "")
    },
    "out_names []": (_entry(out_names=[]), 'param_plan["m"].out_names'),
    "deferred_bias_params []": (
        _entry(deferred_bias_params=[]),
        'param_plan["m"].deferred_bias_params',
    ),
    "ep_size 0": (_rule(ep_size=0), "injections[0].ep_size"),
    "ep_stack {}": (_rule(ep_stack={}), "injections[0].ep_stack"),
    "a rule holding only match": (_rule(), "injections[0]"),
    "is_boundary null": (_entry(is_boundary=None), 'param_plan["m"].is_boundary'),
    "inner_target null": (_rule(inner_target=None), "injections[0].inner_target"),
    "ep_stack nested past the limit": (
        _rule(ep_stack={"deep": nested(MAX_DEPTH)}),
        "injections[0].ep_stack",
    ),
    "a Target kwarg nested past the limit": (
        _rule(local_compute_fn={"_target_": "json.dumps", "k": nested(MAX_DEPTH + 1)}),
        "injections[0].local_compute_fn.k",
    ),
    "parallel_dims.loss_parallel null": (
        {**_entry(), "parallel_dims": {"loss_parallel": None}},
        "parallel_dims.loss_parallel",
    ),
    "another producer's key nested past the limit": (
        {**_entry(), "codegen_version": nested(MAX_DEPTH)},
        "codegen_version",
    ),
}


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
    without = frozen_again(_entry())
    assert again["param_plan"] == without["param_plan"]
    assert again["injections"] == without["injections"]


# ------------------------------------------------------------------ one depth limit


# The places a value nests freely, as a plan holds it and as the artifact holds it.
DEEP_PLACES = {
    "ep_stack": (
        lambda value: ShardingPlan(modules={"m": ModuleShardingSpec(_ep_stack={"v": value})}),
        lambda value: _rule(ep_stack={"v": value}),
    ),
    "Target kwarg": (
        lambda value: ShardingPlan(
            modules={"m": ModuleShardingSpec(local_compute_fn=Target("json.dumps", v=value))}
        ),
        lambda value: _rule(local_compute_fn={"_target_": "json.dumps", "v": value}),
    ),
    "other producer's key": (
        lambda value: ShardingPlan(other_keys={"meta": value}),
        lambda value: {**_entry(), "meta": value},
    ),
    "other parallel_dims key": (
        lambda value: ShardingPlan(other_keys={"parallel_dims": {"meta": value}}),
        lambda value: {**_entry(), "parallel_dims": {"meta": value}},
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
