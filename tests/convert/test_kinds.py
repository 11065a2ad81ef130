"""Every freeze and rebuild kind (docs/contract.md §4, §5), one field at a time, through the
table-driven impl."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import pytest
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan.artifact.meta import CodegenMeta
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import INJECTION_SPEC_FIELDS, PARAM_PLAN_SPEC_FIELDS
from tests import strategies
from tests.implementations import IMPLEMENTATIONS, use_both_implementations
from tests.older_artifacts import frozen_again

FQN = "model.layers.0.mlp"

impl = IMPLEMENTATIONS["reference"]  # rebound per test by the fixture below
implementation = use_both_implementations(__name__)


class _Absent:
    """The key is not written."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
KEY_OF = {f.name: f.key for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS)}
PARAM_PLAN_KEYS = [f.key for f in PARAM_PLAN_SPEC_FIELDS]
INJECTION_KEYS = [f.key for f in INJECTION_SPEC_FIELDS]


def module_level_compute(x: Any) -> Any:
    return x


def case_id(value: object) -> str:
    """A short, stable test id: no memory addresses, long values by their type."""
    if callable(value) and not isinstance(value, Target):
        text = getattr(value, "__name__", type(value).__name__)
    else:
        text = repr(value)
    return text if len(text) <= 40 and " at 0x" not in text else type(value).__name__


def spec_with(**values: Any) -> ModuleShardingSpec:
    """A default spec with ``values`` set after construction (so init=False fields work too)."""
    spec = ModuleShardingSpec()
    for name, value in values.items():
        setattr(spec, name, value)
    return spec


def plan_with(**values: Any) -> ShardingPlan:
    return ShardingPlan(modules={FQN: spec_with(**values)})


def frozen_entry(**values: Any) -> dict[str, Any]:
    return impl.freeze_param_plan(plan_with(**values))[FQN]


def frozen_rules(**values: Any) -> list[dict[str, Any]]:
    return impl.freeze_injections(plan_with(**values))


def rebuilt(**keys: Any) -> ModuleShardingSpec:
    """The spec rebuilt from one entry (and rule) holding the given frozen keys: what each
    kind reads (docs/contract.md §5, "key absent or null"), so leniently. Strict rebuild refuses
    the values freeze never writes (null, a falsy truthy-kind value): tests/generated/test_laws.py."""
    entry = {key: value for key, value in keys.items() if key in PARAM_PLAN_KEYS}
    rule = {key: value for key, value in keys.items() if key in INJECTION_KEYS}
    assert len(entry) + len(rule) == len(keys), "unknown frozen key in the test itself"
    injections = [{"match": FQN, **rule}] if rule else []
    meta = CodegenMeta(param_plan={FQN: entry}, injections=injections)
    return impl.rebuild_live_plan_from_meta(meta, strict=False, allow_targets=("pkg.*",)).modules[
        FQN
    ]


def assert_same(actual: Any, expected: Any) -> None:
    assert actual == expected
    assert type(actual) is type(expected)


# A value each freeze kind writes and its rebuild gives back unchanged, for rows added after
# full_spec() was written (README "Adding a spec field").
WRITTEN_BY_KIND: dict[str, Any] = {
    "placement_map": {"w": {"tp": Shard(0)}},
    "named_placements": {"x": {"tp": Replicate()}},
    "name_list": ["a"],
    "attr_list": ["a"],
    "scalar": True,
    "value_to_dict": Target("pkg.mod.fn"),
    "plain": "self",
    "dict_copy": {"k": 1},
    "int_truthy": 2,
}


def full_spec() -> ModuleShardingSpec:
    """A spec with every frozen field set to a value that is written."""
    values: dict[str, Any] = dict(
        params={"gate.weight": {"tp": Shard(0), "cp": Replicate()}},
        in_src={"x": {"tp": Shard(1)}},
        in_dst={"x": {"tp": Replicate()}},
        out_src={"out": {"tp": Partial("sum")}},
        out_dst={"out": {"tp": _StridedShard(-1, split_factor=2)}},
        out_names=["out"],
        tp_divide_attrs=["num_heads"],
        is_boundary=False,
        region_dispatch=True,
        _deferred_bias_params=("bias",),
        skip_source_lowering=1,
        inner_wrapper=Target("pkg.mod.wrapper", k=1),
        inner_target="self",
        inner_out_src={"out": {"tp": Shard(0)}},
        local_compute_fn=module_level_compute,
        _ep_stack={"experts": 4},
        _ep_size=2,
    )
    for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS):  # rows added since
        values.setdefault(f.name, copy.deepcopy(written_by_kind(f)))
    return spec_with(**values)


