"""Hypothesis strategies: live specs and plans with real torch placements, and metas.

Valid metas are what freeze produces from random plans; malformed ones are those
with one random defect planted somewhere in their JSON.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import Any

from hypothesis import strategies as st
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan import reference
from shardplan.convert.placement_text import REDUCE_OPS
from shardplan.convert.targets import Target
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan


# (str, Enum), not StrEnum: the spelling planners use, which freeze must read.
class MeshAxis(str, Enum):  # noqa: UP042
    """Axis keys as a planner with an Enum writes them; the frozen key is the value."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    DP = "dp"


AXES = [axis.value for axis in MeshAxis]

placements = st.one_of(
    st.builds(Shard, st.integers(-4, 4)),
    st.just(Replicate()),
    st.builds(Partial, st.sampled_from(REDUCE_OPS)),
    st.builds(
        lambda dim, factor: _StridedShard(dim, split_factor=factor),
        st.integers(-4, 4),
        st.integers(1, 8),
    ),
)

# Names as modules and parameters are named, plus some that need quoting in paths.
names = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z0-9_]{1,6}){0,2}", fullmatch=True),
    st.text(min_size=1, max_size=6),
)


@st.composite
def named_placements(draw: st.DrawFn) -> dict[Any, Any]:
    """``{axis: placement}`` with each axis once, keyed by a str or by its Enum member."""
    axes = draw(st.lists(st.sampled_from(AXES), unique=True, max_size=4))
    return {(MeshAxis(axis) if draw(st.booleans()) else axis): draw(placements) for axis in axes}


placement_tables = st.dictionaries(names, named_placements(), max_size=4)
name_lists = st.one_of(st.lists(names, max_size=3), st.lists(names, max_size=3).map(tuple))

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)

TARGET_PATHS = ["json.dumps", "pkg.experts.ep_compute_fn", "my_models.cp.flash_attention_wrapper"]
# The module prefixes of every Target these strategies draw (callables included): what a
# test rebuilding their metas trusts (SPEC §7, Trust).
TARGET_PREFIXES = ("json", "math", "pkg", "my_models")
targets = st.builds(
    lambda path, kwargs: Target(path, **kwargs),
    st.sampled_from(TARGET_PATHS),
    st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), json_values, max_size=3),
)
# Module-level callables that import back to themselves.
importable_callables = st.sampled_from([json.dumps, json.loads, math.sqrt])

# The three shapes of an injected placement (SPEC §4): a registry name, a named placement
# {axis: placement} (one level, the common case), a contract {name: {axis: placement}}.
injected = st.one_of(
    targets,
    importable_callables,
    st.sampled_from(["self", "flash_attn", "ep_dispatch", "first_input"]),
    named_placements(),
    placement_tables.filter(lambda table: "_target_" not in table),
)


@st.composite
def specs(draw: st.DrawFn) -> ModuleShardingSpec:
    """A spec with every field at its default, None, empty or filled."""
    maybe = lambda strategy: draw(st.one_of(st.none(), strategy))  # noqa: E731
    spec = ModuleShardingSpec(
        params=maybe(placement_tables),
        in_src=maybe(placement_tables),
        in_dst=maybe(placement_tables),
        out_src=maybe(placement_tables),
        out_dst=maybe(placement_tables),
        out_names=maybe(name_lists),
        tp_divide_attrs=maybe(name_lists),
        is_boundary=draw(st.booleans()),
        region_dispatch=maybe(st.booleans()),
        # The normalizer's marker is the bool True; planners write ints.
        skip_source_lowering=maybe(st.one_of(st.integers(0, 3), st.booleans())),
        inner_wrapper=maybe(injected),
        inner_target=maybe(st.one_of(st.sampled_from(["self", "attn"]), st.integers(0, 3))),
        inner_out_src=maybe(injected),
        local_compute_fn=maybe(injected),
        _ep_stack=draw(st.dictionaries(st.text(max_size=4), json_values, max_size=2)),
        _ep_size=draw(st.integers(0, 8)),
        # Exempt fields: runtime state freeze must ignore, whatever it holds.
        _is_terminal=draw(st.booleans()),
        _needs_cp_attn=draw(st.booleans()),
        _resolved_inner_wrapper=draw(st.sampled_from([None, object(), len])),
    )
    spec._deferred_bias_params = draw(name_lists.map(tuple))
    spec._tp_local_attr_plan = draw(st.sampled_from([None, {"heads": 4}, object()]))
    return spec


