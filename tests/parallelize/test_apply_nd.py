"""The N-D apply's pure parts, on one process: placements, the expert mesh, the gradient
rule, check_fit, and the law that every table row has an apply decision
(docs/contract.md §13). The multi-process run is tests/parallelize/test_apply_ranks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch.distributed.tensor import Partial, Replicate, Shard

from shardplan.examples.qwen3_moe import Qwen3MoeConfig, Qwen3MoeForCausalLM
from shardplan.parallelize import layout
from shardplan.parallelize.fit import check_fit
from shardplan.parallelize.layout import MeshShape, UnresolvedPlacement
from shardplan.table.apply_decisions import (
    OTHER_KEY_DECISIONS,
    PLAN_DECISIONS,
    SPEC_DECISIONS,
    undecided,
)
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.rows import SpecField
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.additions import fresh_name
from tests.helpers import QWEN3_MOE, REPO, shared_fixture

MESH = {"cp": 2, "tp": 2}
REGION = MeshShape(("cp", "tp"), (2, 2))


def _fixture_plan(path: Path | None = None) -> ShardingPlan:
    from shardplan.examples.artifact_demo import rebuild

    return rebuild(path or shared_fixture(QWEN3_MOE))  # type: ignore[no-any-return]


def _edited_fixture(tmp_path: Path, edit: object) -> Path:
    document = json.loads(shared_fixture(QWEN3_MOE).read_text())
    edit(document)  # type: ignore[operator]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(document, indent=2, sort_keys=True))
    return path


@pytest.fixture(scope="module")
def model() -> Qwen3MoeForCausalLM:
    return Qwen3MoeForCausalLM(Qwen3MoeConfig())


# ---------------------------------------------------------------- placements, expert mesh


def test_placements_resolve_per_mesh_dim_in_mesh_order_with_missing_axes_replicated() -> None:
    named = {"tp": Shard(1), "cp": Shard(1), "ep": Replicate()}
    assert layout.resolve(named, ("cp", "tp"), "x") == (Shard(1), Shard(1))
    assert layout.resolve({"tp": Shard(0)}, ("cp", "tp"), "w") == (Replicate(), Shard(0))
    with pytest.raises(UnresolvedPlacement, match=r"w: mesh axis 'ep' is not a dimension"):
        layout.resolve({"ep": Shard(0)}, ("cp", "tp"), "w")


def test_active_axes_follow_the_mesh_order_and_null_means_the_whole_mesh() -> None:
    mesh = MeshShape(("dp", "cp", "tp"), (2, 2, 2))
    assert layout.active_axes(ShardingPlan(mesh_dim_names=("tp", "cp")), mesh) == ("cp", "tp")
    assert layout.active_axes(ShardingPlan(mesh_dim_names=None), mesh) == ("dp", "cp", "tp")


def test_expert_mesh_is_the_region_flattened_and_resliced_edp_by_ep() -> None:
    assert layout.expert_shape(REGION, 2) == MeshShape(("edp", "ep"), (2, 2))
    assert layout.expert_shape(REGION, 4) == MeshShape(("edp", "ep"), (1, 4))
    # ep groups are consecutive ranks {0,1},{2,3} (the tp groups); edp groups {0,2},{1,3}
    # differ along cp only.
    assert layout.edp_varying_axes(REGION, 2) == {"cp"}
    assert layout.edp_varying_axes(REGION, 4) == set()


# ---------------------------------------------------------------- the gradient rule


def test_an_input_gathered_where_the_module_shards_a_parameter_gets_partial_gradients() -> None:
    plan = _fixture_plan()
    attention = plan.modules["model.layers.0.self_attn"]
    sharded = layout.param_sharded_axes(attention, REGION)
    dst = layout.resolve(attention.in_dst["hidden_states"], REGION.names, "x")  # type: ignore[index]
    assert sharded == {"tp"}
    assert layout.input_grad_placements(dst, REGION.names, sharded) == (Shard(1), Partial())


def test_replicated_parameters_sum_gradients_over_the_axes_activations_are_split_on() -> None:
    plan = _fixture_plan()
    norm = plan.modules["model.layers.0.input_layernorm"]
    qkv = plan.modules["model.layers.0.self_attn"]
    mlp = plan.modules["model.layers.0.mlp"]
    assert layout.grad_sum_axes(norm, "weight", (Replicate(), Replicate()), REGION) == ("cp", "tp")
    # Attention computes on the sequence gathered over tp: its tp-sharded weight sums over cp.
    assert layout.grad_sum_axes(qkv, "linear_qkv.weight", (Replicate(), Shard(0)), REGION) == (
        "cp",
    )
    assert layout.grad_sum_axes(mlp, "experts.down_proj", (Replicate(), Shard(0)), REGION) == (
        "edp",
    )
    mlp4 = ModuleShardingSpec(in_src=mlp.in_src, in_dst=mlp.in_dst)
    mlp4._ep_size = 4
    assert layout.grad_sum_axes(mlp4, "experts.down_proj", (Replicate(), Shard(0)), REGION) == ()


def test_head_counts_are_divided_when_a_qkv_weight_shards_dim_0_on_tp() -> None:
    plan = _fixture_plan()
    assert layout.head_sharded(plan.modules["model.layers.0.self_attn"], REGION)
    assert not layout.head_sharded(plan.modules["lm_head"], REGION)


# ---------------------------------------------------------------- check_fit


def test_check_fit_finds_nothing_for_the_fixture_on_its_mesh(model: Qwen3MoeForCausalLM) -> None:
    assert check_fit(_fixture_plan(), model, MESH, overrides_applied=True) == []


def test_check_fit_names_a_renamed_boundary_class(
    model: Qwen3MoeForCausalLM, tmp_path: Path
) -> None:
    def rename(document: dict) -> None:  # type: ignore[type-arg]
        document["boundary_classes"]["model.layers.2.self_attn"] = "FlashAttention"

    findings = check_fit(
        _fixture_plan(_edited_fixture(tmp_path, rename)), model, MESH, overrides_applied=True
    )
    assert [str(f) for f in findings] == [
        "boundary_classes['model.layers.2.self_attn']: the plan expects a FlashAttention, "
        "the model's model.layers.2.self_attn is a GQAAttention"
    ]


def test_check_fit_names_the_mesh_size_the_plan_was_made_for(model: Qwen3MoeForCausalLM) -> None:
    findings = check_fit(_fixture_plan(), model, {"cp": 1, "tp": 2}, overrides_applied=True)
    assert [f.where for f in findings] == ["parallel_dims.cp_size"]
    assert "made for cp=2, the mesh's cp dimension has size 1" in findings[0].message


def test_check_fit_asks_for_the_module_overrides_until_they_are_said_applied(
    model: Qwen3MoeForCausalLM,
) -> None:
    (finding,) = check_fit(_fixture_plan(), model, MESH)
    assert finding.where == "module_overrides"
    assert "17 module overrides" in finding.message and "overrides_applied=True" in finding.message


def test_check_fit_reports_every_finding_at_once(model: Qwen3MoeForCausalLM) -> None:
    plan = _fixture_plan()
    plan.modules["model.layers.9.mlp"] = ModuleShardingSpec(params={})
    plan.modules["lm_head"].params["bias"] = {"tp": Shard(0)}  # type: ignore[index]
    plan.modules["model.layers.1.self_attn"].in_src = {  # two names: each must be a parameter
        "hidden_states": {"cp": Shard(1)},
        "x": {"cp": Shard(1)},
    }
    findings = {f.where: f.message for f in check_fit(plan, model, MESH, overrides_applied=True)}
    assert findings["model.layers.9.mlp"] == (
        "plan module 'model.layers.9.mlp' does not exist in Qwen3MoeForCausalLM"
    )
    assert findings["lm_head.bias"] == "the plan shards a parameter the model does not have"
    assert (
        "contract inputs ['x'] are not parameters of forward(hidden_states, position_embeddings)"
        in (findings["model.layers.1.self_attn"])
    )


def test_check_fit_refuses_a_shard_that_does_not_divide(model: Qwen3MoeForCausalLM) -> None:
    plan = _fixture_plan()
    plan.modules["model.layers.0.mlp"]._ep_size = 4
    plan.modules["model.layers.0.mlp"].params["gate.weight"] = {"tp": Shard(0), "cp": Shard(0)}  # type: ignore[index]
    model3 = Qwen3MoeForCausalLM(Qwen3MoeConfig(num_experts=6))
    findings = {f.where: f.message for f in check_fit(plan, model3, MESH, overrides_applied=True)}
    assert (
        "dim 0 of shape (6, 32, 32) is 6, which does not divide over 4 shards"
        in findings["model.layers.0.mlp.experts.gate_up_proj"]
    )
    assert findings["model.layers.0.mlp.gate.weight"].startswith(
        "dim 0 of shape (6, 32) is 6, which does not divide over 4 shards"
    )
    assert "frozen_sharded_params" not in findings


def test_a_single_contract_binds_to_the_first_input() -> None:
    assert layout.bind_inputs(["hidden_states"], ["input"]) == {"hidden_states": 0}
    assert layout.bind_inputs(["x_BLD"], ["x_BLD"]) == {"x_BLD": 0}
    assert layout.bind_inputs(["a", "b"], ["b", "a"]) == {"a": 1, "b": 0}


# ---------------------------------------------------------------- the law of apply decisions


def test_every_row_of_both_tables_has_an_apply_decision() -> None:
    """Law: each row of SPEC_FIELDS and PLAN_FIELDS is consumed by the apply or listed as not
    an apply input, with a reason (shardplan/table/apply_decisions.py)."""
    fix = (
        ": say what apply_plan does with each in shardplan/table/apply_decisions.py, "
        '("consumed", where) or ("not an apply input", why)'
    )
    spec_rows = undecided((row.name for row in SPEC_FIELDS), SPEC_DECISIONS)
    assert spec_rows == [], f"SPEC_DECISIONS has no decision for {spec_rows}{fix}"
    plan_rows = undecided((row.name for row in PLAN_FIELDS), PLAN_DECISIONS)
    assert plan_rows == [], f"PLAN_DECISIONS has no decision for {plan_rows}{fix}"
    assert set(SPEC_DECISIONS) == {row.name for row in SPEC_FIELDS}, "a decision for no row"
    assert set(PLAN_DECISIONS) == {row.name for row in PLAN_FIELDS}, "a decision for no row"


def test_a_row_added_by_the_readme_steps_has_no_decision_until_one_is_written() -> None:
    name = fresh_name(REPO, "ModuleShardingSpec", "grad_clip")  # README's, unless taken
    added = SpecField(name, name, "param_plan", "scalar", "opt_scalar", doc="Clip.")
    rows = (*SPEC_FIELDS, added)
    assert undecided((row.name for row in rows), SPEC_DECISIONS) == [name]
    decided = {**SPEC_DECISIONS, name: ("not an apply input", "optimizer setting")}
    assert undecided((row.name for row in rows), decided) == []
    assert undecided([name], {name: ("not an apply input", " ")}) == [name]


def test_every_other_key_of_the_fixture_has_an_apply_decision() -> None:
    plan = _fixture_plan()
    assert undecided(plan.other_keys, OTHER_KEY_DECISIONS) == []


# ---------------------------------------------------------------- the engine on one rank


def test_ep_stack_stacks_per_expert_weights_into_one_parameter_first() -> None:
    import torch
    from torch import nn

    from shardplan.parallelize.engine import _stack_experts

    block = nn.Module()
    block.experts = nn.ModuleList(nn.Linear(4, 3, bias=False) for _ in range(2))
    weights = [e.weight.detach().clone() for e in block.experts]  # type: ignore[union-attr]
    stack = {"experts.w1": ["experts.0.weight", "experts.1.weight"]}
    _stack_experts(block, stack)
    assert [n for n, _ in block.named_parameters()] == ["experts.w1"]
    assert torch.equal(block.get_parameter("experts.w1"), torch.stack(weights))


def test_the_boundary_engine_on_one_rank_keeps_the_llama_examples_outputs() -> None:
    """Deferred bias, divided head counts, a vocabulary-parallel embedding and partial
    outputs, on a one-rank mesh: the engine must leave the model's function unchanged."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import shardplan
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from shardplan.examples.plan import tensor_parallel_plan
    from shardplan.parallelize.engine import Engine, parameter_layouts

    config = LlamaConfig(n_layers=1)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (1, 8))
    expected = model(ids).detach()
    plan = shardplan.rebuild_plan(shardplan.freeze_plan(tensor_parallel_plan(config)))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
        assert check_fit(plan, model, mesh) == []
        Engine(model, plan, mesh, {}, True).run()
        assert torch.allclose(model(ids), expected, atol=1e-6)
        layouts = parameter_layouts(model)
        assert layouts["model.layers.0.self_attn.o_proj.weight"].placements == (Shard(1),)
        assert len(layouts) == sum(len(s.params or {}) for s in plan.modules.values())
    finally:
        dist.destroy_process_group()
