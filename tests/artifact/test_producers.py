"""Artifacts as real producers write them (docs/contract.md §3-§6, §9): each shape loads,
rebuilds to what the contract says it means, and writes back to the same bytes.

Expected values here are written by hand from the contract's words, not computed by either
implementation: a misreading both share would pass a differential test, not these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

import shardplan
from shardplan.artifact.meta import CodegenMeta, dump_meta, load_meta, meta_from_json, meta_to_json
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.cases import PRODUCERS
from tests.helpers import CORPUS_FILES, QWEN3_MOE, shared_fixture
from tests.implementations import IMPLEMENTATIONS
from tests.older_artifacts import frozen_again, frozen_again_bytes


def artifact(param_plan: dict[str, Any], injections: list[Any], **top: Any) -> str:
    """A canonical artifact text, as docs/contract.md §9 defines the format. Entries carry
    ``is_boundary``: freeze always writes it (scalar, written when not None). The keys
    named here are today's; a user's row written always adds its own (frozen_again)."""
    document = {
        "param_plan": param_plan,
        "injections": injections,
        "special_handlers": {},
        "mesh_dim_names": ["tp"],
        "tied_pairs": [],
        "frozen_sharded_params": [],
        "parallel_dims": {"loss_parallel": False, "sequence_parallel": True},
        **top,
    }
    return json.dumps(frozen_again(document), indent=2, sort_keys=True) + "\n"


def refreeze(meta: CodegenMeta, implementation: str, *, strict: bool = True) -> str:
    """Rebuild and freeze again, and the text of what the API gives, untouched: other
    producers' keys ride along in the rebuilt plan (docs/contract.md §2b), nothing is copied
    here."""
    impl = IMPLEMENTATIONS[implementation]
    plan = impl.rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=PRODUCERS)
    return meta_to_json(impl.freeze_plan(plan))


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# ------------------------------------------------------- skip_source_lowering: true


def test_skip_source_lowering_true_rebuilds_to_true_and_refreezes_to_true(
    implementation: str,
) -> None:
    text = artifact({"m": {"is_boundary": False, "skip_source_lowering": True}}, [])
    meta = meta_from_json(text)
    plan = IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(meta)
    assert plan.modules["m"].skip_source_lowering is True
    assert refreeze(meta, implementation) == text


@pytest.mark.parametrize("value", [0, False, None])
def test_skip_source_lowering_falsy_writes_no_key(value: Any, implementation: str) -> None:
    plan = ShardingPlan(modules={"m": ModuleShardingSpec(skip_source_lowering=value)})
    assert (
        "skip_source_lowering" not in IMPLEMENTATIONS[implementation].freeze_param_plan(plan)["m"]
    )


@pytest.mark.parametrize("value", [True, 1, 7])
def test_skip_source_lowering_truthy_int_or_true_is_written_as_it_is(
    value: Any, implementation: str
) -> None:
    plan = ShardingPlan(modules={"m": ModuleShardingSpec(skip_source_lowering=value)})
    written = IMPLEMENTATIONS[implementation].freeze_param_plan(plan)["m"]["skip_source_lowering"]
    assert written == value and type(written) is type(value)


def test_ep_size_true_is_refused_because_its_rebuild_reads_only_integers(
    implementation: str,
) -> None:
    spec = ModuleShardingSpec(_ep_size=True)  # type: ignore[arg-type]
    with pytest.raises(FreezeError) as caught:
        IMPLEMENTATIONS[implementation].freeze_injections(ShardingPlan(modules={"m": spec}))
    assert caught.value.path == 'modules["m"]._ep_size'


# ------------------------------------------------------- inner_out_src: three shapes

INNER_OUT_SRC_SHAPES = [
    pytest.param("first_input", "first_input", id="registry_name"),
    pytest.param(
        {"cp": "S(1)", "tp": "R"}, {"cp": Shard(1), "tp": Replicate()}, id="named_placement"
    ),
    pytest.param(
        {"attn_output": {"cp": "S(1)"}, "lse": {"cp": "SS(2,2)", "tp": "P(max)"}},
        {
            "attn_output": {"cp": Shard(1)},
            "lse": {"cp": _StridedShard(2, split_factor=2), "tp": Partial("max")},
        },
        id="contract",
    ),
    pytest.param({}, {}, id="empty"),
]


@pytest.mark.parametrize(("written", "live"), INNER_OUT_SRC_SHAPES)
def test_inner_out_src_shape_rebuilds_to_placements_and_refreezes_to_the_same_bytes(
    written: Any, live: Any, implementation: str
) -> None:
    text = artifact({"m": {"is_boundary": True}}, [{"match": "m", "inner_out_src": written}])
    meta = meta_from_json(text)
    plan = IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(meta)
    assert plan.modules["m"].inner_out_src == live
    assert refreeze(meta, implementation) == text


@pytest.mark.parametrize(
    ("inner_out_src", "path", "fragment"),
    [
        ({"cp": "S(1)", "x": {"tp": "R"}}, '.inner_out_src["x"]', "like the values before it"),
        ({"a": {"tp": "R"}, "cp": "S(1)"}, '.inner_out_src["cp"]', "like the values before it"),
        ({"cp": 1}, '.inner_out_src["cp"]', "got number"),
        ({"cp": "S(x)"}, '.inner_out_src["cp"]', "cannot parse placement 'S(x)'"),
        ({"o": {"cp": "Q"}}, '.inner_out_src["o"]["cp"]', "cannot parse placement 'Q'"),
        ([{"cp": "R"}], ".inner_out_src", "got array"),
    ],
)
def test_inner_out_src_of_no_shape_is_a_meta_error_at_the_exact_place(
    inner_out_src: Any, path: str, fragment: str, implementation: str
) -> None:
    meta = meta_from_json(
        artifact({"m": {"is_boundary": True}}, [{"match": "m", "inner_out_src": inner_out_src}])
    )
    with pytest.raises(MetaError) as caught:
        IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(meta)
    assert caught.value.path == f"injections[0]{path}"
    assert fragment in str(caught.value)


def test_inner_out_src_named_placement_with_enum_axes_freezes_to_axis_values() -> None:
    from tests.strategies import MeshAxis

    spec = ModuleShardingSpec(inner_out_src={MeshAxis.CP: Shard(1), "tp": Replicate()})
    rules = shardplan.freeze_plan(ShardingPlan(modules={"m": spec})).injections
    rule = {"match": "m", "inner_out_src": {"cp": "S(1)", "tp": "R"}}
    assert rules == frozen_again({"param_plan": {"m": {}}, "injections": [rule]})["injections"]


# ------------------------------------------------------- mesh_dim_names: null


def test_mesh_dim_names_null_loads_rebuilds_to_none_and_rewrites_the_same_bytes(
    tmp_path: Path, implementation: str
) -> None:
    text = artifact({"m": {"is_boundary": True}}, [], mesh_dim_names=None)
    path = tmp_path / "codegen_meta.json"
    path.write_text(text)
    meta = load_meta(path)
    assert meta.mesh_dim_names is None
    plan = IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(meta)
    assert plan.mesh_dim_names is None
    assert refreeze(meta, implementation) == text
    dump_meta(shardplan.freeze_plan(shardplan.rebuild_plan(meta)), path)
    assert path.read_text() == text


def test_mesh_dim_names_empty_list_stays_an_empty_list_not_null() -> None:
    meta = shardplan.freeze_plan(ShardingPlan(mesh_dim_names=()))
    assert meta.mesh_dim_names == []
    assert shardplan.rebuild_plan(meta).mesh_dim_names == ()


# ------------------------------------------------------- the corpus and the fixture


def corpus_params() -> list[Any]:
    return [pytest.param(path, id=path.name) for path in CORPUS_FILES]


def test_the_corpus_holds_every_producer_shape() -> None:
    """The corpus is what the other tests rely on: check it still has each shape."""
    texts = "".join(path.read_text() for path in CORPUS_FILES)
    documents = [json.loads(path.read_text()) for path in CORPUS_FILES]
    rules = [rule for document in documents for rule in document["injections"]]
    entries = [entry for document in documents for entry in document["param_plan"].values()]
    assert any(document["mesh_dim_names"] is None for document in documents)
    assert any(entry.get("skip_source_lowering") is True for entry in entries)
    assert any(entry.get("in_src") == {} for entry in entries)
    shapes = {
        "registry": lambda v: isinstance(v, str),
        "named": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "contract": lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),
    }
    for name, is_shape in shapes.items():
        assert any("inner_out_src" in r and is_shape(r["inner_out_src"]) for r in rules), name
    assert any("ep_size" in r and "local_compute_fn" in r for r in rules)
    assert '"experts.gate_up_proj"' in texts and '"ep": "S(0)"' in texts
    assert max(len(document["param_plan"]) for document in documents) >= 300


@pytest.mark.parametrize("path", corpus_params())
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
def test_corpus_artifact_comes_back_byte_identical(
    path: Path, strict: bool, implementation: str, tmp_path: Path
) -> None:
    """load -> rebuild -> freeze -> dump gives back the file's bytes (with the keys
    written always it lacks)."""
    meta = load_meta(path)
    text = refreeze(meta, implementation, strict=strict)
    out = tmp_path / path.name
    again = meta_from_json(text)
    dump_meta(again, out)
    assert out.read_bytes() == frozen_again_bytes(path.read_bytes())


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_artifact_loads_and_dumps_unchanged(path: Path, tmp_path: Path) -> None:
    out = tmp_path / path.name
    dump_meta(load_meta(path), out)
    assert out.read_bytes() == path.read_bytes()


def test_shared_fixture_param_plan_and_rules_come_back(implementation: str) -> None:
    """The real Qwen3-MoE artifact: the same param_plan bytes, the same rules by match
    (the rebuilt plan lists modules in sorted order, so rule order may differ), with the
    keys written always it lacks."""
    path = shared_fixture(QWEN3_MOE)
    meta = load_meta(path)
    again = meta_from_json(refreeze(meta, implementation))
    document = frozen_again(json.loads(path.read_text()))
    assert json.dumps(again.param_plan, indent=2, sort_keys=True) == json.dumps(
        document["param_plan"], indent=2, sort_keys=True
    )
    rules = {r["match"]: r for r in document["injections"]}
    assert {r["match"]: r for r in again.injections} == rules
    assert again.frozen_sharded_params == meta.frozen_sharded_params
    # The document, rules sorted by match, is the file's text plus its missing newline.
    document["injections"].sort(key=lambda rule: rule["match"])
    assert meta_to_json(again) == json.dumps(document, indent=2, sort_keys=True) + "\n"


def test_shared_fixture_keeps_every_other_producer_key_through_the_public_api(
    tmp_path: Path,
) -> None:
    """freeze_plan(rebuild_plan(load_meta(f))) as a user calls it: the 16 top-level keys
    and the 5 parallel_dims keys no row owns come back unchanged, named here by hand."""
    path = shared_fixture(QWEN3_MOE)
    out = tmp_path / QWEN3_MOE
    rebuilt = shardplan.rebuild_plan(load_meta(path), allow_targets=PRODUCERS)
    dump_meta(shardplan.freeze_plan(rebuilt), out)
    raw, after = json.loads(path.read_text()), json.loads(out.read_text())
    before = frozen_again(raw)
    others = [
        "boundary_classes", "codegen_version", "covered", "entrypoints",
        "external_state_classes", "model_class", "model_name", "module_overrides",
        "not_covered", "outputs", "remote_siblings", "signature", "skipped_overrides",
        "source", "yaml_path", "yaml_sha256",
    ]  # fmt: skip
    assert {key: after[key] for key in others} == {key: before[key] for key in others}
    assert after["parallel_dims"] == before["parallel_dims"]
    assert sorted(set(raw["parallel_dims"]) - {"loss_parallel", "sequence_parallel"}) == [
        "cp_size", "dp_size", "ep_size", "pp_size", "tp_size",
    ]  # fmt: skip
    assert set(after) == set(before)
    # The size differs by the fixture's missing trailing newline alone (rules come back
    # ordered by match, the same rules), and the keys written always it lacks.
    added = len(frozen_again_bytes(path.read_bytes())) - len(meta_to_json(load_meta(path)))
    assert len(out.read_bytes()) == len(path.read_bytes()) + 1 + added


def test_shared_fixture_loss_parallel_true_rebuilds_true() -> None:
    """The upstream planner's own rebuild drops it (a rebuilt plan says False)."""
    plan = shardplan.rebuild_plan(load_meta(shared_fixture(QWEN3_MOE)), allow_targets=PRODUCERS)
    assert plan.loss_parallel is True and plan.sequence_parallel is True
    assert (
        plan.other_keys["parallel_dims"]["tp_size"]
        == json.loads(shared_fixture(QWEN3_MOE).read_text())["parallel_dims"]["tp_size"]
    )


def test_a_target_kwarg_float_survives_the_corpus_round_trip() -> None:
    meta = load_meta(next(p for p in CORPUS_FILES if p.name.startswith("deepseek")))
    plan = shardplan.rebuild_plan(meta, allow_targets=PRODUCERS)
    compute = plan.modules["model.layers.3.mlp"].local_compute_fn
    assert compute == Target(
        "deepseek_planner.ep.grouped_gemm_expert_compute",
        capacity_factor=1.25,
        use_grouped_gemm=True,
    )