@st.composite
def plans(draw: st.DrawFn, max_modules: int = 4) -> ShardingPlan:
    """A plan of a few modules (FQNs unique) with random plan-level settings."""
    fqns = draw(st.lists(names, unique=True, max_size=max_modules))
    return ShardingPlan(
        modules={fqn: draw(specs()) for fqn in fqns},
        special_handlers=draw(st.dictionaries(names, names, max_size=2)),
        # None: not recorded, as older producers write it (SPEC §8).
        mesh_dim_names=draw(
            st.one_of(
                st.none(), st.lists(st.sampled_from(AXES), unique=True, max_size=4).map(tuple)
            )
        ),
        tied_pairs=draw(st.lists(st.tuples(names, names), max_size=2)),
        sequence_parallel=draw(st.booleans()),
        loss_parallel=draw(st.booleans()),
    )


# Values a planner might wrongly leave in a spec, by field: each must be a FreezeError.
UNFREEZABLE = {
    "params": [{"w": {"tp": "S(0)"}}, {"w": {("tp",): Shard(0)}}, {"w": {"tp": object()}}, ["w"]],
    "in_src": [{"x": Shard(0)}, {"x": {"tp": {"nested": Shard(0)}}}],
    "out_names": ["logits", [1, 2]],
    "tp_divide_attrs": ["num_heads", {"a": 1}],
    "is_boundary": [[True], object(), 1, "yes", 0, 2.5],
    "skip_source_lowering": [1.5, "1", [1]],
    "inner_out_src": [{"tp": Shard(0), "x": {"tp": Shard(0)}}, Shard(0), 3],
    "inner_wrapper": [
        lambda: 0,
        Target("json.dumps", shape=(1, 2)),
        Shard(0),
        3.5,
        {"_target_": {"tp": Shard(0)}},
    ],
    "inner_target": [["self"], float("nan")],
    "local_compute_fn": [lambda x: x, [Target("json.dumps")]],
    "_ep_stack": [[1, 2], {"k": (1, 2)}, {1: "a"}],
    "_ep_size": [True, "2", 2.0],
}


@st.composite
def unfreezable_plans(draw: st.DrawFn) -> ShardingPlan:
    """A valid plan with one value freeze must refuse planted in one module."""
    plan = draw(plan_source().filter(lambda p: bool(p.modules)))
    fqn = draw(st.sampled_from(sorted(plan.modules)))
    name = draw(st.sampled_from(sorted(UNFREEZABLE)))
    setattr(plan.modules[fqn], name, draw(st.sampled_from(UNFREEZABLE[name])))
    return plan


def frozen_json(plan: ShardingPlan) -> dict[str, Any]:
    """The JSON document freeze gives for ``plan`` (decoded again, as a reader sees it)."""
    from shardplan.artifact.meta import meta_to_json

    return json.loads(meta_to_json(reference.freeze_plan(plan)))


def valid_meta_documents() -> st.SearchStrategy[dict[str, Any]]:
    """Documents freeze writes, decoded again."""
    return plan_source().map(frozen_json)


def _locations(node: Any, trail: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [trail]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _locations(value, (*trail, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _locations(value, (*trail, index))
    return found


def _set(document: Any, trail: tuple[Any, ...], value: Any) -> Any:
    if not trail:
        return value
    parent = document
    for step in trail[:-1]:
        parent = parent[step]
    parent[trail[-1]] = value
    return document


BAD_PLACEMENTS = ["S(x)", "P", "P()", "R ", "S(01)", "SS(0,0)", "Shard(0)", "s(0)", "", "P(mean)"]


@st.composite
def malformed_meta_documents(draw: st.DrawFn, bases: st.SearchStrategy[Any] | None = None) -> Any:
    """A frozen document (from ``bases``, default: random plans) with one defect planted
    at a random place."""
    document = draw(bases if bases is not None else valid_meta_documents())
    trail = draw(st.sampled_from(_locations(document)))
    defect = draw(st.sampled_from(["value", "key", "placement", "rule", "orphan", "drop_match"]))
    if defect == "value":
        return _set(document, trail, draw(json_values))
    if defect == "placement":
        return _set(document, trail, draw(st.sampled_from(BAD_PLACEMENTS)))
    if defect == "key":
        parent = document
        for step in trail:
            parent = parent[step]
        if isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "Params", "match", "_target_", "ep_size"]))] = (
                draw(json_values)
            )
        return document
    rules = document["injections"]
    if defect == "rule" and rules:
        rules.append(dict(draw(st.sampled_from(rules))))
    elif defect == "orphan":
        rules.append({"match": draw(names), "ep_size": 2})
    elif defect == "drop_match" and rules:
        draw(st.sampled_from(rules)).pop("match")
    return document


# ------------------------------------------------------------------ seeded plans
# Drawing a plan field by field costs Hypothesis ~10-30 ms; 2,000 examples a property
# (CI) would take minutes each, 50,000 (make fuzz) hours. Seeded plans are built by
# random.Random from one drawn integer: the same value pools, two orders of magnitude
# cheaper, and a failure is replayed from its seed. The shrinkable strategies above run
# in a few drawn-plan properties at a tenth of the count.