def test_every_freeze_kind_a_row_uses_has_a_pool_of_live_values() -> None:
    """A kind added without its pool is this one failure, naming the pool and the file to
    edit (README "A new kind"), not a KeyError wherever a plan is first drawn."""
    missing = []
    for row in strategies.drawn_rows():
        try:
            strategies.pool_of(row)
        except strategies.MissingPool as exc:
            missing.append(str(exc))
    assert not missing, "\n".join(missing)


def test_a_freeze_kind_without_a_pool_fails_naming_the_pool_and_the_file() -> None:
    row = dataclasses.replace(strategies.drawn_rows()[0], freeze="a_kind_with_no_pool")
    with pytest.raises(strategies.MissingPool) as raised:
        strategies._draw_row(random.Random(0), row, {row.name: 1})
    assert str(raised.value).startswith(
        "tests/strategies.py: POOLS has no pool for freeze kind 'a_kind_with_no_pool' "
        f"(row {row.name}): add 'a_kind_with_no_pool': lambda r:"
    )


def _as_rebuilt(row: Any, value: Any) -> Any:
    """Names set as the row's rebuild kind gives them back: a tuple, or a list."""
    rebuild = strategies.crossing_of(row).rebuild
    if rebuild == "name_tuple" and isinstance(value, list):
        return tuple(value)
    return list(value) if rebuild == "names" and isinstance(value, tuple) else value


def written_by_kind(row: Any) -> Any:
    """The hand-written value of the row's freeze kind; for a kind added since, a value of
    its pool in tests/strategies.py that its row reads back (no table here to extend)."""
    if row.freeze in WRITTEN_BY_KIND:
        return _as_rebuilt(row, WRITTEN_BY_KIND[row.freeze])
    rng = random.Random(row.name)
    for _ in range(100):
        value = strategies.POOLS[row.freeze](rng)
        if value is not None and strategies.crossing_of(row).writes(value):
            if strategies._reads_back(row, value):
                return _as_rebuilt(row, value)
    raise AssertionError(
        f"tests/strategies.py: POOLS[{row.freeze!r}] writes nothing {row.name} reads"
    )


# ------------------------------------------------------------------ write conditions


@pytest.mark.parametrize(
    ("name", "value", "written"),
    [
        ("params", None, ABSENT),
        ("params", {}, {}),
        ("params", {"w": {"tp": Shard(-1)}}, {"w": {"tp": "S(-1)"}}),
        ("in_src", None, ABSENT),
        ("in_src", {}, {}),
        ("in_dst", {"x": {}}, {"x": {}}),
        ("out_src", {"o": {"tp": Partial("max")}}, {"o": {"tp": "P(max)"}}),
        ("out_dst", {}, {}),
        ("out_names", None, ABSENT),
        ("out_names", [], ABSENT),
        ("out_names", ("a", "b"), ["a", "b"]),
        ("tp_divide_attrs", None, ABSENT),
        ("tp_divide_attrs", [], []),
        ("tp_divide_attrs", ("heads",), ["heads"]),
        ("is_boundary", False, False),
        ("is_boundary", True, True),
        ("region_dispatch", None, ABSENT),
        ("region_dispatch", False, False),
        ("region_dispatch", True, True),
        ("_deferred_bias_params", (), ABSENT),
        ("_deferred_bias_params", ("bias",), ["bias"]),
        ("skip_source_lowering", None, ABSENT),
        ("skip_source_lowering", 0, ABSENT),
        ("skip_source_lowering", False, ABSENT),
        ("skip_source_lowering", 3, 3),
        # The meta normalizer's marker: only an explicit True is ever written
        # (docs/contract.md §4).
        ("skip_source_lowering", True, True),
    ],
    ids=case_id,
)
def test_param_plan_field_is_written_exactly_when_its_kind_says(
    name: str, value: Any, written: Any
) -> None:
    entry = frozen_entry(**{name: value})
    key = KEY_OF[name]
    if written is ABSENT:
        assert key not in entry
    else:
        assert_same(entry[key], written)


