"""Hypothesis strategies: live specs and plans with real torch placements, and metas.

Valid metas are what freeze produces from random plans; malformed ones are those
with one random defect planted somewhere in their JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import random
from collections.abc import Callable
from enum import Enum
from typing import Any

from hypothesis import strategies as st
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan import reference
from shardplan.convert import kinds
from shardplan.convert.placement_text import REDUCE_OPS
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError, MetaError
from shardplan.table.format import GROUP_EXEMPT, GROUP_OTHERS, GROUP_PLAN, TOP_LEVEL_GROUPS
from shardplan.table.kinds import Crossing, field_types, resolve
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS


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
# What a test rebuilding these strategies' metas trusts (docs/trust.md): the library
# callables they draw as Targets (plain callables too), each by its exact name, and the
# modules of the made-up packages that stand for a program's own.
TARGET_ENTRIES = ("json.dumps", "json.loads", "math.sqrt", "pkg.experts", "my_models.cp")


def specs() -> st.SearchStrategy[ModuleShardingSpec]:
    """A spec with every field drawn from its kind's pool (default, None, empty or
    filled); exempt fields hold whatever runtime state freeze must ignore."""
    return st.randoms(use_true_random=False).map(random_spec)


@st.composite
def plans(draw: st.DrawFn, max_modules: int = 4) -> ShardingPlan:
    """A plan of a few modules (FQNs unique, drawn) and a random plan level: each plan
    field from its kind's pool, other producers' keys beside them."""
    fqns = draw(st.lists(names, unique=True, max_size=max_modules))
    rng = draw(st.randoms(use_true_random=False))
    return _random_plan_of(rng, {fqn: draw(specs()) for fqn in fqns})


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
# Drawing a plan field by field costs Hypothesis ~10-30 ms; hundreds of examples a property
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


# The live values of each freeze kind, by a seeded Random: the one place a kind's values
# are described for the tests. Every row draws from its freeze kind's pool, keeping the
# values its rebuild kind reads back (is_boundary: scalar, but only booleans), so a new
# field is drawn with no edit here, and a new kind needs its pool (pool_of() says so).
POOLS: dict[str, Callable[[Any], Any]] = {
    "placement_map": _random_table,
    "named_placements": _random_table,
    "name_list": _random_names,
    "attr_list": _random_names,
    "scalar": lambda r: r.choice([True, False, 0, 3, 2.5, "s", ""]),
    "value_to_dict": _random_injected,
    "plain": lambda r: r.choice(["self", "attn", 0, 3, True]),
    "dict_copy": lambda r: {
        k: r.choice(_JSON_POOL) for k in r.sample(["a", "b", ""], r.randrange(3))
    },
    "int_truthy": lambda r: r.choice([0, 1, 2, 3, 8, True, False]),
    "handler_map": lambda r: {
        k: r.choice(_NAME_POOL) for k in r.sample(_NAME_POOL, r.randrange(3))
    },
    "opt_name_list": lambda r: None if r.random() < 0.2 else _random_axes(r),
    "pair_list": lambda r: [
        (r.choice(_NAME_POOL), r.choice(_NAME_POOL)) for _ in range(r.randrange(3))
    ],
    "bool": lambda r: r.random() < 0.5,
    "scalar_unless_default": lambda r: r.choice([True, False, 0, 1, 3, 2.5, "s", ""]),
    # The typed kinds: values of their own type only (the annotation refuses the rest).
    "int": lambda r: r.choice([0, 1, 3, -7, 2**40]),
    "float": lambda r: r.choice([0.0, 0.5, -2.5, 1e300, 3]),
    "str": lambda r: r.choice(["", "s", "é", 'a"b']),
    "flag": lambda r: r.random() < 0.5,
}
# Runtime state in exempt fields, which freeze must ignore whatever it holds.
_EXEMPT_POOL: list[Any] = [None, True, {"heads": 4}, len]


def _random_axes(rng: Any) -> Any:
    return tuple(rng.sample(AXES, rng.randrange(5)))


def _defaults(cls: type) -> dict[str, Any]:
    """Each field's default value (a factory called), so a pool draws None only for a
    field whose type admits it."""
    return {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    }


_HINTS = {cls: field_types(cls) for cls in (ModuleShardingSpec, ShardingPlan)}
_SPEC_DEFAULTS = _defaults(ModuleShardingSpec)
_PLAN_DEFAULTS = _defaults(ShardingPlan)


@functools.cache
def crossing_of(row: Any) -> Crossing:
    """The row's crossing, against the class its table describes; resolved once a row (a
    draw asks for it per value, and resolving parses literals)."""
    cls = ShardingPlan if row.group in TOP_LEVEL_GROUPS else ModuleShardingSpec
    field = next((f for f in dataclasses.fields(cls) if f.name == row.name), None)
    return resolve(row, field, _HINTS[cls].get(row.name, Any))


def _reads_back(row: Any, value: Any) -> bool:
    """Whether a value of the row's freeze kind is one its rebuild kind gives back: the
    pools are per freeze kind, a row pairs it with a rebuild kind."""
    crossing = crossing_of(row)
    if not crossing.writes(value):  # None, a falsy value, or the default: the absent key
        return value is None or crossing.written in ("truthy", "not default")
    if value is None:  # written: as null, or (not the absent value) refused by the kind
        return crossing.writes_null
    if crossing.reads_back:
        return True
    try:
        frozen = getattr(kinds, crossing.function("freeze"))(value, "")
        trusted = (kinds.READ_BACK,) if crossing.rebuild_record.targets else ()
        kinds.admit(getattr(kinds, crossing.function("rebuild")), frozen, "", *trusted)
    except (FreezeError, MetaError):
        return False
    return True


class MissingPool(AssertionError):
    """A row's freeze kind has no pool of live values here (a kind added without its pool)."""


