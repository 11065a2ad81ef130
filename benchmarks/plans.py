"""Realistic plans for the benchmarks: a Llama-style decoder under tp x dp.

Each layer has self_attn, mlp and two norms with params, in/out contracts and
out_names; attention carries a context-parallel wrapper injection and the MLP an
expert-compute injection on every fourth layer, as a MoE planner would write them.
"""

from __future__ import annotations

from torch.distributed.tensor import Partial, Replicate, Shard

from shardplan.convert.targets import Target
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

R, S0, S1, PSUM = Replicate(), Shard(0), Shard(1), Partial("sum")
SEQ = {"tp": S1, "dp": S0}  # activations: batch over dp, sequence over tp
FULL = {"tp": R, "dp": S0}
# What the benchmarks trust when they rebuild these plans' artifacts: exactly the two
# callables their Targets name (docs/contract.md §8). Exact paths mean the same at older
# commits, where an entry was a prefix, so `benchmarks.against` passes them to both trees.
TRUSTED_TARGETS = (
    "models.llama.cp.flash_attention_cp_wrapper",
    "models.llama.ep.grouped_gemm_compute",
)


def _colwise(*names: str) -> dict[str, dict[str, object]]:
    return {f"{n}.weight": {"tp": S0, "dp": R} for n in names}


def _attention(layer: int) -> ModuleShardingSpec:
    spec = ModuleShardingSpec(
        params={**_colwise("q_proj", "k_proj", "v_proj"), "o_proj.weight": {"tp": S1, "dp": R}},
        in_src={"hidden_states": dict(SEQ)},
        in_dst={"hidden_states": dict(FULL)},
        out_src={"output": {"tp": PSUM, "dp": S0}},
        out_dst={"output": dict(SEQ)},
        out_names=["output", "attn_weights"],
        tp_divide_attrs=["num_heads", "num_key_value_heads"],
        is_boundary=True,
        region_dispatch=False,
        inner_wrapper=Target("models.llama.cp.flash_attention_cp_wrapper", ring=True),
        inner_target="self",
    )
    spec._deferred_bias_params = ("o_proj.bias",)
    return spec


def _mlp(layer: int) -> ModuleShardingSpec:
    moe = layer % 4 == 0
    return ModuleShardingSpec(
        params={**_colwise("gate_proj", "up_proj"), "down_proj.weight": {"tp": S1, "dp": R}},
        in_src={"x": dict(SEQ)},
        in_dst={"x": dict(FULL)},
        out_src={"output": {"tp": PSUM, "dp": S0}},
        out_dst={"output": dict(SEQ)},
        out_names=["output"],
        is_boundary=False,
        local_compute_fn=(
            Target("models.llama.ep.grouped_gemm_compute", use_grouped_gemm=True) if moe else None
        ),
        _ep_size=2 if moe else 0,
    )


def _norm() -> ModuleShardingSpec:
    return ModuleShardingSpec(
        params={"weight": {"tp": R, "dp": R}},
        in_src={"hidden_states": dict(SEQ)},
        in_dst={"hidden_states": dict(SEQ)},
        out_src={"output": dict(SEQ)},
        out_dst={"output": dict(SEQ)},
    )


def llama_plan(layers: int) -> ShardingPlan:
    """A plan with 4 modules a layer plus embedding, final norm and lm_head."""
    modules = {"model.embed_tokens": ModuleShardingSpec(params={"weight": {"tp": S0, "dp": R}})}
    for i in range(layers):
        prefix = f"model.layers.{i}"
        modules[f"{prefix}.input_layernorm"] = _norm()
        modules[f"{prefix}.self_attn"] = _attention(i)
        modules[f"{prefix}.post_attention_layernorm"] = _norm()
        modules[f"{prefix}.mlp"] = _mlp(i)
    modules["model.norm"] = _norm()
    modules["lm_head"] = ModuleShardingSpec(
        params={"weight": {"tp": S0, "dp": R}},
        out_src={"output": {"tp": Shard(-1), "dp": S0}},
        out_dst={"output": {"tp": Shard(-1), "dp": S0}},
    )
    return ShardingPlan(
        modules=modules,
        mesh_dim_names=("dp", "tp"),
        tied_pairs=[("lm_head.weight", "model.embed_tokens.weight")],
        loss_parallel=True,
    )
