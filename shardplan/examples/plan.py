"""The tensor-parallel plan of the example model over a mesh axis named ``tp``.

Megatron-style: q/k/v/gate/up are column-wise (``S(0)`` on the weight), o/down are
row-wise (``S(1)``), the embedding is vocab-parallel (``S(0)``), lm_head is column-wise
and its logits are gathered, norms are replicated. Modules talk in replicated
activations: every in/out contract is ``R`` except lm_head's, whose output leaves the
projection sharded on the vocab dim and is gathered.
"""

from __future__ import annotations

from torch.distributed.tensor import Partial, Placement, Replicate, Shard

from shardplan import ModuleShardingSpec, ShardingPlan
from shardplan.examples.llama import LlamaConfig

TP = "tp"
R: dict[str, Placement] = {TP: Replicate()}


def _norm() -> ModuleShardingSpec:
    return ModuleShardingSpec(
        params={"weight": dict(R)},
        in_src={"x": dict(R)},
        in_dst={"x": dict(R)},
        out_src={"output": dict(R)},
        out_dst={"output": dict(R)},
        out_names=["output"],
    )


def _attention(config: LlamaConfig) -> ModuleShardingSpec:
    params: dict[str, dict[str, Placement]] = {
        f"{name}.weight": {TP: Shard(0)} for name in ("q_proj", "k_proj", "v_proj")
    }
    params["o_proj.weight"] = {TP: Shard(1)}
    if config.o_proj_bias:
        params["o_proj.bias"] = dict(R)
    spec = ModuleShardingSpec(
        params=params,
        in_src={"hidden_states": dict(R)},
        in_dst={"hidden_states": dict(R)},
        out_src={"output": dict(R)},
        out_dst={"output": dict(R)},
        out_names=["output"],
        tp_divide_attrs=["num_heads", "num_key_value_heads"],
        is_boundary=True,
    )
    if config.o_proj_bias:
        # The bias of a row-wise layer is added once, after the partial sums are reduced.
        spec._deferred_bias_params = ("o_proj.bias",)
    return spec


def _mlp() -> ModuleShardingSpec:
    return ModuleShardingSpec(
        params={
            "gate_proj.weight": {TP: Shard(0)},
            "up_proj.weight": {TP: Shard(0)},
            "down_proj.weight": {TP: Shard(1)},
        },
        in_src={"x": dict(R)},
        in_dst={"x": dict(R)},
        out_src={"output": dict(R)},
        out_dst={"output": dict(R)},
        out_names=["output"],
        is_boundary=True,
    )


def tensor_parallel_plan(config: LlamaConfig) -> ShardingPlan:
    """The plan of ``LlamaForCausalLM(config)`` for tensor parallelism over ``tp``."""
    modules = {
        "model.embed_tokens": ModuleShardingSpec(
            params={"weight": {TP: Shard(0)}},
            in_src={"input": dict(R)},
            in_dst={"input": dict(R)},
            out_src={"output": {TP: Partial("sum")}},
            out_dst={"output": dict(R)},
            out_names=["output"],
        )
    }
    for i in range(config.n_layers):
        prefix = f"model.layers.{i}"
        modules[f"{prefix}.input_layernorm"] = _norm()
        modules[f"{prefix}.self_attn"] = _attention(config)
        modules[f"{prefix}.post_attention_layernorm"] = _norm()
        modules[f"{prefix}.mlp"] = _mlp()
    modules["model.norm"] = _norm()
    modules["lm_head"] = ModuleShardingSpec(
        params={"weight": {TP: Shard(0)}},
        in_src={"input": dict(R)},
        in_dst={"input": dict(R)},
        out_src={"output": {TP: Shard(-1)}},
        out_dst={"output": dict(R)},
        out_names=["output"],
    )
    return ShardingPlan(modules=modules, mesh_dim_names=(TP,))