def pool_of(row: Any) -> Callable[[Any], Any]:
    """The pool of ``row``'s freeze kind; MissingPool, naming the pool and where it goes,
    for a kind that has none yet (README "A new kind": give it a pool)."""
    try:
        return POOLS[row.freeze]
    except KeyError:
        raise MissingPool(
            f"tests/strategies.py: POOLS has no pool for freeze kind {row.freeze!r} "
            f"(row {row.name}): add {row.freeze!r}: lambda r: <a live value drawn with r> "
            'to POOLS in tests/strategies.py, as README "A new kind" says'
        ) from None


def drawn_rows() -> list[Any]:
    """The rows whose values the strategies draw from a pool: every crossing spec row and
    every plan-level setting (derived keys are computed; other producers' keys have their
    own draw)."""
    return [
        *(row for row in SPEC_FIELDS if row.group != GROUP_EXEMPT),
        *(row for row in PLAN_FIELDS if row.group == GROUP_PLAN),
    ]


def _draw_row(rng: Any, row: Any, defaults: dict[str, Any]) -> Any:
    """None (where the field's default is None, so its type admits it) or a value of the
    row's freeze kind's pool that its rebuild kind gives back."""
    if defaults[row.name] is None and rng.random() < 0.3:
        return None
    pool = pool_of(row)
    # A shrinking Hypothesis Random gives the same choice every time: after 20 draws, a
    # Random of our own (seeded by the row) finds a value that reads back.
    fallback = random.Random(row.name)
    for attempt in range(60):
        value = pool(rng if attempt < 20 else fallback)
        if _reads_back(row, value):
            return value
    raise AssertionError(
        f"tests/strategies.py: the pool of {row.freeze} gives no value {row.name} reads back"
    )


def random_spec(rng: Any) -> ModuleShardingSpec:
    """A spec whose every field is drawn from its kind's pool by a seeded Random."""
    values = {
        row.name: _draw_row(rng, row, _SPEC_DEFAULTS)
        for row in SPEC_FIELDS
        if row.group != GROUP_EXEMPT
    }
    exempt = {
        row.name: rng.choice(_EXEMPT_POOL) for row in SPEC_FIELDS if row.group == GROUP_EXEMPT
    }
    init = {f.name for f in dataclasses.fields(ModuleShardingSpec) if f.init}
    spec = ModuleShardingSpec(**{k: v for k, v in {**values, **exempt}.items() if k in init})
    for name, value in {**values, **exempt}.items():
        if name not in init:
            setattr(spec, name, value)
    return spec


def _random_other_keys(rng: Any) -> dict[str, Any]:
    """Other producers' keys: at the top level, and beside the plan table's nested keys."""
    other = {k: rng.choice(_JSON_POOL) for k in rng.sample(_OTHER_KEYS, rng.randrange(3))}
    containers = {row.within for row in PLAN_FIELDS if row.within}
    for container in sorted(containers):
        if rng.random() < 0.5:
            other[container] = {k: rng.choice(_JSON_POOL) for k in rng.sample(_OTHER_KEYS, 2)}
    return other


_OTHER_KEYS = ["codegen_version", "signature", "tp_size", "source", "é"]


def _random_plan_of(rng: Any, modules: dict[str, ModuleShardingSpec]) -> ShardingPlan:
    values = {
        row.name: _draw_row(rng, row, _PLAN_DEFAULTS)
        for row in PLAN_FIELDS
        if row.group == GROUP_PLAN
    }
    others = {row.name: _random_other_keys(rng) for row in PLAN_FIELDS if row.group == GROUP_OTHERS}
    return ShardingPlan(modules=modules, **values, **others)


def random_plan(seed: int) -> ShardingPlan:
    """A plan drawn from the kinds' pools; the seed replays it."""
    rng = random.Random(seed)
    fqns = rng.sample(_NAME_POOL + ["model.layers.0.mlp", "lm_head"], rng.randrange(5))
    return _random_plan_of(rng, {fqn: random_spec(rng) for fqn in fqns})


def plan_source() -> st.SearchStrategy[ShardingPlan]:
    """The plans of the properties: built by ``random_plan`` from one drawn seed (about
    0.2 ms a plan, against ~20 ms for a field-by-field draw), so CI affords hundreds of examples
    a property and ``make fuzz`` 50,000. A failure replays from its seed. The shrinkable
    ``plans()`` runs too, in tests/generated/test_fidelity.py's drawn-plan properties."""
    return st.integers(0, 2**64).map(random_plan)