def test_a_default_spec_writes_exactly_the_keys_written_for_their_default() -> None:
    """A spec of defaults writes only the keys whose row writes the field's default
    (is_boundary: True, written when not None), in table order, and rebuilds as itself."""
    defaults = ModuleShardingSpec()
    expected = [
        row.key
        for row in PARAM_PLAN_SPEC_FIELDS
        if strategies.crossing_of(row).writes(getattr(defaults, row.name))
    ]
    entry = frozen_entry()
    assert list(entry) == expected
    meta = CodegenMeta(param_plan={FQN: entry}, injections=[])
    assert impl.rebuild_live_plan_from_meta(meta).modules[FQN] == defaults


@pytest.mark.parametrize(
    ("name", "value", "written"),
    [
        ("inner_wrapper", None, ABSENT),
        ("inner_wrapper", Target("pkg.mod.wrap", k=[1]), {"_target_": "pkg.mod.wrap", "k": [1]}),
        ("inner_wrapper", "registry_name", "registry_name"),
        ("inner_target", None, ABSENT),
        ("inner_target", "self", "self"),
        ("inner_target", "", ""),
        ("inner_out_src", None, ABSENT),
        ("inner_out_src", {"out": {"tp": Shard(0)}}, {"out": {"tp": "S(0)"}}),
        # The common shape: one named placement {axis: placement}.
        ("inner_out_src", {"tp": Shard(0), "cp": Replicate()}, {"tp": "S(0)", "cp": "R"}),
        ("inner_out_src", {}, {}),
        ("inner_out_src", "registry_name", "registry_name"),
        ("local_compute_fn", None, ABSENT),
        (
            "local_compute_fn",
            module_level_compute,
            {"_target_": f"{__name__}.module_level_compute"},
        ),
        ("_ep_stack", {}, ABSENT),
        ("_ep_stack", {"experts": [1, 2]}, {"experts": [1, 2]}),
        ("_ep_size", 0, ABSENT),
        ("_ep_size", 2, 2),
    ],
    ids=case_id,
)
def test_injection_rule_is_written_exactly_when_a_key_is(
    name: str, value: Any, written: Any
) -> None:
    rules = frozen_rules(**{name: value})
    # The rule as hand-written here, with the rule keys a table writes always (which give
    # every module a rule): what freeze writes for a spec of defaults but this value.
    rule = [] if written is ABSENT else [{"match": FQN, KEY_OF[name]: written}]
    assert rules == frozen_again({"param_plan": {FQN: {}}, "injections": rule})["injections"]
    if written is not ABSENT:
        assert_same(rules[0][KEY_OF[name]], written)


def test_written_lists_and_dicts_are_copies_of_the_spec_values() -> None:
    stack = {"experts": 4}
    names = ["out"]
    plan = plan_with(_ep_stack=stack, out_names=names)
    meta = impl.freeze_plan(plan)
    assert meta.injections[0]["ep_stack"] is not stack
    assert meta.param_plan[FQN]["out_names"] is not names


def test_rules_are_ordered_by_match_with_match_first() -> None:
    plan = ShardingPlan(
        modules={
            "z": spec_with(_ep_size=2, inner_target="self"),
            "a": spec_with(params={}),
            "b": spec_with(inner_target="self"),
        }
    )
    rules = impl.freeze_injections(plan)
    # "a" holds no injection; it has a rule only where a table writes a rule key always.
    written = [{"match": "b"}, {"match": "z"}]
    document = frozen_again({"param_plan": dict.fromkeys("zab", {}), "injections": written})
    assert [rule["match"] for rule in rules] == [rule["match"] for rule in document["injections"]]
    assert [list(rule)[0] for rule in rules] == ["match"] * len(rules)


def test_param_plan_has_one_entry_per_module_in_plan_order() -> None:
    plan = ShardingPlan(modules={"z": spec_with(), "a": spec_with(), "m": spec_with()})
    assert list(impl.freeze_param_plan(plan)) == ["z", "a", "m"]


def test_fully_populated_entry_keys_are_in_table_order() -> None:
    plan = ShardingPlan(modules={FQN: full_spec()})
    assert list(impl.freeze_param_plan(plan)[FQN]) == PARAM_PLAN_KEYS


def test_fully_populated_rule_keys_are_match_then_table_order() -> None:
    plan = ShardingPlan(modules={FQN: full_spec()})
    (rule,) = impl.freeze_injections(plan)
    assert list(rule) == ["match", *INJECTION_KEYS]


def test_fully_populated_spec_survives_freeze_and_rebuild() -> None:
    spec = full_spec()
    meta = impl.freeze_plan(ShardingPlan(modules={FQN: spec}))
    back = impl.rebuild_live_plan_from_meta(meta, allow_targets=("pkg.*", __name__)).modules[FQN]
    for name in KEY_OF:
        expected = getattr(spec, name)
        if name == "local_compute_fn":
            expected = Target(f"{__name__}.module_level_compute")
        assert_same(getattr(back, name), expected)


