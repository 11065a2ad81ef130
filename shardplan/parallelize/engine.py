"""The boundary engine: apply a plan on an N-D mesh the way the producer's runtime does.

Run by ``apply_plan`` after ``check_fit`` found nothing (docs/contract.md §13):

1. ``ep_stack``: per-expert weights are stacked into ``[E, ...]`` parameters.
2. Parameters are sharded: each planned parameter becomes its local shard (a plain
   parameter), on the active mesh or, for ``experts.*`` of a module with ``ep_size``, on
   the expert mesh ``(edp, ep)``. Head counts are divided where q/k/v weights are sharded on
   ``tp``, ``tp_divide_attrs`` by the tp size; a vocabulary-sharded Embedding masks the ids
   it does not hold; a deferred bias is added by the first rank of its row-sharded axes.
3. Tied pairs share one parameter again; gradient sums are hooked per parameter.
4. Deepest module first: the inner wrapper, then ``local_compute_fn``, then, for a
   boundary, its input and output redistributions, compiled once per module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Placement, Shard, distribute_tensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from shardplan.convert.targets import Target
from shardplan.parallelize import layout
from shardplan.parallelize.fit import signature_accepts
from shardplan.parallelize.layout import MeshShape
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

LAYOUTS_ATTR = "_shardplan_layouts"


class InjectionError(ValueError):
    """An injection could not be bound: no implementation, or the callable refused."""


@dataclass(frozen=True)
class ParamLayout:
    """Where a sharded parameter's local tensor sits: its mesh and one placement a mesh dim."""

    mesh: DeviceMesh
    placements: tuple[Placement, ...]
    global_shape: tuple[int, ...]


@dataclass(frozen=True)
class Redistribution:
    """One compiled move of a named tensor: ``src -> dst`` on the mesh, with its gradient
    layout (the gradient rule)."""

    name: str
    src: tuple[Placement, ...]
    dst: tuple[Placement, ...]
    grad: tuple[Placement, ...]

    def __call__(self, mesh: DeviceMesh, local: Any) -> Any:
        if not isinstance(local, torch.Tensor):
            return local
        moved = DTensor.from_local(local, mesh, self.src, run_check=False).redistribute(
            mesh, self.dst
        )
        grads = self.grad if local.is_floating_point() else None
        return moved.to_local(grad_placements=grads)


def sub_mesh(mesh: DeviceMesh, axes: tuple[str, ...]) -> DeviceMesh:
    """``mesh`` sliced to ``axes`` (already in mesh order); the mesh itself if they are all."""
    if axes == tuple(mesh.mesh_dim_names or ()):
        return mesh
    return mesh[axes[0]] if len(axes) == 1 else mesh[axes]


def expert_mesh(region: DeviceMesh, ep_size: int) -> DeviceMesh:
    """The region's ranks flattened row-major and re-sliced ``(edp, ep)`` (every rank calls it)."""
    ranks = region.mesh.flatten().reshape(-1, ep_size)
    return DeviceMesh(region.device_type, ranks, mesh_dim_names=layout.EXPERT_AXES)


