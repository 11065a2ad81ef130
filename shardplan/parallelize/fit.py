"""``check_fit(plan, model, mesh)``: does a plan fit this model and this mesh? Pure.

It reads the plan, the model's modules, parameters and forward signatures, and the mesh's
axis names and sizes; it moves no tensor and calls no collective, so ``apply_plan`` runs it
first and refuses, with every finding at once, a plan that would fail half-way through
sharding (docs/contract.md §13). ``mesh`` may be a DeviceMesh or ``{axis: size}``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn
from torch.distributed.tensor import Partial, Placement, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan.convert.targets import Target
from shardplan.errors import Finding
from shardplan.parallelize import layout
from shardplan.parallelize.layout import MeshShape, UnresolvedPlacement
from shardplan.table.apply_decisions import (
    LOSS_PARALLEL_KEY,
    MESH_DIM_NAMES_KEY,
    PARALLEL_DIMS_KEY,
    SHARDED_PARAMS_KEY,
)
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan


def check_fit(
    plan: ShardingPlan, model: nn.Module, mesh: Any, *, overrides_applied: bool = False
) -> list[Finding]:
    """Every way ``plan`` does not fit ``model`` on ``mesh``, in plan order; [] if it fits.

    ``overrides_applied``: the program says it has applied the plan's ``module_overrides``
    to the model (the plan's parameter names exist only in the replaced model).
    """
    shape = MeshShape.of(mesh)
    findings: list[Finding] = []
    add = findings.append
    if plan.mesh_dim_names is not None:
        for axis in plan.mesh_dim_names:
            if axis not in shape.names:
                add(
                    Finding(
                        MESH_DIM_NAMES_KEY,
                        f"axis {axis!r} is not a dimension of the mesh {shape.text()}",
                    )
                )
    region = layout.active_shape(plan, shape)
    _check_parallel_dims(plan, region, add)
    _check_plan_keys(plan, model, overrides_applied, add)
    will_shard: set[str] = set()
    for fqn, spec in plan.modules.items():
        try:
            module = model.get_submodule(fqn)
        except AttributeError:
            add(Finding(fqn, f"plan module {fqn!r} does not exist in {type(model).__name__}"))
            continue
        _check_module(fqn, spec, module, region, will_shard, add)
    _check_tied_pairs(plan, model, add)
    planned = {
        f"{fqn}.{path}" if fqn else path
        for fqn, spec in plan.modules.items()
        for path, named in (spec.params or {}).items()
        if any(type(p) is not Replicate for p in named.values())
    }
    for name in sorted(planned ^ will_shard):
        if name in planned and name not in will_shard:
            continue  # reported where it failed (a missing parameter or axis)
        add(
            Finding(
                SHARDED_PARAMS_KEY,
                f"the apply would shard {name}, which the plan's {SHARDED_PARAMS_KEY} lacks",
            )
        )
    if plan.loss_parallel and not _has_vocab_sharded_output(plan, region):
        add(
            Finding(
                LOSS_PARALLEL_KEY,
                "is true, but no module's out_dst shards its output's last dim on an axis",
            )
        )
    return findings


def _check_parallel_dims(plan: ShardingPlan, region: MeshShape, add: Any) -> None:
    dims = plan.other_keys.get(PARALLEL_DIMS_KEY)
    if not isinstance(dims, Mapping):
        return
    for axis in region.names:
        declared = dims.get(f"{axis}_size")
        if isinstance(declared, int) and declared != region.size(axis):
            add(
                Finding(
                    f"{PARALLEL_DIMS_KEY}.{axis}_size",
                    f"the plan was made for {axis}={declared}, the mesh's {axis} dimension has "
                    f"size {region.size(axis)} (mesh {region.text()}, {region.total} ranks)",
                )
            )
    ep = dims.get("ep_size")
    if isinstance(ep, int) and ep > 0 and region.total % ep:
        add(
            Finding(
                f"{PARALLEL_DIMS_KEY}.ep_size",
                f"{ep} does not divide the {region.total} ranks of the mesh {region.text()}",
            )
        )


def _check_plan_keys(
    plan: ShardingPlan, model: nn.Module, overrides_applied: bool, add: Any
) -> None:
    classes = plan.other_keys.get("boundary_classes")
    if isinstance(classes, Mapping):
        for fqn, name in classes.items():
            try:
                module = model.get_submodule(str(fqn))
            except AttributeError:
                add(Finding(f"boundary_classes[{fqn!r}]", f"the model has no module {fqn!r}"))
                continue
            if type(module).__name__ != name:
                add(
                    Finding(
                        f"boundary_classes[{fqn!r}]",
                        f"the plan expects a {name}, the model's {fqn} is a {type(module).__name__}",
                    )
                )
    overrides = plan.other_keys.get("module_overrides")
    if isinstance(overrides, list) and overrides:
        factories = sorted({str(o.get("factory", "?")).rpartition(".")[2] for o in overrides})
        if not overrides_applied:
            add(
                Finding(
                    "module_overrides",
                    f"the plan lists {len(overrides)} module overrides ({', '.join(factories)}): "
                    "apply these to the model first, or say they are applied "
                    "(overrides_applied=True)",
                )
            )
        else:
            for override in overrides:
                original = str(override.get("module_type", "")).rpartition(".")[2]
                for fqn in override.get("fqns", ()):
                    try:
                        module = model.get_submodule(str(fqn))
                    except AttributeError:
                        continue
                    if original and type(module).__name__ == original:
                        add(
                            Finding(
                                f"module_overrides[{fqn!r}]",
                                f"said applied, but {fqn} is still a {original}",
                            )
                        )
    for fqn, handler in plan.special_handlers.items():
        add(
            Finding(
                f"special_handlers[{fqn!r}]",
                f"handler {handler!r}: this apply has no special handlers; shard {fqn} "
                "with the plan's placements or apply the handler yourself first",
            )
        )


def _check_module(
    fqn: str,
    spec: ModuleShardingSpec,
    module: nn.Module,
    region: MeshShape,
    will_shard: set[str],
    add: Any,
) -> None:
    for path, named in (spec.params or {}).items():
        where = f"{fqn}.{path}" if fqn else path
        on = layout.param_shape(spec, path, region)
        if layout.is_expert_param(spec, path) and region.total % spec._ep_size:
            add(
                Finding(
                    where,
                    f"ep_size {spec._ep_size} does not divide the mesh's {region.total} ranks",
                )
            )
            continue
        try:
            placements = layout.resolve(named, on.names, where)
        except UnresolvedPlacement as exc:
            add(Finding(where, str(exc).partition(": ")[2]))
            continue
        shape = _param_shape(module, spec, path)
        if shape is None:
            add(Finding(where, "the plan shards a parameter the model does not have"))
            continue
        if any(type(p) is not Replicate for p in placements):
            will_shard.add(where)
        _check_divides(where, placements, on, shape, add)
    if spec.in_src or spec.in_dst or spec.out_src or spec.out_dst:
        _check_contracts(fqn, spec, module, region, add)
    if not spec.is_boundary and (spec.in_src != spec.in_dst or spec.out_src != spec.out_dst):
        add(
            Finding(
                fqn,
                "is_boundary is false, which moves nothing, but in/out contracts ask for a move",
            )
        )
    _check_injections(fqn, spec, module, region, add)
    if layout.head_sharded(spec, region) or spec.tp_divide_attrs:
        _check_divided_attrs(fqn, spec, module, region, add)
    for bias in spec._deferred_bias_params:
        leaf_path = bias.rpartition(".")[0]
        weight = (spec.params or {}).get(f"{leaf_path}.weight" if leaf_path else "weight")
        ok = False
        if weight is not None:
            try:
                placements = layout.resolve(weight, region.names, bias)
                ok = any(isinstance(p, Shard) and p.dim in (1, -1) for p in placements)
            except UnresolvedPlacement:
                ok = False
        try:
            leaf = module.get_submodule(leaf_path)
        except AttributeError:
            leaf = None
        if not ok or not isinstance(leaf, nn.Linear):
            add(Finding(f"{fqn}.{bias}", "a deferred bias must be the bias of a row-wise Linear"))
    if isinstance(module, nn.Embedding) and (module.padding_idx is not None or module.max_norm):
        weight = (spec.params or {}).get("weight")
        if weight and any(isinstance(p, Shard) for p in weight.values()):
            add(
                Finding(
                    fqn,
                    "a vocabulary-sharded Embedding with padding_idx or max_norm is not supported",
                )
            )


def _param_shape(module: nn.Module, spec: ModuleShardingSpec, path: str) -> tuple[int, ...] | None:
    sources = spec._ep_stack.get(path)
    if isinstance(sources, list) and sources:
        try:
            first = module.get_parameter(str(sources[0]))
            for source in sources:
                module.get_parameter(str(source))
        except AttributeError:
            return None
        return (len(sources), *first.shape)
    try:
        return tuple(module.get_parameter(path).shape)
    except AttributeError:
        return None


def _check_divides(
    where: str, placements: tuple[Placement, ...], on: MeshShape, shape: tuple[int, ...], add: Any
) -> None:
    ndim = len(shape)
    divisors: dict[int, int] = {}
    for axis, placement in zip(on.names, placements, strict=True):
        if isinstance(placement, Partial):
            add(Finding(where, f"a parameter cannot be Partial (on {axis})"))
        elif isinstance(placement, (Shard, _StridedShard)):
            if not -ndim <= placement.dim < ndim:
                add(
                    Finding(
                        where,
                        f"placement {layout.text([placement])[1:-1]} does not fit a parameter of "
                        f"shape {shape} ({ndim} dims)",
                    )
                )
                continue
            dim = placement.dim % ndim
            divisors[dim] = divisors.get(dim, 1) * on.size(axis)
    for dim, divisor in divisors.items():
        if shape[dim] % divisor:
            add(
                Finding(
                    where,
                    f"dim {dim} of shape {shape} is {shape[dim]}, which does not divide over "
                    f"{divisor} shards (mesh {on.text()})",
                )
            )


def _check_contracts(
    fqn: str, spec: ModuleShardingSpec, module: nn.Module, region: MeshShape, add: Any
) -> None:
    for label, contract in (
        ("in_src", spec.in_src),
        ("in_dst", spec.in_dst),
        ("out_src", spec.out_src),
        ("out_dst", spec.out_dst),
    ):
        for name, named in (contract or {}).items():
            try:
                layout.resolve(named, region.names, f"{fqn}.{label}[{name!r}]")
            except UnresolvedPlacement as exc:
                add(Finding(f"{fqn}.{label}[{name!r}]", str(exc).partition(": ")[2]))
    inputs = layout.forward_inputs(module.forward)
    names = list(dict.fromkeys([*(spec.in_src or {}), *(spec.in_dst or {})]))
    if names and spec.is_boundary:
        bound = layout.bind_inputs(names, inputs)
        if isinstance(bound, str):
            add(Finding(fqn, bound))
        missing = [n for n in (spec.in_dst or {}) if n not in (spec.in_src or {})]
        if missing:
            add(Finding(fqn, f"in_dst names {missing}, which in_src does not place"))
    outputs = layout.output_names(spec)
    extra = [n for n in (spec.out_dst or {}) if n not in outputs]
    if extra:
        add(Finding(fqn, f"out_dst names {extra}, which are not outputs {outputs}"))


def _check_injections(
    fqn: str, spec: ModuleShardingSpec, module: nn.Module, region: MeshShape, add: Any
) -> None:
    if spec.inner_wrapper is not None:
        if spec.inner_target not in (None, "self"):
            add(
                Finding(
                    f"{fqn}.inner_target",
                    f"{spec.inner_target!r}: this apply wraps only the module itself "
                    '(inner_target "self"); a child target needs inner_out_src placements it '
                    "does not move",
                )
            )
        if spec.inner_out_src is not None:
            add(
                Finding(
                    f"{fqn}.inner_out_src",
                    'is only meaningful for a child inner_target, not "self"',
                )
            )
    for label in ("inner_wrapper", "local_compute_fn"):
        value = getattr(spec, label)
        if value is not None and not (isinstance(value, Target) or callable(value)):
            add(
                Finding(
                    f"{fqn}.{label}",
                    f"{value!r}: this apply binds Targets and callables, not registry names",
                )
            )
    if spec._ep_size > 0:
        if region.total % spec._ep_size:
            add(
                Finding(
                    f"{fqn}.ep_size",
                    f"{spec._ep_size} does not divide the mesh's {region.total} ranks",
                )
            )
            return
        if spec.local_compute_fn is None:
            add(
                Finding(
                    f"{fqn}.ep_size", "expert parallelism needs a local_compute_fn to route tokens"
                )
            )
        varying = layout.edp_varying_axes(region, spec._ep_size)
        split = layout.split_axes(spec, region.names)
        if varying and not varying <= split and varying & split:
            add(
                Finding(
                    f"{fqn}.ep_size",
                    f"an edp group spans axes {sorted(varying)}, of which the input is split only "
                    f"on {sorted(varying & split)}: its expert gradients have no single sum",
                )
            )
    if spec._ep_stack:
        for stacked, sources in spec._ep_stack.items():
            if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
                add(Finding(f"{fqn}.ep_stack[{stacked!r}]", "expected a list of parameter paths"))


def _check_divided_attrs(
    fqn: str, spec: ModuleShardingSpec, module: nn.Module, region: MeshShape, add: Any
) -> None:
    if layout.TP not in region.names:
        add(Finding(f"{fqn}.tp_divide_attrs", f"there is no tp axis in the mesh {region.text()}"))
        return
    tp = region.size(layout.TP)
    attrs = list(spec.tp_divide_attrs or [])
    for attr in attrs:
        value = getattr(module, attr, None)
        if isinstance(value, bool) or not isinstance(value, int):
            add(
                Finding(
                    f"{fqn}.{attr}",
                    f"tp_divide_attrs names {attr!r}, which is not an int attribute",
                )
            )
        elif value % tp:
            add(Finding(f"{fqn}.{attr}", f"{value} is not divisible by tp={tp}"))
    if layout.head_sharded(spec, region):
        for attr in layout.HEAD_COUNT_ATTRS:
            value = getattr(module, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and value % tp:
                add(Finding(f"{fqn}.{attr}", f"head count {value} is not divisible by tp={tp}"))


def _check_tied_pairs(plan: ShardingPlan, model: nn.Module, add: Any) -> None:
    placed = {
        f"{fqn}.{path}" if fqn else path: named
        for fqn, spec in plan.modules.items()
        for path, named in (spec.params or {}).items()
    }
    for first, second in plan.tied_pairs:
        for name in (first, second):
            try:
                model.get_parameter(name)
            except AttributeError:
                add(
                    Finding(
                        f"tied_pairs[{first!r}, {second!r}]", f"the model has no parameter {name}"
                    )
                )
        if placed.get(first) != placed.get(second):
            add(
                Finding(
                    f"tied_pairs[{first!r}, {second!r}]",
                    "tied parameters must be placed alike",
                )
            )


def _has_vocab_sharded_output(plan: ShardingPlan, region: MeshShape) -> bool:
    for spec in plan.modules.values():
        for named in (spec.out_dst or {}).values():
            for placement in named.values():
                if isinstance(placement, Shard) and placement.dim == -1:
                    return True
    return False


def fit_message(findings: list[Finding]) -> str:
    """One message for all findings, each on its own line."""
    lines = "\n".join(f"  {f}" for f in findings)
    return f"the plan does not fit the model and mesh ({len(findings)} findings):\n{lines}"


def signature_accepts(fn: Any) -> tuple[set[str], bool]:
    """The keyword names ``fn`` accepts, and whether it takes ``**kwargs``."""
    parameters = inspect.signature(fn).parameters.values()
    names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind is p.VAR_KEYWORD for p in parameters)


__all__ = ["Finding", "check_fit", "fit_message"]