# ---------------------------------------------------------------- rebuild defaults


# docs/contract.md §5: what each rebuild kind gives for an absent key. A row added after the cases
# below were written (README "Adding a spec field") is checked against its kind's default.
# The names that state an absent value; the others give the field's default (law (a)).
KIND_DEFAULTS: dict[str, Any] = {
    "opt_name_tuple": None,
    "bool_default_false": False,
    "bool_default_true": True,
    "opt_scalar": None,
    "tuple_empty": (),
}
REBUILD_DEFAULTS: dict[str, Any] = {
    # A row added since the table below was written: its kind name's absent value, else
    # its field's default (the generated code is still checked against it).
    **{
        f.name: (
            KIND_DEFAULTS[f.rebuild]
            if f.rebuild in KIND_DEFAULTS
            else getattr(ModuleShardingSpec(), f.name)
        )
        for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS)
    },
    "params": None,
    "in_src": None,
    "in_dst": None,
    "out_src": None,
    "out_dst": None,
    "out_names": None,
    "tp_divide_attrs": None,
    "is_boundary": True,
    "region_dispatch": None,
    "_deferred_bias_params": (),
    "skip_source_lowering": None,
    "inner_wrapper": None,
    "inner_target": None,
    "inner_out_src": None,
    "local_compute_fn": None,
    "_ep_stack": {},
    "_ep_size": 0,
}


def test_every_frozen_field_has_a_documented_rebuild_default() -> None:
    # Guards the parametrization below against a table row added without a case.
    assert list(REBUILD_DEFAULTS) == list(KEY_OF)


@pytest.mark.parametrize(("name", "default"), REBUILD_DEFAULTS.items())
def test_absent_key_rebuilds_to_the_documented_default(name: str, default: Any) -> None:
    assert_same(getattr(rebuilt(), name), default)


@pytest.mark.parametrize(("name", "key"), KEY_OF.items())
def test_null_key_rebuilds_like_an_absent_one(name: str, key: str) -> None:
    """Leniently; where freeze writes None as null (not the default), null is None."""
    row = next(f for f in (*PARAM_PLAN_SPEC_FIELDS, *INJECTION_SPEC_FIELDS) if f.name == name)
    expected = None if strategies.crossing_of(row).null_is_none else REBUILD_DEFAULTS[name]
    assert_same(getattr(rebuilt(**{key: None}), name), expected)


@pytest.mark.parametrize(
    ("key", "meta_value", "name", "expected"),
    [
        ("params", {}, "params", {}),
        (
            "params",
            {"w": {"tp": "S(-1)", "ep": "R"}},
            "params",
            {"w": {"tp": Shard(-1), "ep": Replicate()}},
        ),
        ("in_src", {}, "in_src", {}),
        (
            "in_dst",
            {"x": {"tp": "SS(0,2)"}},
            "in_dst",
            {"x": {"tp": _StridedShard(0, split_factor=2)}},
        ),
        ("out_src", {"o": {"tp": "P(sum)"}}, "out_src", {"o": {"tp": Partial("sum")}}),
        ("out_dst", {"o": {}}, "out_dst", {"o": {}}),
        ("out_names", [], "out_names", []),
        ("out_names", ["a", "b"], "out_names", ["a", "b"]),
        ("tp_divide_attrs", [], "tp_divide_attrs", []),
        ("is_boundary", False, "is_boundary", False),
        ("region_dispatch", False, "region_dispatch", False),
        ("deferred_bias_params", ["bias"], "_deferred_bias_params", ("bias",)),
        ("deferred_bias_params", [], "_deferred_bias_params", ()),
        ("skip_source_lowering", 2, "skip_source_lowering", 2),
        (
            "inner_wrapper",
            {"_target_": "pkg.mod.wrap", "k": 1},
            "inner_wrapper",
            Target("pkg.mod.wrap", k=1),
        ),
        ("inner_wrapper", "registry_name", "inner_wrapper", "registry_name"),
        ("inner_target", "self", "inner_target", "self"),
        ("inner_out_src", {"out": {"tp": "S(0)"}}, "inner_out_src", {"out": {"tp": Shard(0)}}),
        (
            "inner_out_src",
            {"cp": "S(1)", "tp": "R"},
            "inner_out_src",
            {"cp": Shard(1), "tp": Replicate()},
        ),
        ("inner_out_src", "registry_name", "inner_out_src", "registry_name"),
        ("skip_source_lowering", True, "skip_source_lowering", True),
        ("local_compute_fn", {"_target_": "pkg.mod.fn"}, "local_compute_fn", Target("pkg.mod.fn")),
        ("ep_stack", {"experts": [1, 2]}, "_ep_stack", {"experts": [1, 2]}),
        ("ep_size", 2, "_ep_size", 2),
    ],
    ids=case_id,
)
def test_present_key_rebuilds_to_its_live_value(
    key: str, meta_value: Any, name: str, expected: Any
) -> None:
    assert_same(getattr(rebuilt(**{key: meta_value}), name), expected)


