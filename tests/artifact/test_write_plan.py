"""write_plan(plan, path): the file of dump_meta(freeze_plan(plan), path), in one pass.

Its promise (README "Using it", docs/contract.md §9): byte for byte the pair's file, or the
pair's error (type, place and message) with nothing written. The fast path writes the
live placement tables through the encoder; every plan it cannot prove of the common form
is handed back to the pair. These tests hold write_plan to the pair on drawn plans, on
plans redrawn into the common form (so the fast path is the one tested), on hand-written
plans each fast-path check exists for, and on real producers' files.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from benchmarks.plans import TRUSTED_TARGETS, llama_plan
from shardplan import api
from shardplan.artifact.meta import dump_meta, load_meta
from shardplan.errors import FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests import strategies
from tests.helpers import CORPUS_FILES, QWEN3_MOE, shared_fixture
from tests.older_artifacts import frozen_again, frozen_again_bytes

TABLE_FIELDS = ("params", "in_src", "in_dst", "out_src", "out_dst")


def written(call: Any, path: Path) -> tuple[str, Any]:
    """("ok", the file's bytes) or ("error", (type, path, message)), the file absent."""
    try:
        call(path)
    except (FreezeError, MetaError) as exc:
        assert not path.exists(), "an error must leave nothing written"
        return "error", (type(exc).__name__, exc.path, str(exc))
    return "ok", path.read_bytes()


def both(plan: ShardingPlan, folder: Path) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """write_plan's outcome and the pair's, for the same plan."""
    one = written(lambda p: api.write_plan(plan, p), folder / "write_plan.json")
    two = written(lambda p: dump_meta(api.freeze_plan(plan), p), folder / "pair.json")
    return one, two


def took_the_fast_path(plan: ShardingPlan, monkeypatch: pytest.MonkeyPatch, path: Path) -> bool:
    """Whether write_plan wrote ``plan`` without the pair's encoder (meta_to_bytes)."""
    calls: list[int] = []
    pair = api.meta_to_bytes

    def counted(meta: Any) -> bytes:
        calls.append(1)
        return pair(meta)

    with monkeypatch.context() as patch:
        patch.setattr(api, "meta_to_bytes", counted)
        api.write_plan(plan, path)
    return not calls


def common_form(plan: ShardingPlan) -> ShardingPlan:
    """The drawn plan with its placement tables in the common form the fast path writes:
    str axes (an Enum axis by its value, the first of two that meet), strided shards as
    shards. Everything else as drawn."""
    for spec in plan.modules.values():
        for name in TABLE_FIELDS:
            table = getattr(spec, name)
            if type(table) is not dict:
                continue
            common: dict[str, dict[str, Any]] = {}
            for key, named in table.items():
                if type(named) is not dict:  # an unfreezable plan's planted value: kept
                    common[key] = named
                    continue
                texts: dict[str, Any] = {}
                for axis, placement in named.items():
                    axis = axis.value if isinstance(axis, enum.Enum) else axis
                    if type(placement) is _StridedShard:
                        placement = Shard(placement.dim)
                    texts.setdefault(axis, placement)
                common[key] = texts
            setattr(spec, name, common)
    return plan


# ------------------------------------------------------------ drawn plans, both forms


@settings(max_examples=max(settings.default.max_examples // 10, 10))
@given(st.integers(0, 2**64))
def test_write_plan_writes_the_pairs_bytes_or_raises_its_error(seed: int) -> None:
    import tempfile

    for plan in (strategies.random_plan(seed), common_form(strategies.random_plan(seed))):
        with tempfile.TemporaryDirectory() as folder:
            one, two = both(plan, Path(folder))
        assert one == two


@settings(max_examples=max(settings.default.max_examples // 10, 10))
@given(strategies.unfreezable_plans())
def test_write_plan_refuses_what_freeze_refuses_with_the_same_error(plan: ShardingPlan) -> None:
    import tempfile

    for drawn in (plan, common_form(plan)):
        with tempfile.TemporaryDirectory() as folder:
            one, two = both(drawn, Path(folder))
        assert one[0] == "error"
        assert one == two


def test_the_common_form_of_drawn_plans_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The properties above test the fast path, not only the hand-back: every drawn plan in
    the common form is written without the pair's encoder, unless its file holds what the
    encoder spells otherwise (an escaped character, a float exponent)."""
    fast = 0
    # Draw until ten qualify: the more rows a table has, the more drawn plans refuse to
    # freeze or hold an escape (a drawn name "é"), so the count of seeds is not fixed: a
    # table with about a hundred rows more than today's needs about a thousand.
    for seed in range(50_000):
        if fast == 10:
            break
        plan = common_form(strategies.random_plan(seed))
        try:
            pair = api.meta_to_bytes(api.freeze_plan(plan))
        except FreezeError:
            continue
        if b"\\u" in pair or b"e-" in pair:
            continue
        assert took_the_fast_path(plan, monkeypatch, tmp_path / f"{seed}.json"), seed
        assert (tmp_path / f"{seed}.json").read_bytes() == pair
        fast += 1
    assert fast == 10


def test_a_planners_plan_takes_the_fast_path_and_reads_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = llama_plan(3)
    assert took_the_fast_path(plan, monkeypatch, tmp_path / "fast.json")
    dump_meta(api.freeze_plan(plan), tmp_path / "pair.json")
    assert (tmp_path / "fast.json").read_bytes() == (tmp_path / "pair.json").read_bytes()
    rebuilt = api.rebuild_plan(load_meta(tmp_path / "fast.json"), allow_targets=TRUSTED_TARGETS)
    assert rebuilt.modules == plan.modules


# ------------------------------------------------- what the fast path must hand back


def _plan(**fields: Any) -> ShardingPlan:
    return ShardingPlan(modules={"model.m": ModuleShardingSpec(**fields)})


class Axis(str, enum.Enum):  # noqa: UP042 - the (str, Enum) spelling planners use
    TP = "tp"


class Names(dict):  # type: ignore[type-arg]
    pass


class Text(str):
    pass


# Each a plan whose live tables the encoder would write other than freeze does, or that
# freeze refuses: the fast path must give the pair's bytes or error, never its own.
HANDED_BACK = {
    "a placement's text where a placement belongs": _plan(params={"w": {"tp": "S(0)"}}),
    "None where a placement belongs": _plan(params={"w": {"tp": None}}),
    "an int where a placement belongs": _plan(params={"w": {"tp": 0}}),
    "a list of placements where one belongs": _plan(
        params={"w": {"tp": [Shard(0), Shard(1)], "dp": "x"}}
    ),
    "a placement where an axis table belongs": _plan(in_src={"x": Shard(0)}),
    "a list where an axis table belongs": _plan(params={"w": [Shard(0)]}),
    "an axis table nested in one": _plan(in_src={"x": {"tp": {"tp": Shard(0)}}}),
    "a str Enum axis": _plan(params={"w": {Axis.TP: Shard(0)}}),
    "a str Enum axis beside its value": _plan(params={"w": {Axis.TP: Shard(0), "tp": Shard(1)}}),
    "a str subclass axis": _plan(params={"w": {Text("tp"): Shard(0)}}),
    "a tuple axis": _plan(params={"w": {("tp",): Shard(0)}}),
    "a non-str name": _plan(params={1: {"tp": Shard(0)}}),
    "a dict subclass axis table": _plan(params={"w": Names(tp=Shard(0))}),
    "a dict subclass table": _plan(params=Names(w={"tp": Shard(0)})),
    "a strided shard": _plan(params={"w": {"tp": _StridedShard(0, split_factor=2)}}),
    "an unknown reduce op": _plan(out_src={"y": {"tp": Partial("nope")}}),
    "a placement subclass": _plan(params={"w": {"tp": type("MyShard", (Shard,), {})(0)}}),
    "an object where a placement belongs": _plan(params={"w": {"tp": object()}}),
    "non-ASCII names": _plan(params={"wé": {"tp": Shard(0)}}),
    "a DEL character in a name": _plan(params={"w\x7f": {"tp": Replicate()}}),
    "a float below 1e-4 in other keys": ShardingPlan(
        modules={"m": ModuleShardingSpec(params={"w": {"tp": Shard(0)}})},
        other_keys={"lr": 1e-05, "eps": 1.5e-07},
    ),
    "a str Enum region_dispatch": _plan(region_dispatch=Axis.TP),
    "a fresh placement object, never frozen before": _plan(
        params={"w": {"tp": Shard(3), "dp": Partial("avg")}}
    ),
}


@pytest.mark.parametrize("plan", list(HANDED_BACK.values()), ids=list(HANDED_BACK))
def test_write_plan_gives_the_pairs_bytes_or_error_where_the_fast_path_hands_back(
    plan: ShardingPlan, tmp_path: Path
) -> None:
    one, two = both(plan, tmp_path)
    assert one == two


def test_a_list_of_placements_is_refused_not_written(tmp_path: Path) -> None:
    """The encoder would write it as a list of texts, one text for each leaf it replaces:
    the plan-wide check sees a list where a placement belongs."""
    plan = HANDED_BACK["a list of placements where one belongs"]
    one, _ = both(plan, tmp_path)
    assert one[0] == "error" and one[1][0] == "FreezeError"
    assert one[1][1] == 'modules["model.m"].params["w"]["tp"]'


def test_a_failed_write_plan_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "codegen_meta.json"
    api.write_plan(llama_plan(1), path)
    before = path.read_bytes()
    with pytest.raises(FreezeError):
        api.write_plan(HANDED_BACK["None where a placement belongs"], path)
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("path", [42, None, b"codegen_meta.json"])
def test_a_path_of_the_wrong_type_is_the_pairs_meta_error(path: Any) -> None:
    plan = llama_plan(1)
    with pytest.raises(MetaError) as fast:
        api.write_plan(plan, path)
    with pytest.raises(MetaError) as pair:
        dump_meta(api.freeze_plan(plan), path)
    assert (fast.value.path, str(fast.value)) == (pair.value.path, str(pair.value))


def test_a_plan_of_the_wrong_type_is_freezes_error_before_the_path(tmp_path: Path) -> None:
    with pytest.raises(FreezeError, match="expected a ShardingPlan, got int"):
        api.write_plan(42, 42)  # type: ignore[arg-type]


# ------------------------------------------------------------ real producers' files


def _rewritten(source: Path, tmp_path: Path) -> bytes:
    plan = api.rebuild_plan(
        load_meta(source), allow_targets=("deepseek_planner.*", "hyper_parallel.*")
    )
    api.write_plan(plan, tmp_path / "out.json")
    return (tmp_path / "out.json").read_bytes()


@pytest.mark.parametrize("source", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_a_corpus_file_rebuilt_is_written_back_byte_for_byte(source: Path, tmp_path: Path) -> None:
    assert _rewritten(source, tmp_path) == frozen_again_bytes(source.read_bytes())


def test_the_shared_fixture_rebuilt_is_written_as_its_canonical_document(tmp_path: Path) -> None:
    """Another producer's layout is not ours: the rebuilt plan is written as the format
    writes the fixture's document (docs/contract.md §9: sorted keys, indent 2, a newline,
    rules ordered by match), the pair's bytes."""
    source = shared_fixture(QWEN3_MOE)
    document = frozen_again(json.loads(source.read_text()))
    document["injections"].sort(key=lambda rule: rule["match"])
    canonical = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    assert _rewritten(source, tmp_path) == canonical
    plan = api.rebuild_plan(load_meta(source), allow_targets=("hyper_parallel.*",))
    assert both(plan, tmp_path) == (("ok", canonical), ("ok", canonical))
