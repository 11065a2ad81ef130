"""Where a plan puts each parameter and activation: pure computations on axis names and sizes.

No collective and no process group here: ``check_fit`` and the engine both read these, so
what is checked before sharding is what the engine then does (docs/contract.md §13).

- The *active axes* are ``plan.mesh_dim_names`` in the mesh's own order (``None``: every
  axis of the mesh).
- A module with ``ep_size`` > 0 places its ``experts.*`` parameters on the *expert mesh*:
  the active region's ranks flattened row-major and re-sliced ``(edp, ep)``, ``edp`` being
  the region's size divided by ``ep_size``. Every other parameter lives on the active axes.
- A named placement resolves to one placement per axis, in mesh order; a missing axis is
  ``Replicate()``; an axis the mesh lacks may only be named with ``R``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch.distributed.tensor import Partial, Placement, Replicate, Shard

from shardplan.convert.placements import axis_name, placement_to_string
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

EXPERT_PREFIX = "experts."
EXPERT_AXES = ("edp", "ep")
# The producer's canonical head-count attributes (divided when a q/k/v weight is S(0) on tp)
# and the weight names that shard heads.
HEAD_COUNT_ATTRS = (
    "num_heads",
    "num_attention_heads",
    "n_heads",
    "num_attn_heads",
    "n_head",
    "heads",
    "num_head",
    "num_index_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "kv_heads",
)
QKV_WEIGHT_SUFFIXES = (
    "q_proj.weight",
    "q_b_proj.weight",
    "k_proj.weight",
    "v_proj.weight",
    "qkv_proj.weight",
    "qkv.weight",
    "linear_qkv.weight",
)
TP = "tp"


class UnresolvedPlacement(ValueError):
    """A named placement names a non-replicated axis the mesh does not have."""


@dataclass(frozen=True)
class MeshShape:
    """Axis names and sizes of a mesh, in mesh order."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, mesh: Any) -> MeshShape:
        """From a DeviceMesh, or from a mapping ``{axis: size}`` in mesh order."""
        if isinstance(mesh, Mapping):
            return cls(tuple(str(k) for k in mesh), tuple(int(v) for v in mesh.values()))
        names = tuple(mesh.mesh_dim_names or ())
        return cls(names, tuple(int(s) for s in mesh.shape))

    def size(self, axis: str) -> int:
        return self.sizes[self.names.index(axis)]

    @property
    def total(self) -> int:
        return math.prod(self.sizes)

    def text(self) -> str:
        return (
            "(" + ", ".join(f"{n}={s}" for n, s in zip(self.names, self.sizes, strict=True)) + ")"
        )


def active_axes(plan: ShardingPlan, mesh: MeshShape) -> tuple[str, ...]:
    """``plan.mesh_dim_names`` in the mesh's order (None: all the mesh's axes)."""
    if plan.mesh_dim_names is None:
        return mesh.names
    wanted = set(plan.mesh_dim_names)
    return tuple(name for name in mesh.names if name in wanted)


def active_shape(plan: ShardingPlan, mesh: MeshShape) -> MeshShape:
    axes = active_axes(plan, mesh)
    return MeshShape(axes, tuple(mesh.size(a) for a in axes))