def test_rebuilt_placements_keep_their_exact_types() -> None:
    params = rebuilt(params={"w": {"a": "S(0)", "b": "SS(0,2)"}}).params
    assert params is not None
    assert type(params["w"]["a"]) is Shard
    assert type(params["w"]["b"]) is _StridedShard


def test_rebuilt_ep_stack_is_a_copy_of_the_meta_value() -> None:
    stack = {"experts": 4}
    meta = CodegenMeta(param_plan={FQN: {}}, injections=[{"match": FQN, "ep_stack": stack}])
    assert impl.rebuild_live_plan_from_meta(meta).modules[FQN]._ep_stack is not stack


# ------------------------------------------------------------------ cannot freeze


class Opaque:
    def method(self) -> None:
        pass


@pytest.mark.parametrize(
    ("name", "value", "suffix"),
    [
        ("out_names", "out", ".out_names"),
        ("out_names", ["a", 1], ".out_names[1]"),
        ("tp_divide_attrs", "heads", ".tp_divide_attrs"),
        ("_deferred_bias_params", "bias", "._deferred_bias_params"),
        ("params", {"w": Shard(0)}, '.params["w"]'),
        ("params", {"w": {"tp": Opaque()}}, '.params["w"]["tp"]'),
        ("params", {1: {"tp": Shard(0)}}, ".params"),
        ("in_src", {"x": {"tp": {"deeper": Shard(0)}}}, '.in_src["x"]["tp"]'),
        ("is_boundary", [True], ".is_boundary"),
        # scalar writes these, but is_boundary is rebuilt by bool_default_true: refused.
        ("is_boundary", 1, ".is_boundary"),
        ("is_boundary", 0, ".is_boundary"),
        ("is_boundary", "yes", ".is_boundary"),
        ("is_boundary", 2.5, ".is_boundary"),
        ("inner_out_src", {"tp": Shard(0), "x": {"tp": Shard(0)}}, '.inner_out_src["x"]'),
        ("inner_out_src", {"x": {"tp": Shard(0)}, "tp": Shard(0)}, '.inner_out_src["tp"]'),
        ("region_dispatch", Opaque(), ".region_dispatch"),
        ("inner_wrapper", lambda x: x, ".inner_wrapper"),
        ("inner_wrapper", {"_target_": "pkg.mod.fn"}, ".inner_wrapper"),
        ("inner_wrapper", Target("pkg.mod.fn", sizes=(1, 2)), ".inner_wrapper.sizes"),
        ("inner_wrapper", Target("pkg.mod.fn", scale=float("nan")), ".inner_wrapper.scale"),
        ("inner_out_src", Shard(0), ".inner_out_src"),
        ("inner_out_src", 3, ".inner_out_src"),
        ("inner_target", ["self"], ".inner_target"),
        ("local_compute_fn", Opaque().method, ".local_compute_fn"),
        ("_ep_stack", {"k": Opaque()}, '._ep_stack["k"]'),
        ("_ep_stack", {1: "x"}, "._ep_stack"),
        ("_ep_stack", ["k"], "._ep_stack"),
        ("_ep_size", True, "._ep_size"),
        ("_ep_size", 2.0, "._ep_size"),
        ("skip_source_lowering", 1.5, ".skip_source_lowering"),
        ("skip_source_lowering", "1", ".skip_source_lowering"),
    ],
    ids=case_id,
)
def test_unfreezable_value_is_a_freeze_error_naming_its_place(
    name: str, value: Any, suffix: str
) -> None:
    path = f'modules["{FQN}"]{suffix}'
    with pytest.raises(FreezeError) as caught:
        impl.freeze_plan(plan_with(**{name: value}))
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")
