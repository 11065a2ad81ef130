"""This project's implementations of the two producer callables the shared fixture names.

Written from their documented contracts (docs/contract.md §13), not from the producer's
code, and bound to the fixture's Target paths through ``apply_plan(...,
implementations=IMPLEMENTATIONS)``:

- ``flash_attention_cp_wrapper`` (the fixture's ``inner_wrapper`` of every ``self_attn``):
  given the attention module and the context-parallel mesh, it swaps the module's
  ``attention_interface`` for one that all-gathers keys and values over ``cp`` (the
  backward reduce-scatters their gradients) and masks causally at the rank's offset in the
  sequence. It returns the forward to run (the module's own).
- ``ep_compute_fn`` (the fixture's ``local_compute_fn`` of every ``mlp``): a factory, given
  the expert mesh, returning ``fn(module, x_BLD)``: route each local token, send it to the
  rank holding its expert (all-to-all over ``ep``), run the local experts, send the
  results back, and combine them with the router's scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from shardplan.examples.qwen3_moe import sdpa_attention

CP_WRAPPER_PATH = (
    "hyper_parallel.models.qwen3_moe.adapter.distributed.context_parallel."
    "qwen3_moe_flash_attention_cp_wrapper"
)
EP_COMPUTE_PATH = (
    "hyper_parallel.models.qwen3_moe.adapter.distributed.expert_parallel.qwen3moe_ep_compute_fn"
)


def _gather_over(mesh: DeviceMesh, local: torch.Tensor, dim: int) -> torch.Tensor:
    """All-gather ``local`` along ``dim`` over a 1-D mesh; the backward reduce-scatters."""
    gathered = DTensor.from_local(local, mesh, [Shard(dim)], run_check=False)
    full: torch.Tensor = gathered.redistribute(mesh, [Replicate()]).to_local(
        grad_placements=[Partial()]
    )
    return full


class _AllToAll(torch.autograd.Function):
    """Rows to ranks (``send`` rows each) and back; the backward sends the gradients back."""

    @staticmethod
    def forward(
        ctx: Any, rows: torch.Tensor, send: list[int], recv: list[int], group: Any
    ) -> torch.Tensor:
        ctx.send, ctx.recv, ctx.group = send, recv, group
        out = rows.new_empty(sum(recv), *rows.shape[1:])
        dist.all_to_all_single(out, rows.contiguous(), recv, send, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        back = grad.new_empty(sum(ctx.send), *grad.shape[1:])
        dist.all_to_all_single(back, grad.contiguous(), ctx.send, ctx.recv, group=ctx.group)
        return back, None, None, None


def _all_to_all(rows: torch.Tensor, send: list[int], recv: list[int], group: Any) -> torch.Tensor:
    moved: torch.Tensor = _AllToAll.apply(rows, send, recv, group)  # type: ignore[no-untyped-call]
    return moved


def _offset_causal_mask(queries: int, keys: int, offset: int, device: torch.device) -> torch.Tensor:
    """True where query ``offset + i`` may attend key ``j`` (``j <= offset + i``)."""
    rows = torch.arange(queries, device=device)[:, None] + offset
    return torch.arange(keys, device=device)[None, :] <= rows


def flash_attention_cp_wrapper(
    target_module: nn.Module, cp_mesh: DeviceMesh | None, **_: Any
) -> Callable[..., Any]:
    """Install context-parallel attention on ``target_module``; return its forward."""
    if cp_mesh is None or cp_mesh.size() <= 1:
        raise ValueError("flash_attention_cp_wrapper needs a context-parallel mesh of size > 1")
    if not callable(getattr(target_module, "attention_interface", None)):
        raise ValueError(
            f"flash_attention_cp_wrapper wraps a module with an attention_interface, "
            f"not a {type(target_module).__name__}"
        )
    mesh = cp_mesh

    def cp_attention(
        module: nn.Module,
        query_states: torch.Tensor,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        if attention_mask is not None:
            raise ValueError("context-parallel attention builds its own causal mask")
        queries = query_states.shape[-2]
        keys = _gather_over(mesh, key_states.contiguous(), 2)
        values = _gather_over(mesh, value_states.contiguous(), 2)
        offset = mesh.get_local_rank() * queries
        mask = _offset_causal_mask(queries, keys.shape[-2], offset, query_states.device)
        return sdpa_attention(module, query_states, keys, values, mask, **kwargs)

    setattr(target_module, "attention_interface", cp_attention)  # noqa: B010 (a plain attribute)
    forward: Callable[..., Any] = target_module.forward
    return forward


def ep_compute_fn(
    *, module: nn.Module, ep_mesh: DeviceMesh | None, use_grouped_gemm: bool = False, **_: Any
) -> Callable[..., torch.Tensor]:
    """Expert-parallel compute for a ``Qwen3MoeSparseMoeBlock`` (``gate``, ``experts``).

    ``use_grouped_gemm`` is accepted and has no effect here: the experts run one matmul
    each either way.
    """
    del use_grouped_gemm
    if ep_mesh is None:
        raise ValueError("ep_compute_fn needs an expert-parallel mesh (the plan's ep_size)")
    for name in ("gate", "experts"):
        if not hasattr(module, name):
            raise ValueError(
                f"ep_compute_fn needs a module with {name!r}, got {type(module).__name__}"
            )
    group = ep_mesh.get_group()
    ep = ep_mesh.size()
    num_experts = int(getattr(module, "num_experts"))  # noqa: B009 (an int attribute, checked)
    if num_experts % ep:
        raise ValueError(f"ep_compute_fn: {num_experts} experts do not divide over ep={ep}")
    per_rank = num_experts // ep
    first = ep_mesh.get_local_rank() * per_rank
    Router = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    gate: Router = getattr(module, "gate")  # noqa: B009 (typed here)
    experts: Any = getattr(module, "experts")  # noqa: B009 (typed here)

    def fn(block: nn.Module, x_BLD: torch.Tensor) -> torch.Tensor:
        del block  # the module the factory was built for: its gate and experts are bound
        batch, seq, dim = x_BLD.shape
        x = x_BLD.reshape(-1, dim)
        _, scores, indices = gate(x)
        top_k = indices.shape[-1]
        flat = indices.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = torch.arange(x.shape[0], device=x.device).repeat_interleave(top_k)[order]
        expert = flat[order]
        send = torch.bincount(expert // per_rank, minlength=ep)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=group)
        send_sizes, recv_sizes = send.tolist(), recv.tolist()
        rows = x[token]
        arrived = _all_to_all(rows, send_sizes, recv_sizes, group)
        arrived_expert = torch.empty(sum(recv_sizes), dtype=expert.dtype, device=x.device)
        dist.all_to_all_single(arrived_expert, expert, recv_sizes, send_sizes, group=group)
        computed = torch.zeros_like(arrived)
        for local in range(per_rank):
            (picked,) = (arrived_expert == first + local).nonzero(as_tuple=True)
            computed = computed.index_add(0, picked, experts.expert(local, arrived[picked]))
        returned = _all_to_all(computed, recv_sizes, send_sizes, group)
        weights = scores.reshape(-1)[order, None]
        out = torch.zeros_like(x).index_add(0, token, returned * weights)
        return out.view(batch, seq, dim)

    return fn


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    CP_WRAPPER_PATH: flash_attention_cp_wrapper,
    EP_COMPUTE_PATH: ep_compute_fn,
}