def expert_shape(region: MeshShape, ep_size: int) -> MeshShape:
    """The expert mesh's shape: ``(edp = region size / ep_size, ep = ep_size)``."""
    return MeshShape(EXPERT_AXES, (region.total // ep_size, ep_size))


def is_expert_param(spec: ModuleShardingSpec, path: str) -> bool:
    return spec._ep_size > 0 and path.startswith(EXPERT_PREFIX)


def param_shape(spec: ModuleShardingSpec, path: str, region: MeshShape) -> MeshShape:
    """The mesh a planned parameter of ``spec`` lives on."""
    return expert_shape(region, spec._ep_size) if is_expert_param(spec, path) else region


def resolve(
    named: Mapping[Any, Placement], axes: Sequence[str], where: str
) -> tuple[Placement, ...]:
    """``{axis: placement}`` -> one placement per axis in ``axes`` (missing: Replicate)."""
    by_axis = {axis_name(axis, where): placement for axis, placement in named.items()}
    for axis, placement in by_axis.items():
        if axis not in axes and type(placement) is not Replicate:
            raise UnresolvedPlacement(
                f"{where}: mesh axis {axis!r} is not a dimension of the mesh ({', '.join(axes)})"
            )
    return tuple(by_axis.get(axis, Replicate()) for axis in axes)


def text(placements: Sequence[Placement]) -> str:
    return "(" + ", ".join(placement_to_string(p) for p in placements) + ")"


def shards_on(placements: Sequence[Placement], axes: Sequence[str]) -> set[str]:
    """The axes on which a placement tuple is not Replicate."""
    return {a for a, p in zip(axes, placements, strict=True) if type(p) is not Replicate}


def split_axes(spec: ModuleShardingSpec, axes: Sequence[str]) -> set[str]:
    """Axes along which the module computes on split activations: an input it computes on
    (``in_dst``, else ``in_src``) is sharded there."""
    split: set[str] = set()
    contract = spec.in_dst if spec.in_dst else spec.in_src
    for name, named in (contract or {}).items():
        try:
            placements = resolve(named, axes, name)
        except UnresolvedPlacement:
            continue
        split |= {a for a, p in zip(axes, placements, strict=True) if isinstance(p, Shard)}
    return split


def param_sharded_axes(spec: ModuleShardingSpec, region: MeshShape) -> set[str]:
    """The active axes on which the module shards one of its (dense) parameters."""
    axes: set[str] = set()
    for path, named in (spec.params or {}).items():
        if is_expert_param(spec, path):
            continue
        try:
            axes |= shards_on(resolve(named, region.names, path), region.names)
        except UnresolvedPlacement:
            continue
    return axes


def head_sharded(spec: ModuleShardingSpec, region: MeshShape) -> bool:
    """True when the module shards a q/k/v weight on dim 0 over ``tp`` (heads are split)."""
    if TP not in region.names:
        return False
    index = region.names.index(TP)
    for path, named in (spec.params or {}).items():
        if path.endswith(QKV_WEIGHT_SUFFIXES):
            try:
                placement = resolve(named, region.names, path)[index]
            except UnresolvedPlacement:
                continue
            if isinstance(placement, Shard) and placement.dim == 0:
                return True
    return False


def edp_varying_axes(region: MeshShape, ep_size: int) -> set[str]:
    """The region's axes along which the ranks of one ``edp`` group differ."""
    varying: set[str] = set()
    for offset in range(ep_size):
        ranks = range(offset, region.total, ep_size)
        coords = [_unravel(r, region.sizes) for r in ranks]
        for i, name in enumerate(region.names):
            if len({c[i] for c in coords}) > 1:
                varying.add(name)
    return varying


def _unravel(rank: int, sizes: Sequence[int]) -> tuple[int, ...]:
    coords = []
    for size in reversed(sizes):
        coords.append(rank % size)
        rank //= size
    return tuple(reversed(coords))


def grad_sum_axes(
    spec: ModuleShardingSpec, path: str, placements: Sequence[Placement], region: MeshShape
) -> tuple[str, ...]:
    """The axes a parameter's gradient is summed over (docs/contract.md §13, the gradient rule).

    Dense: each active axis on which the parameter is replicated and the module computes on
    split activations. Expert: ``edp`` when the parameter is replicated on it and the ranks of
    an ``edp`` group hold different tokens (the module's input is split on every axis they
    differ along); an ``edp`` group that differs along a split and an unsplit axis is
    refused by ``check_fit``.
    """
    split = split_axes(spec, region.names)
    if is_expert_param(spec, path):
        varying = edp_varying_axes(region, spec._ep_size)
        replicated_on_edp = type(placements[0]) is Replicate
        if replicated_on_edp and varying and varying <= split:
            return ("edp",)
        return ()
    return tuple(
        a
        for a, p in zip(region.names, placements, strict=True)
        if type(p) is Replicate and a in split
    )


def input_grad_placements(
    dst: Sequence[Placement], axes: Sequence[str], sharded: set[str]
) -> tuple[Placement, ...]:
    """The gradient layout of an input the module computes on (the gradient rule):
    ``Partial()`` on each axis where the input is replicated and the module shards a
    parameter (each rank's gradient is one term of the sum), else the input's own."""
    return tuple(
        Partial() if type(p) is Replicate and a in sharded else p
        for a, p in zip(axes, dst, strict=True)
    )


def forward_inputs(forward: Any) -> list[str]:
    """Names of a forward's positional parameters, in order."""
    import inspect

    parameters = inspect.signature(forward).parameters.values()
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def bind_inputs(names: Sequence[str], inputs: Sequence[str]) -> dict[str, int] | str:
    """Contract input name -> the forward's positional index; a single contract binds to the
    first input when its name is not a parameter. A str is the reason it cannot bind."""
    if len(names) == 1 and names[0] not in inputs:
        return {names[0]: 0} if inputs else f"forward() takes no input to bind {names[0]!r} to"
    missing = [n for n in names if n not in inputs]
    if missing:
        return f"contract inputs {missing} are not parameters of forward({', '.join(inputs)})"
    return {n: inputs.index(n) for n in names}


def output_names(spec: ModuleShardingSpec) -> list[str]:
    return list(spec.out_names or list(spec.out_src or {}))
