"""Turn a (rebuilt) ShardingPlan into real sharding: ``apply_plan``.

``apply_plan`` checks the fit (``check_fit``), then shards with the boundary engine
(``engine.py``, any mesh) or, for a plan torch's styles express on a 1-D mesh, with them.
The styles path:

Each planned Linear or Embedding becomes a ``ColwiseParallel`` or ``RowwiseParallel``
style chosen by its weight's placement; a module's in/out contracts become a
``PrepareModuleInputOutput`` (or fold into the style of a module that is itself the
sharded layer); ``tp_divide_attrs`` are divided by the mesh size; then
``parallelize_module`` does the sharding. Placements are resolved in mesh-dimension
order, a missing axis being replicated. Torch's styles shard over one mesh dimension,
so the mesh must be 1-D.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Placement, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInputOutput,
    RowwiseParallel,
    parallelize_module,
)
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan.convert.placements import axis_name, placement_to_string
from shardplan.errors import ApplyError
from shardplan.parallelize.engine import Engine, sub_mesh
from shardplan.parallelize.fit import check_fit, fit_message
from shardplan.parallelize.layout import MeshShape, active_shape
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan


def resolve_placements(
    named: Mapping[Any, Placement], mesh_dims: tuple[str, ...], where: str
) -> tuple[Placement, ...]:
    """``{axis: placement}`` -> one placement per mesh dimension, in mesh order."""
    by_axis = {axis_name(axis, where): placement for axis, placement in named.items()}
    for axis, placement in by_axis.items():
        if axis not in mesh_dims and type(placement) is not Replicate:
            raise ApplyError(
                f"{where}: mesh axis {axis!r} is not a dimension of the mesh ({', '.join(mesh_dims)})"
            )
    return tuple(by_axis.get(axis, Replicate()) for axis in mesh_dims)


def planned_placements(
    plan: ShardingPlan, mesh_dims: tuple[str, ...]
) -> dict[str, tuple[Placement, ...]]:
    """Every planned parameter's full FQN -> its placements in mesh order."""
    return {
        f"{fqn}.{path}" if fqn else path: resolve_placements(named, mesh_dims, f"{fqn}.{path}")
        for fqn, spec in plan.modules.items()
        for path, named in (spec.params or {}).items()
    }


def _check_fits(placement: Placement, param: nn.Parameter, where: str) -> None:
    if isinstance(placement, (Shard, _StridedShard)):
        ndim = param.dim()
        if not -ndim <= placement.dim < ndim:
            raise ApplyError(
                f"{where}: placement {placement_to_string(placement)} does not fit a parameter of "
                f"shape {tuple(param.shape)} ({ndim} dims)"
            )


def _text(placement: Placement) -> str:
    return placement_to_string(placement)


def _style(
    leaf: nn.Module, where: str, weight: Placement, bias: Placement | None, io: dict[str, Any]
) -> ParallelStyle | None:
    """The torch style for a layer whose weight has ``weight`` placement, or None if replicated."""
    if type(weight) is Replicate:
        if bias is not None and type(bias) is not Replicate:
            raise ApplyError(
                f"{where}.bias: a replicated layer cannot shard its bias ({_text(bias)})"
            )
        return None
    kinds = {
        nn.Linear: (ColwiseParallel, RowwiseParallel),
        nn.Embedding: (RowwiseParallel, ColwiseParallel),
    }
    styles = kinds.get(type(leaf))
    if styles is None or type(weight) is not Shard or weight.dim not in (0, 1, -1, -2):
        raise ApplyError(
            f"{where}.weight: no torch tensor-parallel style shards a {type(leaf).__name__} weight as "
            f"{_text(weight)}; styles cover Linear and Embedding weights sharded on dim 0 or 1"
        )
    style = styles[0] if weight.dim % 2 == 0 else styles[1]
    expected_bias = Shard(0) if style is ColwiseParallel else Replicate()
    if bias is not None and bias != expected_bias:
        raise ApplyError(
            f"{where}.bias: {style.__name__} needs the bias {_text(expected_bias)}, the plan says {_text(bias)}"
        )
    return style(**io)


def _forward_inputs(module: nn.Module) -> list[str]:
    parameters = inspect.signature(module.forward).parameters.values()
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _single(
    contract: Mapping[str, Any] | None, mesh_dims: tuple[str, ...], where: str
) -> Placement | None:
    if not contract:
        return None
    if len(contract) != 1:
        raise ApplyError(
            f"{where}: a layer's own contract must name exactly one tensor, got {sorted(contract)}"
        )
    ((name, named),) = contract.items()
    return resolve_placements(named, mesh_dims, f"{where}[{name!r}]")[0]


def _contract_style(
    module: nn.Module, spec: ModuleShardingSpec, mesh_dims: tuple[str, ...], where: str
) -> ParallelStyle | None:
    """PrepareModuleInputOutput from a container module's in/out contracts."""
    if not (spec.in_src or spec.out_src):
        return None
    inputs = _forward_inputs(module)
    for name in (*(spec.in_src or {}), *(spec.in_dst or {})):
        if name not in inputs:
            raise ApplyError(
                f"{where}: contract input {name!r} is not a parameter of forward({', '.join(inputs)})"
            )

    def layouts(
        contract: Mapping[str, Any] | None, names: list[str], label: str
    ) -> tuple[Placement | None, ...]:
        contract = contract or {}
        return tuple(
            (
                resolve_placements(contract[n], mesh_dims, f"{where}.{label}[{n!r}]")[0]
                if n in contract
                else None
            )
            for n in names
        )

    outputs = list(spec.out_names or list(spec.out_src or {}))
    out_src, out_dst = layouts(spec.out_src, outputs, "out_src"), layouts(
        spec.out_dst or spec.out_src, outputs, "out_dst"
    )
    if None in out_src or None in out_dst:
        raise ApplyError(
            f"{where}: out_src and out_dst must name every output of out_names {outputs}"
        )
    return PrepareModuleInputOutput(
        input_layouts=layouts(spec.in_src, inputs, "in_src"),
        desired_input_layouts=layouts(spec.in_dst or spec.in_src, inputs, "in_dst"),
        use_local_input=True,
        output_layouts=out_src if len(out_src) > 1 else out_src[0],  # type: ignore[arg-type]
        desired_output_layouts=out_dst if len(out_dst) > 1 else out_dst[0],  # type: ignore[arg-type]
        use_local_output=True,
    )