_NAME_POOL = ["w", "weight", "q_proj.weight", "x", "hidden_states", "output", "é", 'a"b', "_"]
_JSON_POOL: list[Any] = [None, True, 0, -7, 2.5, "", "s", [1, "a"], {"k": [None]}, {"": {"x": 1.0}}]


def _random_placement(rng: Any) -> Any:
    choice = rng.randrange(4)
    if choice == 0:
        return Shard(rng.randint(-4, 4))
    if choice == 1:
        return Replicate()
    if choice == 2:
        return Partial(rng.choice(REDUCE_OPS))
    return _StridedShard(rng.randint(-4, 4), split_factor=rng.randint(1, 8))


def _random_table(rng: Any) -> dict[Any, Any]:
    table = {}
    for name in rng.sample(_NAME_POOL, rng.randrange(4)):
        axes = rng.sample(AXES, rng.randrange(5))
        table[name] = {
            (MeshAxis(a) if rng.random() < 0.5 else a): _random_placement(rng) for a in axes
        }
    return table


def _random_names(rng: Any) -> Any:
    names_ = rng.sample(_NAME_POOL, rng.randrange(4))
    return tuple(names_) if rng.random() < 0.5 else names_


def _random_injected(rng: Any) -> Any:
    choice = rng.randrange(5)
    if choice == 0:
        kwargs = {
            k: rng.choice(_JSON_POOL)
            for k in rng.sample(["ring", "use_grouped_gemm", "k"], rng.randrange(3))
        }
        return Target(rng.choice(TARGET_PATHS), **kwargs)
    if choice == 1:
        return rng.choice([json.dumps, json.loads, math.sqrt])
    if choice == 2:
        return rng.choice(["self", "flash_attn", "first_input"])
    if choice == 3:
        return {
            (MeshAxis(a) if rng.random() < 0.5 else a): _random_placement(rng)
            for a in rng.sample(AXES, rng.randrange(5))
        }
    return _random_table(rng)


def random_spec(rng: Any) -> ModuleShardingSpec:
    """A spec drawn from the same pools as ``specs()``, by a seeded Random."""
    maybe = lambda make: make(rng) if rng.random() < 0.6 else None  # noqa: E731
    spec = ModuleShardingSpec(
        params=maybe(_random_table),
        in_src=maybe(_random_table),
        in_dst=maybe(_random_table),
        out_src=maybe(_random_table),
        out_dst=maybe(_random_table),
        out_names=maybe(_random_names),
        tp_divide_attrs=maybe(_random_names),
        is_boundary=rng.random() < 0.5,
        region_dispatch=maybe(lambda r: r.random() < 0.5),
        skip_source_lowering=maybe(lambda r: r.choice([0, 1, 2, 3, True, False])),
        inner_wrapper=maybe(_random_injected),
        inner_target=maybe(lambda r: r.choice(["self", "attn", 0, 3])),
        inner_out_src=maybe(_random_injected),
        local_compute_fn=maybe(_random_injected),
        _ep_stack={k: rng.choice(_JSON_POOL) for k in rng.sample(["a", "b", ""], rng.randrange(3))},
        _ep_size=rng.randrange(9),
        _is_terminal=rng.random() < 0.5,
        _resolved_inner_wrapper=rng.choice([None, len]),
    )
    spec._deferred_bias_params = tuple(_random_names(rng))
    return spec


def random_plan(seed: int) -> ShardingPlan:
    """A plan drawn from the same pools as ``plans()``; the seed replays it."""
    import random

    rng = random.Random(seed)
    fqns = rng.sample(_NAME_POOL + ["model.layers.0.mlp", "lm_head"], rng.randrange(5))
    return ShardingPlan(
        modules={fqn: random_spec(rng) for fqn in fqns},
        special_handlers={
            k: rng.choice(_NAME_POOL) for k in rng.sample(_NAME_POOL, rng.randrange(3))
        },
        mesh_dim_names=None if rng.random() < 0.2 else tuple(rng.sample(AXES, rng.randrange(5))),
        tied_pairs=[
            (rng.choice(_NAME_POOL), rng.choice(_NAME_POOL)) for _ in range(rng.randrange(3))
        ],
        sequence_parallel=rng.random() < 0.5,
        loss_parallel=rng.random() < 0.5,
    )


def plan_source() -> st.SearchStrategy[ShardingPlan]:
    """The plans of the properties: built by ``random_plan`` from one drawn seed (about
    0.2 ms a plan, against ~20 ms for a field-by-field draw), so CI affords 2,000 examples
    a property and ``make fuzz`` 50,000. A failure replays from its seed. The shrinkable
    ``plans()`` runs too, in tests/test_fidelity.py's drawn-plan properties."""
    return st.integers(0, 2**64).map(random_plan)