class Engine:
    """One application of a plan to a model (``run`` does it once)."""

    def __init__(
        self,
        model: nn.Module,
        plan: ShardingPlan,
        mesh: DeviceMesh,
        implementations: Mapping[str, Callable[..., Any]],
        partial_input_grads: bool,
    ) -> None:
        self.model = model
        self.plan = plan
        self.shape = layout.active_shape(plan, MeshShape.of(mesh))
        self.region = sub_mesh(mesh, self.shape.names)
        self.implementations = implementations
        self.partial_input_grads = partial_input_grads
        self.expert_meshes: dict[int, DeviceMesh] = {}
        self.layouts: dict[str, ParamLayout] = {}

    def run(self) -> None:
        for ep_size in sorted({s._ep_size for s in self.plan.modules.values() if s._ep_size}):
            self.expert_meshes[ep_size] = expert_mesh(self.region, ep_size)
        for fqn, spec in self.plan.modules.items():
            module = self.model.get_submodule(fqn)
            if spec._ep_stack:
                _stack_experts(module, spec._ep_stack)
            self._shard_params(fqn, spec, module)
            self._divide_attrs(spec, module)
        self._tie()
        for fqn in sorted(self.plan.modules, key=lambda f: (-f.count("."), f)):
            self._install(fqn, self.plan.modules[fqn], self.model.get_submodule(fqn))
        setattr(self.model, LAYOUTS_ATTR, dict(self.layouts))

    # -- parameters --------------------------------------------------------------------

    def _mesh_of(self, spec: ModuleShardingSpec, path: str) -> tuple[DeviceMesh, MeshShape]:
        if layout.is_expert_param(spec, path):
            return self.expert_meshes[spec._ep_size], layout.expert_shape(self.shape, spec._ep_size)
        return self.region, self.shape

    def _shard_params(self, fqn: str, spec: ModuleShardingSpec, module: nn.Module) -> None:
        for path, named in (spec.params or {}).items():
            mesh, shape = self._mesh_of(spec, path)
            placements = layout.resolve(named, shape.names, path)
            owner_path, _, name = path.rpartition(".")
            owner = module.get_submodule(owner_path)
            param = owner.get_parameter(name)
            local = distribute_tensor(
                param.detach(), mesh, placements, src_data_rank=None
            ).to_local()
            sharded = nn.Parameter(local.clone(), requires_grad=param.requires_grad)
            owner._parameters[name] = sharded
            full = f"{fqn}.{path}" if fqn else path
            self.layouts[full] = ParamLayout(mesh, placements, tuple(param.shape))
            axes = layout.grad_sum_axes(spec, path, placements, self.shape)
            if path in spec._deferred_bias_params:
                axes = (*axes, *self._row_axes(spec, path))
            if axes and sharded.requires_grad:
                groups = [mesh.get_group(a) for a in axes if shape.size(a) > 1]
                if groups:
                    sharded.register_post_accumulate_grad_hook(_summing(groups))  # type: ignore[no-untyped-call]
            if isinstance(owner, nn.Embedding) and name == "weight":
                if any(isinstance(p, Shard) for p in placements):
                    _vocab_parallel(owner, mesh, placements, tuple(param.shape))
        for bias in spec._deferred_bias_params:
            leaf = module.get_submodule(bias.rpartition(".")[0])
            _defer_bias(leaf, self.region, self._row_axes(spec, bias))

    def _row_axes(self, spec: ModuleShardingSpec, bias: str) -> tuple[str, ...]:
        leaf_path = bias.rpartition(".")[0]
        weight = (spec.params or {})[f"{leaf_path}.weight" if leaf_path else "weight"]
        placements = layout.resolve(weight, self.shape.names, bias)
        return tuple(
            a
            for a, p in zip(self.shape.names, placements, strict=True)
            if isinstance(p, Shard) and p.dim in (1, -1)
        )

    def _divide_attrs(self, spec: ModuleShardingSpec, module: nn.Module) -> None:
        if layout.TP not in self.shape.names:
            return
        tp = self.shape.size(layout.TP)
        attrs = list(spec.tp_divide_attrs or [])
        if layout.head_sharded(spec, self.shape):
            attrs += [
                a
                for a in layout.HEAD_COUNT_ATTRS
                if a not in attrs
                and isinstance(getattr(module, a, None), int)
                and not isinstance(getattr(module, a), bool)
            ]
        for attr in attrs:
            setattr(module, attr, getattr(module, attr) // tp)

    def _tie(self) -> None:
        for first, second in self.plan.tied_pairs:
            owner_path, _, name = second.rpartition(".")
            self.model.get_submodule(owner_path)._parameters[name] = self.model.get_parameter(first)

    # -- forwards ----------------------------------------------------------------------

    def _context(self, module: nn.Module, spec: ModuleShardingSpec) -> dict[str, Any]:
        names = self.shape.names
        ep = self.expert_meshes.get(spec._ep_size)
        return {
            "module": module,
            "target_module": module,
            "mesh": self.region,
            "tp_mesh": (
                self.region[layout.TP]
                if layout.TP in names and len(names) > 1
                else (self.region if names == (layout.TP,) else None)
            ),
            "cp_mesh": (
                self.region["cp"]
                if "cp" in names and len(names) > 1
                else (self.region if names == ("cp",) else None)
            ),
            "ep_mesh": ep["ep"] if ep is not None else None,
        }

    def _bind(self, value: Any, where: str) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The callable an injection names and the kwargs it carries."""
        if isinstance(value, Target):
            bound = self.implementations.get(value.path)
            if bound is None:
                try:
                    bound = value.resolve()
                except ImportError as exc:
                    raise InjectionError(
                        f"{where}: cannot import {value.path} ({exc}); pass its implementation "
                        f"as implementations={{{value.path!r}: callable}}"
                    ) from None
            return bound, dict(value.kwargs)
        if callable(value):
            return value, {}
        raise InjectionError(f"{where}: {value!r} is not a Target or a callable")

    def _call(self, fn: Callable[..., Any], context: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        accepted, takes_any = signature_accepts(fn)
        given = {k: v for k, v in context.items() if takes_any or k in accepted}
        return fn(**given, **kwargs)

    def _install(self, fqn: str, spec: ModuleShardingSpec, module: nn.Module) -> None:
        original = module.forward
        forward: Callable[..., Any] = original
        context = self._context(module, spec)
        if spec.inner_wrapper is not None:
            wrapper, kwargs = self._bind(spec.inner_wrapper, f"{fqn}.inner_wrapper")
            installed = self._call(wrapper, context, kwargs)
            if not callable(installed):
                raise InjectionError(
                    f"{fqn}.inner_wrapper: {getattr(wrapper, '__name__', wrapper)} returned "
                    f"{installed!r}, not the forward to run"
                )
            forward = installed
        if spec.local_compute_fn is not None:
            factory, kwargs = self._bind(spec.local_compute_fn, f"{fqn}.local_compute_fn")
            compute = self._call(factory, context, kwargs)
            if not callable(compute):
                raise InjectionError(
                    f"{fqn}.local_compute_fn: the factory returned {compute!r}, not fn(module, ...)"
                )

            def forward(*args: Any, _fn: Any = compute, **kw: Any) -> Any:
                return _fn(module, *args, **kw)

        if spec.is_boundary:
            forward = self._boundary(fqn, spec, module, original, forward)
        if forward is not original:
            module.forward = forward

    def _boundary(
        self,
        fqn: str,
        spec: ModuleShardingSpec,
        module: nn.Module,
        original: Callable[..., Any],
        inner: Callable[..., Any],
    ) -> Callable[..., Any]:
        names = self.shape.names
        sharded = layout.param_sharded_axes(spec, self.shape) if self.partial_input_grads else set()
        inputs: list[tuple[int, Redistribution]] = []
        contract_names = list(dict.fromkeys([*(spec.in_src or {}), *(spec.in_dst or {})]))
        bound = (
            layout.bind_inputs(contract_names, layout.forward_inputs(original))
            if contract_names
            else {}
        )
        assert isinstance(bound, dict)  # check_fit refused the rest
        for name, index in bound.items():
            src = layout.resolve((spec.in_src or {}).get(name, {}), names, name)
            dst = layout.resolve((spec.in_dst or spec.in_src or {}).get(name, {}), names, name)
            if src != dst:
                grad = layout.input_grad_placements(dst, names, sharded)
                inputs.append((index, Redistribution(name, src, dst, grad)))
        outputs: list[tuple[int, Redistribution]] = []
        out_names = layout.output_names(spec)
        for index, name in enumerate(out_names):
            src = layout.resolve((spec.out_src or {}).get(name, {}), names, name)
            dst = layout.resolve((spec.out_dst or spec.out_src or {}).get(name, {}), names, name)
            if src != dst:
                outputs.append((index, Redistribution(name, src, dst, dst)))
        if not inputs and not outputs:
            return inner
        mesh, many = self.region, len(out_names) > 1
        positional = layout.forward_inputs(original)

        def boundary_forward(*args: Any, **kwargs: Any) -> Any:
            moved = list(args)
            for index, op in inputs:
                if op.name in kwargs:
                    kwargs[op.name] = op(mesh, kwargs[op.name])
                elif index < len(moved):
                    moved[index] = op(mesh, moved[index])
                elif positional[index] in kwargs:
                    kwargs[positional[index]] = op(mesh, kwargs[positional[index]])
            result = inner(*moved, **kwargs)
            if not outputs:
                return result
            if not many:
                return outputs[0][1](mesh, result)
            parts = list(result)
            for index, op in outputs:
                parts[index] = op(mesh, parts[index])
            return type(result)(parts) if isinstance(result, tuple) else parts

        return boundary_forward


def _summing(groups: list[Any]) -> Callable[[torch.Tensor], None]:
    def hook(param: torch.Tensor) -> None:
        if param.grad is not None:
            for group in groups:
                dist.all_reduce(param.grad, group=group)

    return hook


def _stack_experts(module: nn.Module, ep_stack: Mapping[str, Any]) -> None:
    """``{stacked path: [per-expert parameter paths, by expert]}``: stack each into one
    ``[E, ...]`` parameter; the stacked paths' parent replaces the per-expert container."""
    holders: dict[str, dict[str, nn.Parameter]] = {}
    for stacked, sources in ep_stack.items():
        parent, _, name = str(stacked).rpartition(".")
        tensors = [module.get_parameter(str(s)).detach() for s in sources]
        holders.setdefault(parent, {})[name] = nn.Parameter(torch.stack(tensors))
    for parent, params in holders.items():
        holder = nn.Module()
        for name, param in params.items():
            holder.register_parameter(name, param)
        grand, _, leaf = parent.rpartition(".")
        setattr(module.get_submodule(grand), leaf, holder)


def _vocab_parallel(
    embedding: nn.Embedding,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    global_shape: tuple[int, ...],
) -> None:
    """Mask the ids this rank's rows do not hold, so its output is its share of the sum."""
    local_shape, offset = compute_local_shape_and_global_offset(global_shape, mesh, placements)
    first, rows = offset[0], local_shape[0]

    def forward(input: torch.Tensor) -> torch.Tensor:
        outside = (input < first) | (input >= first + rows)
        local_ids = (input - first).masked_fill(outside, 0)
        out = F.embedding(local_ids, embedding.weight)
        return out.masked_fill(outside.unsqueeze(-1), 0.0)

    embedding.forward = forward  # type: ignore[method-assign]


def _defer_bias(leaf: nn.Module, mesh: DeviceMesh, row_axes: tuple[str, ...]) -> None:
    """A row-sharded Linear adds its bias on the first rank of its row axes only."""
    adds = all(mesh.get_local_rank(a) == 0 for a in row_axes)
    assert isinstance(leaf, nn.Linear)

    def forward(input: torch.Tensor) -> torch.Tensor:
        out = F.linear(input, leaf.weight)
        return out + leaf.bias if adds and leaf.bias is not None else out

    leaf.forward = forward  # type: ignore[method-assign]


def parameter_layouts(model: nn.Module) -> dict[str, ParamLayout]:
    """The layouts ``apply_plan`` gave the model's sharded parameters, by FQN."""
    found: dict[str, ParamLayout] = getattr(model, LAYOUTS_ATTR, {})
    return dict(found)


def full_tensor(local: torch.Tensor, where: ParamLayout) -> torch.Tensor:
    """The global tensor of a local shard (a collective over the layout's mesh)."""
    return DTensor.from_local(
        local,
        where.mesh,
        where.placements,
        run_check=False,
        shape=torch.Size(where.global_shape),
        stride=torch.empty(where.global_shape).stride(),
    ).full_tensor()


__all__ = ["Engine", "InjectionError", "ParamLayout", "full_tensor", "parameter_layouts"]
