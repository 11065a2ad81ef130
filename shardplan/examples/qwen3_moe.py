"""A tiny Qwen3-MoE-shaped model with the shared fixture's module and class names.

It is the post-override form the fixture's plan was made for (its ``module_overrides``
already applied): RMSNorm layer norms, a ``GQAAttention`` with a fused ``linear_qkv`` and
Qwen3MoeRMSNorm ``q_norm``/``k_norm``, and a ``Qwen3MoeSparseMoeBlock`` holding a top-k
``gate`` and stacked ``experts`` (``gate_up_proj`` ``[E, 2I, D]``, ``down_proj``
``[E, D, I]``). Attention calls ``self.attention_interface`` (the seam the fixture's
context-parallel wrapper replaces) and reads its head counts from instance attributes
(divided under tensor parallelism).

``linear_qkv``'s rows are grouped by key/value head (each group: its query heads, then its
key head, then its value head), so sharding the weight on dim 0 over ``tp`` gives each
rank whole groups. Positions come in as ``position_ids`` (a rank holding a slice of the
sequence passes its slice's positions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Qwen3MoeConfig:
    """Sizes; the defaults make a 4-layer model that runs in milliseconds on a CPU."""

    vocab_size: int = 64
    hidden_size: int = 32
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 8
    num_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 16
    rope_theta: float = 10000.0
    eps: float = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        normed: torch.Tensor = hidden_states * torch.rsqrt(variance + self.eps)
        return normed * self.weight


class Qwen3MoeRMSNorm(RMSNorm):
    """The per-head norm of queries and keys (over the head dimension)."""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        dim = config.head_dim
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq: torch.Tensor = self.inv_freq  # type: ignore[assignment]
        freqs = position_ids[..., None].float() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


AttentionInterface = Callable[..., tuple[torch.Tensor, Any]]


def sdpa_attention(
    module: nn.Module,
    query_states: torch.Tensor,
    key_states: torch.Tensor,
    value_states: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention on BNSD states (keys and values with fewer heads); returns BSND."""
    groups = query_states.shape[1] // key_states.shape[1]
    key_states = key_states.repeat_interleave(groups, dim=1)
    value_states = value_states.repeat_interleave(groups, dim=1)
    if attention_mask is None:
        out = F.scaled_dot_product_attention(
            query_states, key_states, value_states, is_causal=True, scale=scaling
        )
    else:
        out = F.scaled_dot_product_attention(
            query_states, key_states, value_states, attn_mask=attention_mask, scale=scaling
        )
    return out.transpose(1, 2), None


class GQAAttention(nn.Module):
    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        groups = config.num_attention_heads // config.num_key_value_heads
        width = config.num_key_value_heads * (groups + 2) * config.head_dim
        self.linear_qkv = nn.Linear(config.hidden_size, width, bias=False)
        self.o_proj = nn.Linear(
            config.num_attention_heads * config.head_dim, config.hidden_size, bias=False
        )
        self.q_norm = Qwen3MoeRMSNorm(config.head_dim, config.eps)
        self.k_norm = Qwen3MoeRMSNorm(config.head_dim, config.eps)
        self.attention_interface: AttentionInterface = sdpa_attention

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        batch, seq, _ = hidden_states.shape
        kv_heads, head_dim = self.num_key_value_heads, self.head_dim
        groups = self.num_attention_heads // kv_heads
        qkv = self.linear_qkv(hidden_states).view(batch, seq, kv_heads, groups + 2, head_dim)
        query = qkv[:, :, :, :groups].reshape(batch, seq, kv_heads * groups, head_dim)
        key, value = qkv[:, :, :, groups], qkv[:, :, :, groups + 1]
        query = self.q_norm(query).transpose(1, 2)
        key = self.k_norm(key).transpose(1, 2)
        value = value.transpose(1, 2)
        cos, sin = (t.unsqueeze(1) for t in position_embeddings)
        query = query * cos + _rotate_half(query) * sin
        key = key * cos + _rotate_half(key) * sin
        out, _ = self.attention_interface(self, query, key, value, None, scaling=head_dim**-0.5)
        projected: torch.Tensor = self.o_proj(out.reshape(batch, seq, -1))
        return projected


class TopKRouter(nn.Module):
    """``(logits, scores, indices)`` of the top-k experts per token, scores renormalised."""

    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.weight = nn.Parameter(torch.randn(config.num_experts, config.hidden_size) * 0.3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = F.linear(x, self.weight)
        probs = logits.softmax(dim=-1)
        scores, indices = probs.topk(self.top_k, dim=-1)
        return logits, scores / scores.sum(dim=-1, keepdim=True), indices


class GroupedExperts(nn.Module):
    """Stacked SwiGLU experts; ``forward`` runs expert ``e`` on the rows routed to it."""

    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        experts, dim, inner = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.gate_up_proj = nn.Parameter(torch.randn(experts, 2 * inner, dim) * dim**-0.5)
        self.down_proj = nn.Parameter(torch.randn(experts, dim, inner) * inner**-0.5)

    def expert(self, local_index: int, rows: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(rows, self.gate_up_proj[local_index]).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.down_proj[local_index])

    def forward(self, x: torch.Tensor, scores: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for e in range(self.gate_up_proj.shape[0]):
            token, slot = (indices == e).nonzero(as_tuple=True)
            out = out.index_add(0, token, self.expert(e, x[token]) * scores[token, slot, None])
        return out


class Qwen3MoeSparseMoeBlock(nn.Module):
    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.num_experts = config.num_experts
        self.gate = TopKRouter(config)
        self.experts = GroupedExperts(config)

    def forward(self, x_BLD: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x_BLD.shape
        x = x_BLD.reshape(-1, dim)
        _, scores, indices = self.gate(x)
        out: torch.Tensor = self.experts(x, scores, indices)
        return out.view(batch, seq, dim)


class Qwen3MoeDecoderLayer(nn.Module):
    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.eps)
        self.self_attn = GQAAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.eps)
        self.mlp = Qwen3MoeSparseMoeBlock(config)

    def forward(
        self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        x = hidden_states + self.self_attn(self.input_layernorm(hidden_states), position_embeddings)
        mixed: torch.Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return mixed


class Qwen3MoeModel(nn.Module):
    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            Qwen3MoeDecoderLayer(config) for _ in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.eps)
        self.rotary_emb = RotaryEmbedding(config)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor = self.embed_tokens(input_ids)
        position_embeddings = self.rotary_emb(position_ids)
        for layer in self.layers:
            x = layer(x, position_embeddings)
        normed: torch.Tensor = self.norm(x)
        return normed


class Qwen3MoeForCausalLM(nn.Module):
    """``model.embed_tokens``, ``model.layers.N.{self_attn,mlp,...}``, ``model.norm``, ``lm_head``."""

    def __init__(self, config: Qwen3MoeConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Qwen3MoeModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(
        self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        logits: torch.Tensor = self.lm_head(self.model(input_ids, position_ids))
        return logits