def _divide(module: nn.Module, attrs: list[str], size: int, where: str) -> None:
    for attr in attrs:
        value = getattr(module, attr, None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApplyError(
                f"{where}.{attr}: tp_divide_attrs names {attr!r}, which is not an int attribute"
            )
        if value % size:
            raise ApplyError(f"{where}.{attr}: {value} is not divisible by the mesh size {size}")
        setattr(module, attr, value // size)


def apply_plan(
    model: nn.Module,
    plan: ShardingPlan,
    mesh: DeviceMesh,
    *,
    implementations: Mapping[str, Callable[..., Any]] | None = None,
    overrides_applied: bool = False,
    partial_input_grads: bool = True,
) -> nn.Module:
    """Shard ``model`` in place as ``plan`` says, on ``mesh``; returns the model.

    ``check_fit`` runs first, before any collective: a plan that does not fit is one
    ``ApplyError`` listing every finding. The mesh is sliced to ``plan.mesh_dim_names``.
    On a 1-D slice, a plan with no injection, no expert parallelism and every module a
    boundary goes to torch's tensor-parallel styles (its parameters become DTensors);
    every other plan goes to the boundary engine (``shardplan.parallelize.engine``: local
    shards, compiled redistributions, gradients from the plan). ``implementations`` maps a
    Target's artifact path to the program's callable for it; a Target it does not name is
    resolved under the rebuild's trust rules. ``partial_input_grads=False`` gives torch's
    default gradient layouts at the gathers instead of the gradient rule (only to measure
    what the rule does). docs/contract.md §13.
    """
    findings = check_fit(plan, model, mesh, overrides_applied=overrides_applied)
    if findings:
        raise ApplyError(fit_message(findings), findings)
    shape = active_shape(plan, MeshShape.of(mesh))
    if len(shape.names) != 1 or not _styles_can_express(plan):
        Engine(model, plan, mesh, dict(implementations or {}), partial_input_grads).run()
        return model
    mesh = sub_mesh(mesh, shape.names)
    return _apply_styles(model, plan, mesh)


def _styles_can_express(plan: ShardingPlan) -> bool:
    """No injection, no expert parallelism, every module a boundary."""
    return all(
        spec.is_boundary
        and spec.inner_wrapper is None
        and spec.local_compute_fn is None
        and not spec._ep_size
        and not spec._ep_stack
        for spec in plan.modules.values()
    )


def _apply_styles(model: nn.Module, plan: ShardingPlan, mesh: DeviceMesh) -> nn.Module:
    """The 1-D path: torch's ColwiseParallel/RowwiseParallel and PrepareModuleInputOutput."""
    mesh_dims = tuple(mesh.mesh_dim_names or ())
    styles: dict[str, ParallelStyle] = {}
    for fqn, spec in plan.modules.items():
        try:
            module = model.get_submodule(fqn)
        except AttributeError:
            raise ApplyError(
                f"plan module {fqn!r} does not exist in {type(model).__name__}"
            ) from None
        leaves: dict[str, dict[str, Placement]] = {}
        for path, named in (spec.params or {}).items():
            where = f"{fqn}.{path}"
            leaf_path, _, name = path.rpartition(".")
            try:
                param = module.get_parameter(path)
            except AttributeError:
                raise ApplyError(
                    f"{where}: the plan shards a parameter the model does not have"
                ) from None
            placement = resolve_placements(named, mesh_dims, where)[0]
            _check_fits(placement, param, where)
            leaves.setdefault(leaf_path, {})[name] = placement
        for bias in spec._deferred_bias_params:
            leaf_path = bias.rpartition(".")[0]
            weight = leaves.get(leaf_path, {}).get("weight")
            if (
                not isinstance(weight, Shard)
                or weight.dim % 2 != 1
                or not isinstance(module.get_submodule(leaf_path), nn.Linear)
            ):
                raise ApplyError(
                    f"{fqn}.{bias}: a deferred bias must be the bias of a row-wise Linear"
                )
        for leaf_path, placed in leaves.items():
            leaf = module.get_submodule(leaf_path)
            leaf_fqn = f"{fqn}.{leaf_path}" if leaf_path else fqn
            if "weight" not in placed:
                raise ApplyError(f"{leaf_fqn}: the plan places {sorted(placed)} but not the weight")
            io: dict[str, Any] = {}
            if not leaf_path:  # the planned module is the layer itself: its contract is the style's
                io = {
                    "input_layouts": _single(spec.in_src, mesh_dims, f"{fqn}.in_src"),
                    "output_layouts": _single(spec.out_dst, mesh_dims, f"{fqn}.out_dst"),
                }
            style = _style(leaf, leaf_fqn, placed["weight"], placed.get("bias"), io)
            if style is not None:
                styles[leaf_fqn] = style
        if fqn not in styles:
            contract = _contract_style(module, spec, mesh_dims, fqn)
            if contract is not None:
                styles[fqn] = contract
        if spec.tp_divide_attrs:
            _divide(module, spec.tp_divide_attrs, mesh.size(), fqn)
    return parallelize_module(model, mesh, styles)
