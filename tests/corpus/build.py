"""Write the conformance corpus: artifacts shaped as real producers write them.

The documents are built here as plain JSON data, by hand-written rules that follow
docs/contract.md §4-§9 and the producer shapes of issue 9, without importing shardplan: the corpus
tests the implementation, so it must not come from it. Run it from the repository root
after changing it, and commit the JSON files it writes:

    python tests/corpus/build.py

Each file is canonical (``indent=2``, sorted keys, one trailing newline) and lists its
injection rules in sorted module order, as a rebuilt plan freezes them, so reading,
rebuilding, freezing and writing it again must give back the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AXES = ("dp", "cp", "tp", "ep")


def placement(**axes: str) -> dict[str, str]:
    """A named placement: every mesh axis replicated unless given."""
    return {axis: axes.get(axis, "R") for axis in AXES}


SEQ = placement(cp="S(1)", tp="S(1)")  # activations: sequence over cp and tp
FULL = placement(cp="S(1)")  # gathered over tp
PARTIAL = placement(cp="S(1)", tp="P(sum)")


def colwise(*names: str) -> dict[str, dict[str, str]]:
    return {f"{name}.weight": placement(tp="S(0)") for name in names}


def rowwise(*names: str) -> dict[str, dict[str, str]]:
    return {f"{name}.weight": placement(tp="S(1)") for name in names}


def norm() -> dict[str, Any]:
    return {
        "params": {"weight": placement()},
        "in_src": {"hidden_states": SEQ},
        "in_dst": {"hidden_states": SEQ},
        "out_src": {"output": SEQ},
        "out_dst": {"output": SEQ},
        "is_boundary": True,
    }


def attention() -> dict[str, Any]:
    # DeepSeek-style multi-head latent attention: the latent down-projection is
    # replicated, the up-projections column-wise, o_proj row-wise.
    return {
        "params": {
            "kv_a_proj_with_mqa.weight": placement(),
            **colwise("q_proj", "kv_b_proj"),
            **rowwise("o_proj"),
        },
        "in_src": {"hidden_states": SEQ},
        "in_dst": {"hidden_states": FULL},
        "out_src": {"output": PARTIAL},
        "out_dst": {"output": SEQ},
        "out_names": ["output", "attn_weights"],
        "tp_divide_attrs": ["num_heads"],
        "is_boundary": True,
        "region_dispatch": False,
    }


def cp_rule(layer: int, fqn: str) -> dict[str, Any]:
    """A context-parallel attention wrapper; inner_out_src in each of its three shapes."""
    if layer % 5 == 1:
        out: Any = "first_input"  # a registry name
    elif layer % 5 == 3:
        out = {"attn_output": placement(cp="S(1)"), "lse": placement(cp="S(2)")}  # a contract
    else:
        out = placement(cp="S(1)")  # a named placement: the common shape
    return {
        "match": fqn,
        "inner_wrapper": {
            "_target_": "deepseek_planner.cp.ring_flash_attention_wrapper",
            "causal": True,
            "ring_size": 2,
        },
        "inner_target": "self",
        "inner_out_src": out,
    }


def dense_mlp() -> dict[str, Any]:
    return {
        "params": {**colwise("gate_proj", "up_proj"), **rowwise("down_proj")},
        "in_src": {"x": SEQ},
        "in_dst": {"x": FULL},
        "out_src": {"output": PARTIAL},
        "out_dst": {"output": SEQ},
        "out_names": ["output"],
        "is_boundary": True,
    }


def moe_mlp() -> dict[str, Any]:
    # Stacked expert weights: experts over ep, each expert's matrix over tp.
    return {
        "params": {
            "experts.down_proj": placement(ep="S(0)", tp="S(1)"),
            "experts.gate_up_proj": placement(ep="S(0)", tp="S(-1)"),
        },
        "in_src": {"hidden_states": SEQ},
        "in_dst": {"hidden_states": FULL},
        "out_src": {"output": PARTIAL},
        "out_dst": {"output": SEQ},
        "out_names": ["output", "router_logits"],
        "is_boundary": True,
    }


def router() -> dict[str, Any]:
    # Empty contracts: declared, and declaring that nothing is resharded.
    return {
        "params": {"weight": placement()},
        "in_src": {},
        "in_dst": {},
        "out_src": {},
        "out_dst": {},
        "tp_divide_attrs": [],
        "is_boundary": True,
    }


def shared_experts() -> dict[str, Any]:
    # What the meta normalizer leaves of a shared expert: stripped to a non-boundary
    # module and marked with the JSON boolean it writes.
    return {
        "params": {**colwise("gate_proj", "up_proj"), **rowwise("down_proj")},
        "is_boundary": False,
        "skip_source_lowering": True,
    }


def ep_rule(fqn: str) -> dict[str, Any]:
    return {
        "match": fqn,
        "local_compute_fn": {
            "_target_": "deepseek_planner.ep.grouped_gemm_expert_compute",
            "capacity_factor": 1.25,
            "use_grouped_gemm": True,
        },
        "ep_stack": {"dispatcher": "all_to_all", "num_local_experts": 32},
        "ep_size": 2,
    }


def sharded(param_plan: dict[str, dict[str, Any]]) -> list[str]:
    """Sorted FQNs of the parameters with any axis not replicated (docs/contract.md §9)."""
    return sorted(
        f"{fqn}.{param}"
        for fqn, entry in param_plan.items()
        for param, named in entry.get("params", {}).items()
        if any(text != "R" for text in named.values())
    )


def document(param_plan: dict[str, Any], rules: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    rules = sorted(rules, key=lambda rule: str(rule["match"]))
    return {
        "param_plan": param_plan,
        "injections": rules,
        "frozen_sharded_params": sharded(param_plan),
        "special_handlers": {},
        "tied_pairs": [],
        "parallel_dims": {"loss_parallel": False, "sequence_parallel": True},
        **top,
    }


def deepseek_moe(layers: int = 54, dense_layers: int = 3) -> dict[str, Any]:
    """A DeepSeek-style MoE plan: dense then MoE layers, MLA attention under cp, and
    `mesh_dim_names: null` as older planners write it."""
    plan: dict[str, Any] = {
        "model.embed_tokens": {
            "params": {"weight": placement(tp="S(0)")},
            "in_src": {"input_ids": placement(cp="S(1)")},
            "in_dst": {"input_ids": placement(cp="S(1)")},
            "out_src": {"output": PARTIAL},
            "out_dst": {"output": SEQ},
            "is_boundary": True,
        }
    }
    rules = []
    for layer in range(layers):
        prefix = f"model.layers.{layer}"
        plan[f"{prefix}.input_layernorm"] = norm()
        plan[f"{prefix}.self_attn"] = attention()
        plan[f"{prefix}.self_attn.kv_a_layernorm"] = {
            "params": {"weight": placement()},
            "is_boundary": True,
        }
        plan[f"{prefix}.post_attention_layernorm"] = norm()
        rules.append(cp_rule(layer, f"{prefix}.self_attn"))
        if layer < dense_layers:
            plan[f"{prefix}.mlp"] = dense_mlp()
            continue
        plan[f"{prefix}.mlp"] = moe_mlp()
        plan[f"{prefix}.mlp.gate"] = router()
        plan[f"{prefix}.mlp.shared_experts"] = shared_experts()
        rules.append(ep_rule(f"{prefix}.mlp"))
    plan["model.norm"] = norm()
    plan["lm_head"] = {
        "params": {"weight": placement(tp="S(0)")},
        "in_src": {"hidden_states": SEQ},
        "in_dst": {"hidden_states": FULL},
        "out_src": {"output": placement(cp="S(1)", tp="S(-1)")},
        "out_dst": {"output": placement(cp="S(1)", tp="S(-1)")},
        "deferred_bias_params": ["bias"],
        "is_boundary": True,
    }
    return document(
        plan,
        rules,
        mesh_dim_names=None,
        special_handlers={"lm_head": "deepseek_planner.loss.vocab_parallel_cross_entropy"},
        parallel_dims={
            "cp_size": 2,
            "ep_size": 2,
            "loss_parallel": True,
            "sequence_parallel": True,
            "tp_size": 2,
        },
        # Producer metadata another planner writes: kept unchanged (docs/contract.md §9).
        planner={"name": "deepseek-style-planner", "version": "0.9.2"},
        model_class="DeepseekV3ForCausalLM",
    )


def older_planner() -> dict[str, Any]:
    """A small artifact of an older planner: no mesh recorded, sparse entries, a marker
    written as an integer, a strided shard, a rule with a falsy inner_target."""
    plan = {
        "encoder.layer.0.attention": {
            "params": {"query.weight": {"tp": "S(0)"}, "value.weight": {"tp": "SS(0,2)"}},
            "skip_source_lowering": 1,
            "is_boundary": True,
        },
        "encoder.layer.0.output": {
            "params": {"dense.weight": {"tp": "S(1)"}},
            "is_boundary": False,
        },
        "pooler": {"params": {}, "tp_divide_attrs": [], "is_boundary": True},
        "classifier": {
            "out_src": {"logits": {"tp": "P(avg)"}},
            "out_dst": {"logits": {"tp": "R"}},
            "is_boundary": True,
        },
    }
    rules = [
        {"match": "encoder.layer.0.attention", "inner_out_src": {"tp": "S(-2)"}},
        {"match": "classifier", "inner_target": 0},
    ]
    return document(
        plan, rules, mesh_dim_names=None, tied_pairs=[["classifier.weight", "pooler.dense.weight"]]
    )


CORPUS = {
    "deepseek_moe_codegen_meta.json": deepseek_moe,
    "older_planner_codegen_meta.json": older_planner,
}


def main() -> None:
    for name, build in CORPUS.items():
        text = json.dumps(build(), indent=2, sort_keys=True) + "\n"
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"wrote tests/corpus/{name} ({len(text):,} bytes)")


if __name__ == "__main__":
    main()
