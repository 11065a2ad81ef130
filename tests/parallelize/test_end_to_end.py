"""End to end on real torch: the example model sharded from a frozen, rebuilt plan.

Real processes: the demo, which shards on two processes as a user would run it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

import shardplan
from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
from shardplan.examples.plan import tensor_parallel_plan
from shardplan.parallelize.apply import (
    ApplyError,
    apply_plan,
    resolve_placements,
)
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.helpers import REPO, run_in

CONFIG = LlamaConfig(n_layers=2)


@pytest.mark.processes
def test_demo_shards_on_two_processes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """The one-command try, as a new user runs it: no --out, so its folder is temporary,
    and a fresh TMPDIR shows it is gone afterwards, torch's compile cache included."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = run_in(
        REPO, "-m", "shardplan.examples.demo", "--timeout", "90", env={"TMPDIR": str(temp)}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{temp}/specgen-demo-" in result.stdout and "removed at the end" in result.stdout
    diff = float(re.search(r"max \|sharded - unsharded\| = (\S+)", result.stdout)[1])  # type: ignore[index]
    assert diff <= 1e-5
    assert "checked 18 sharded parameters on each rank" in result.stdout
    assert list(temp.iterdir()) == []


def test_placements_resolve_in_mesh_order_with_missing_axes_replicated() -> None:
    assert resolve_placements({"tp": Shard(0)}, ("dp", "tp", "cp"), "w") == (
        Replicate(),
        Shard(0),
        Replicate(),
    )
    assert resolve_placements({"ep": Replicate()}, ("tp",), "w") == (Replicate(),)
    with pytest.raises(
        ApplyError, match=r"w: mesh axis 'ep' is not a dimension of the mesh \(tp\)"
    ):
        resolve_placements({"ep": Shard(0)}, ("tp",), "w")


def test_apply_on_one_process_shards_every_planned_layer_and_keeps_outputs(
    mesh: DeviceMesh,
) -> None:
    torch.manual_seed(0)
    model = LlamaForCausalLM(CONFIG).eval()
    ids = torch.randint(0, CONFIG.vocab_size, (1, 8))
    with torch.no_grad():
        expected = model(ids)
    plan = shardplan.rebuild_plan(shardplan.freeze_plan(tensor_parallel_plan(CONFIG)))
    apply_plan(model, plan, mesh)
    weight = model.get_parameter("model.layers.0.self_attn.o_proj.weight")
    assert isinstance(weight, DTensor) and tuple(weight.placements) == (Shard(1),)
    with torch.no_grad():
        assert torch.allclose(model(ids), expected, atol=1e-6)


def _plan_with(fqn: str, **spec_fields: object) -> ShardingPlan:
    plan = tensor_parallel_plan(CONFIG)
    for name, value in spec_fields.items():
        setattr(plan.modules.setdefault(fqn, ModuleShardingSpec()), name, value)
    return plan


BAD_PLANS = {
    "parameter that does not exist": (
        _plan_with(
            "model.layers.0.mlp",
            params={"gate_proj.weight": {"tp": Shard(0)}, "gate_proj.bias": {"tp": Shard(0)}},
        ),
        "model.layers.0.mlp.gate_proj.bias: the plan shards a parameter the model does not have",
    ),
    "placement that does not fit": (
        _plan_with("lm_head", params={"weight": {"tp": Shard(2)}}),
        r"lm_head.weight: placement S\(2\) does not fit a parameter of shape \(128, 64\) \(2 dims\)",
    ),
    "module that does not exist": (
        _plan_with("model.layers.7.mlp", params={}),
        "plan module 'model.layers.7.mlp' does not exist in LlamaForCausalLM",
    ),
    "sharded norm weight": (
        _plan_with("model.norm", params={"weight": {"tp": Shard(0)}}),
        "model.norm.weight: no torch tensor-parallel style shards a RMSNorm weight as S\\(0\\)",
    ),
    "deferred bias of a column-wise layer": (
        _plan_with("model.layers.0.self_attn", _deferred_bias_params=("q_proj.bias",)),
        "model.layers.0.self_attn.q_proj.bias: a deferred bias must be the bias of a row-wise Linear",
    ),
    "divided attribute that is not there": (
        _plan_with("model.layers.0.mlp", tp_divide_attrs=["num_heads"]),
        "model.layers.0.mlp.num_heads: tp_divide_attrs names 'num_heads', which is not an int attribute",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_a_plan_that_does_not_fit_the_model_is_a_clear_error(mesh: DeviceMesh, case: str) -> None:
    plan, message = BAD_PLANS[case]
    with pytest.raises(ApplyError, match=message):
        apply_plan(LlamaForCausalLM(CONFIG), plan, mesh)
