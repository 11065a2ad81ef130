"""The live sharding plan: one ModuleShardingSpec per module FQN.

No torch import here: placements and Targets are imported under TYPE_CHECKING only, so
the generator and the staleness guard can import this module cheaply. The aliases below
exist at run time (naming those two by string), so the kinds module resolves every
field's annotation (``shardplan.table.kinds.field_types``): the annotation decides a
value's type, and generate holds each row's kinds to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias, Union

if TYPE_CHECKING:
    from torch.distributed.tensor import Placement

    from shardplan.convert.targets import Target

# A mesh axis key is a plain string or a str Enum member; its frozen key is the value.
AxisKey: TypeAlias = str | Enum
# Mapping[Any, ...]: keys are AxisKey, but a rebuilt plan holds dict[str, Placement]
# and Mapping is invariant in its key type.
NamedPlacement: TypeAlias = Mapping[Any, "Placement"]
PlacementMap: TypeAlias = Mapping[str, NamedPlacement]
Injected: TypeAlias = Union[  # noqa: UP007 ("Target" is a string: | cannot join it)
    "Target", Callable[..., Any], str, NamedPlacement, PlacementMap
]
# A JSON scalar, as the scalar kind writes and reads it.
Scalar: TypeAlias = str | int | float | bool


@dataclass
class ModuleShardingSpec:
    """How one module is sharded. Field order is the field table's order."""

    # param_plan group
    params: PlacementMap | None = None
    in_src: PlacementMap | None = None
    in_dst: PlacementMap | None = None
    out_src: PlacementMap | None = None
    out_dst: PlacementMap | None = None
    out_names: list[str] | None = None
    tp_divide_attrs: list[str] | None = None
    is_boundary: bool = True
    region_dispatch: Scalar | None = None
    # Post-construction state: set by the planner (or the rebuild) after __init__.
    _deferred_bias_params: tuple[str, ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    # A producer's marker: a truthy int or True (both cross, told apart).
    skip_source_lowering: int | bool | None = None
    # injections group
    inner_wrapper: Injected | None = None
    inner_target: Scalar | None = None
    inner_out_src: Injected | None = None
    local_compute_fn: Injected | None = None
    _ep_stack: dict[str, Any] = field(default_factory=dict)
    _ep_size: int = 0
    # exempt: runtime state that never crosses the artifact boundary
    _tp_local_attr_plan: Any = field(default=None, init=False, repr=False, compare=False)
    _is_terminal: bool = False
    _needs_cp_attn: bool = False
    _resolved_inner_wrapper: Any = None
    _resolved_inner_target: Any = None


@dataclass
class ShardingPlan:
    """A whole model's plan: specs by module FQN plus plan-level settings."""

    modules: dict[str, ModuleShardingSpec] = field(default_factory=dict)
    special_handlers: dict[str, str] = field(default_factory=dict)
    # None (the default): not recorded (older producers write null or leave it out),
    # meaning "use the full mesh".
    mesh_dim_names: tuple[str, ...] | None = None
    tied_pairs: list[tuple[str, str]] = field(default_factory=list)
    sequence_parallel: bool = True
    loss_parallel: bool = False
    # The artifact's keys no row of the plan table owns (other producers' metadata), as they
    # nest in the file (a "parallel_dims" key holds that object's unowned keys): a rebuilt
    # plan carries them and freeze writes them back unchanged.
    other_keys: dict[str, Any] = field(default_factory=dict)
