"""The placement tables' fast paths (exact type tests, caches) mean exactly what their
strict walks mean: the same result, or the same error at the same path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from benchmarks import handwritten
from benchmarks.plans import llama_plan
from shardplan import api, reference
from shardplan.convert import placements
from shardplan.errors import FreezeError, MetaError
from tests.strategies import MeshAxis

TABLES = [
    {"w": {"tp": Shard(0), "dp": Replicate()}, "b": {"tp": Partial("max")}},
    {"w": {MeshAxis.TP: Shard(-1)}},  # Enum axis: the strict path
    {"w": {"tp": _StridedShard(1, split_factor=2)}},  # strided: the strict path
    {},
    {"w": {}},
]


@pytest.mark.parametrize("table", TABLES)
def test_fast_freeze_gives_what_strict_freeze_gives(table: dict[str, object]) -> None:
    for _ in range(2):  # the second time placement texts come from the cache
        fast = placements.freeze_placement_table(table, "p")
        assert fast == placements._freeze_table_strictly(table, "p")


@pytest.mark.parametrize(
    "bad",
    [{"w": {"tp": "S(0)"}}, {"w": [Shard(0)]}, [("w", {})], {"w": {"tp": Partial("premul_sum")}}],
)
def test_fast_freeze_refuses_what_strict_refuses_with_the_same_path(bad: object) -> None:
    with pytest.raises(FreezeError) as fast:
        placements.freeze_placement_table(bad, 'modules["m"].in_src')
    with pytest.raises(FreezeError) as strict:
        placements._freeze_table_strictly(bad, 'modules["m"].in_src')
    assert (fast.value.path, str(fast.value)) == (strict.value.path, str(strict.value))


@pytest.mark.parametrize(
    "obj",
    [
        {"w": {"tp": "S(0)", "dp": "R"}},
        {"w": {"tp": "SS(-1,4)"}},
        {"w": {"tp": "S(x)"}},
        {"w": {"tp": ["R"]}},
        {"w": {1: "R"}},
        {"w": "R"},
        [],
    ],
)
def test_fast_parse_gives_what_strict_parse_gives(obj: object) -> None:
    for _ in range(2):  # the second time texts come from the parse cache
        outcomes = []
        for rebuild in (placements.parse_placement_table, placements._parse_table_strictly):
            try:
                outcomes.append(("ok", rebuild(obj, "p")))
            except MetaError as exc:
                outcomes.append(("error", (exc.path, str(exc))))
        assert outcomes[0] == outcomes[1]


def test_placement_caches_stay_bounded() -> None:
    for dim in range(placements._CACHE_LIMIT + 10):
        placements.parse_placement_table({"w": {"tp": f"S({dim})"}}, "p")
        placements.freeze_placement_table({"w": {"tp": Shard(dim)}}, "p")
    assert len(placements._PARSED) <= placements._CACHE_LIMIT
    assert len(placements._TEXT_BY_ID) <= placements._CACHE_LIMIT == len(placements._KEPT)


def test_benchmark_hand_written_code_agrees_with_generated_and_reference() -> None:
    """make bench compares these three; they must compute the same thing. The hand-written
    code knows the product tables' fields only: with other rows, it says so (a skip naming
    why), as make bench does."""
    stale = handwritten.not_for_these_tables()
    if stale:
        pytest.skip(stale)
    plan = llama_plan(3)
    frozen = {
        json.dumps((m.freeze_param_plan(plan), m.freeze_injections(plan)))
        for m in (api, reference, handwritten)
    }
    assert len(frozen) == 1
    meta = reference.freeze_plan(plan)
    rebuilt = [
        m.rebuild_live_plan_from_meta(meta, allow_targets=("models.*",)).modules
        for m in (api, reference, handwritten)
    ]
    assert rebuilt[0] == rebuilt[1] == rebuilt[2]
    assert [s._deferred_bias_params for s in rebuilt[0].values()] == [
        s._deferred_bias_params for s in rebuilt[2].values()
    ]


def test_benchmark_hand_written_rebuild_refuses_what_the_generated_code_refuses() -> None:
    """The floor has the same checks: on every malformed meta and strict-law case, the
    hand-written rebuild raises the generated code's error (path and message)."""
    from shardplan.artifact.meta import meta_from_dict
    from shardplan.errors import MetaError
    from tests.cases import MALFORMED, REFUSED_STRICTLY

    stale = handwritten.not_for_these_tables()
    if stale:
        pytest.skip(stale)
    documents = [document for document, _ in REFUSED_STRICTLY.values()]
    for case in MALFORMED:
        try:
            documents.append(json.loads(case.values[0]))
        except (ValueError, RecursionError):
            continue  # not JSON, or too deep: refused by the reader, before any rebuild
    for document in documents:
        try:
            meta = meta_from_dict(document)
        except MetaError:
            continue  # refused at load, before any rebuild
        errors = []
        for m in (api, handwritten):
            try:
                m.rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
                errors.append(None)
            except MetaError as exc:
                errors.append((exc.path, str(exc)))
        assert errors[0] == errors[1], document


@pytest.mark.parametrize("read", ["rebuild_plan", "read_plan", "hand-written"])
def test_a_params_table_met_half_parsed_gathers_each_sharded_param_once(
    read: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The params loop gathers frozen_sharded_params as it parses; a text it has not seen
    sends the table to the kind's function half way, and what the loop gathered of it goes
    first, so each sharded parameter is listed once: the gathered list equals the file's,
    and the derivation from the entries (the second walk) is not needed."""
    from shardplan.convert import kinds

    derived: list[object] = []
    check = kinds.check_sharded_params
    for module in (kinds, handwritten):
        monkeypatch.setattr(
            module,
            "check_sharded_params",
            lambda *args: (derived.append(args), check(*args))[1],
        )
    new_text = "S(47)"
    placements.parse_placement_table({"a": {"tp": "S(0)"}}, "x")  # "S(0)" is cached
    placements._PARSED.pop(new_text, None)
    document = {
        "param_plan": {"m": {"params": {"a": {"tp": "S(0)"}, "b": {"tp": new_text}}}},
        "injections": [],
        "frozen_sharded_params": ["m.a", "m.b"],
    }
    path = tmp_path / "codegen_meta.json"
    path.write_text(json.dumps(document))
    if read == "rebuild_plan":
        plan = api.rebuild_plan(api.load_meta(path))
    elif read == "read_plan":
        plan = api.read_plan(path)
    else:  # the benchmark's baseline, which must be as right as it is fast
        if stale := handwritten.not_for_these_tables():
            pytest.skip(stale)
        plan = handwritten.rebuild_live_plan_from_meta(api.load_meta(path))
    assert plan.modules["m"].params == {"a": {"tp": Shard(0)}, "b": {"tp": Shard(47)}}
    assert derived == []


def test_benchmark_rounds_start_one_call_further_on_each_time() -> None:
    """Every benchmark ratio compares calls timed in the same rounds; each round starts one
    call further on, so over the rounds every call runs first equally often (in a fixed
    order the first call measured 2 to 3% slower)."""
    from collections import Counter

    from benchmarks.paths import rotated

    names = ["generated", "reference", "hand-written"]
    orders = [rotated(names, round_) for round_ in range(9)]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert Counter(order[0] for order in orders) == Counter({name: 3 for name in names})
    assert rotated([], 4) == []
