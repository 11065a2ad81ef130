"""Documents, values and cases more than one test module draws from, in one place (a test
module imports from here and from the other helper modules of tests/, never from another
test module)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import random
from enum import Enum
from typing import Any

import pytest
from hypothesis import strategies as st
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan.convert.json_values import MAX_DEPTH
from shardplan.convert.targets import Target
from shardplan.table.spec_fields import INJECTION_SPEC_FIELDS, PARAM_PLAN_SPEC_FIELDS
from tests import strategies
from tests.strategies import MeshAxis

# ------------------------------------------------------------------ nesting


def nested(depth: int, leaf: Any = "x") -> Any:
    """A value whose containers nest ``depth`` levels (alternating objects and arrays)."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def nested_lists(levels: int) -> Any:
    """``levels`` lists, one inside the other."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


# ------------------------------------------------------------------ documents the laws draw from

ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 7, 2**60, 1.5, 2.0, -0.0, "", "s", "S(0)", "R", "self",
    [], ["a"], [1], [["a", "b"]], [["a"]], {}, {"tp": "S(0)"}, {"x": {"tp": "R"}},
    {"k": "v"}, {"_target_": "json.dumps"}, {"_target_": "json.dumps", "k": [1]},
    nested(MAX_DEPTH - 1), nested(MAX_DEPTH), nested(MAX_DEPTH + 1),
]  # fmt: skip
ENTRY_KEYS = [f.key for f in PARAM_PLAN_SPEC_FIELDS]
RULE_KEYS = [f.key for f in INJECTION_SPEC_FIELDS]
PLAN_PLACES: list[tuple[str, ...]] = [
    ("special_handlers",),
    ("mesh_dim_names",),
    ("tied_pairs",),
    ("parallel_dims", "sequence_parallel"),
    ("parallel_dims", "loss_parallel"),
    ("parallel_dims", "tp_size"),  # another producer's key
    ("frozen_sharded_params",),
    ("codegen_version",),  # another producer's key
]


def planted(document: dict[str, Any], rng: random.Random, value: Any) -> dict[str, Any]:
    """``document`` with ``value`` planted at one crossing key (or inside one: a Target's
    kwarg, an ep_stack value), chosen by ``rng``."""
    document = copy.deepcopy(document)
    value = copy.deepcopy(value)
    place = rng.randrange(5)
    if place == 0 and document["param_plan"]:
        entry = document["param_plan"][rng.choice(sorted(document["param_plan"]))]
        entry[rng.choice(ENTRY_KEYS)] = value
    elif place == 1 and document["injections"]:
        rng.choice(document["injections"])[rng.choice(RULE_KEYS)] = value
    elif place == 2 and document["injections"]:
        # Inside a value: a Target's kwarg, or an ep_stack member.
        rule = rng.choice(document["injections"])
        targets = [v for v in rule.values() if isinstance(v, dict) and "_target_" in v]
        holder = targets[0] if targets and rng.random() < 0.5 else rule.setdefault("ep_stack", {})
        if isinstance(holder, dict):
            holder["planted"] = value
    else:
        where = rng.choice(PLAN_PLACES)
        if where == ("frozen_sharded_params",) and value is None:
            return document  # a derived key's null reads as absent: recomputed (docstring)
        parent = document
        for step in where[:-1]:
            parent = parent.setdefault(step, {})
        parent[where[-1]] = value
    return document


@functools.cache
def bases() -> list[dict[str, Any]]:
    """Forty drawn documents, drawn when a test first asks (not at collection, where a kind
    without its pool would stop the whole suite instead of failing the tests that draw)."""
    return [strategies.frozen_json(strategies.random_plan(seed)) for seed in range(40)]


def entry_document(**keys: Any) -> dict[str, Any]:
    return {"param_plan": {"m": {"is_boundary": True, **keys}}, "injections": []}


def rule_document(**keys: Any) -> dict[str, Any]:
    return {"param_plan": {"m": {"is_boundary": True}}, "injections": [{"match": "m", **keys}]}


REFUSED_STRICTLY: dict[str, tuple[dict[str, Any], str]] = {
    # skip_source_lowering: int_truthy writes a truthy int or true, nothing else.
    **{
        f"skip_source_lowering {value!r}": (
            entry_document(skip_source_lowering=value),
            'param_plan["m"].skip_source_lowering',
        )
        for value in (1.5, 2.0, "s", "S(0)", 0, False, "")
    },
    "out_names []": (entry_document(out_names=[]), 'param_plan["m"].out_names'),
    "deferred_bias_params []": (
        entry_document(deferred_bias_params=[]),
        'param_plan["m"].deferred_bias_params',
    ),
    "ep_size 0": (rule_document(ep_size=0), "injections[0].ep_size"),
    "ep_stack {}": (rule_document(ep_stack={}), "injections[0].ep_stack"),
    "a rule holding only match": (rule_document(), "injections[0]"),
    "is_boundary null": (entry_document(is_boundary=None), 'param_plan["m"].is_boundary'),
    "inner_target null": (rule_document(inner_target=None), "injections[0].inner_target"),
    "ep_stack nested past the limit": (
        rule_document(ep_stack={"deep": nested(MAX_DEPTH)}),
        "injections[0].ep_stack",
    ),
    "a Target kwarg nested past the limit": (
        rule_document(local_compute_fn={"_target_": "json.dumps", "k": nested(MAX_DEPTH + 1)}),
        "injections[0].local_compute_fn.k",
    ),
    "parallel_dims.loss_parallel null": (
        {**entry_document(), "parallel_dims": {"loss_parallel": None}},
        "parallel_dims.loss_parallel",
    ),
    "another producer's key nested past the limit": (
        {**entry_document(), "codegen_version": nested(MAX_DEPTH)},
        "codegen_version",
    ),
}


# ------------------------------------------------------------------ malformed artifacts

ENTRY = 'param_plan["m"]'
RULE = "injections[0]"


def document(**top: Any) -> bytes:
    """A valid one-module meta, with top-level keys replaced by ``top``."""
    return json.dumps({"param_plan": {"m": {}}, "injections": [], **top}).encode("utf-8")


def with_entry(**keys: Any) -> bytes:
    return document(param_plan={"m": keys})


def with_rule(**keys: Any) -> bytes:
    return document(injections=[{"match": "m", **keys}])


def case(case_id: str, raw: bytes, path: str, fragment: str) -> Any:
    """One malformed meta: its bytes, the exact ``.path`` expected, and a piece of the message."""
    return pytest.param(raw, path, fragment, id=case_id)


# fmt: off
MALFORMED = [
    # --- the file itself
    case("truncated_json", b'{"param_plan": ', "", "not valid JSON"),
    case("empty_file", b"", "", "not valid JSON"),
    case("not_utf8", b'{"param_plan": {}, "x": "\xff"}', "", "not UTF-8"),
    case("top_level_array", b"[]", "", "must be a JSON object, got array"),
    case("top_level_null", b"null", "", "must be a JSON object, got null"),
    case("duplicate_top_key", b'{"param_plan": {}, "param_plan": {}}', "", "repeats the key 'param_plan'"),
    case("duplicate_entry_key", b'{"param_plan": {"m": {"params": {}, "params": {}}}}', "", "repeats the key 'params'"),
    case("nan_constant", b'{"param_plan": {}, "x": NaN}', "", "NaN"),
    case("infinity_constant", b'{"param_plan": {}, "x": -Infinity}', "", "-Infinity"),
    case("nesting_too_deep", b"[" * 100_000 + b"]" * 100_000, "", "not valid JSON"),
    # --- top-level fields
    case("param_plan_array", document(param_plan=[]), "param_plan", "expected an object, got array"),
    case("injections_object", document(injections={}), "injections", "expected an array, got object"),
    case("mesh_dim_names_string", document(mesh_dim_names="tp"), "mesh_dim_names", "expected an array"),
    case("mesh_dim_name_number", document(mesh_dim_names=["tp", 1]), "mesh_dim_names[1]", "expected a string"),
    case("tied_pair_of_three", document(tied_pairs=[["a", "b", "c"]]), "tied_pairs[0]", "pair of two"),
    case("tied_pair_string", document(tied_pairs=["a"]), "tied_pairs[0]", "expected an array"),
    case("special_handler_number", document(special_handlers={"x": 1}), 'special_handlers["x"]', "expected a string"),
    case("special_handlers_array", document(special_handlers=[]), "special_handlers", "expected an object"),
    case("sharded_param_null", document(frozen_sharded_params=[None]), "frozen_sharded_params[0]", "got null"),
    case("loss_parallel_number", document(parallel_dims={"loss_parallel": 1}), "parallel_dims.loss_parallel", "expected a boolean"),
    # --- entries
    case("entry_array", document(param_plan={"m": []}), ENTRY, "expected an object, got array"),
    case("unknown_entry_key", with_entry(bogus=1), f"{ENTRY}.bogus", "unknown key 'bogus'"),
    case("unknown_entry_key_not_identifier", with_entry(**{"bad key": 1}), f'{ENTRY}["bad key"]', "unknown key"),
    case("attribute_name_instead_of_key", with_entry(_deferred_bias_params=[]), f"{ENTRY}._deferred_bias_params", "unknown key"),
    case("params_array", with_entry(params=[]), f"{ENTRY}.params", "got array"),
    case("params_value_string", with_entry(params={"w": "S(0)"}), f'{ENTRY}.params["w"]', "got string"),
    case("bad_placement", with_entry(params={"w": {"tp": "S(x)"}}), f'{ENTRY}.params["w"]["tp"]', "cannot parse placement 'S(x)'"),
    case("placement_number", with_entry(params={"w": {"tp": 0}}), f'{ENTRY}.params["w"]["tp"]', "got number"),
    case("bare_partial", with_entry(params={"w": {"tp": "P"}}), f'{ENTRY}.params["w"]["tp"]', "cannot parse placement 'P'"),
    case("in_src_bad_placement", with_entry(in_src={"x": {"tp": "Replicate()"}}), f'{ENTRY}.in_src["x"]["tp"]', "cannot parse"),
    case("contract_three_levels", with_entry(out_dst={"o": {"tp": {"nested": "R"}}}), f'{ENTRY}.out_dst["o"]["tp"]', "got object"),
    case("out_names_string", with_entry(out_names="out"), f"{ENTRY}.out_names", "expected an array of strings, got string"),
    case("out_name_number", with_entry(out_names=[1]), f"{ENTRY}.out_names[0]", "expected a string, got number"),
    case("tp_divide_attrs_object", with_entry(tp_divide_attrs={}), f"{ENTRY}.tp_divide_attrs", "got object"),
    case("is_boundary_string", with_entry(is_boundary="false"), f"{ENTRY}.is_boundary", "expected a boolean, got string"),
    case("is_boundary_number", with_entry(is_boundary=0), f"{ENTRY}.is_boundary", "expected a boolean, got number"),
    case("region_dispatch_array", with_entry(region_dispatch=[]), f"{ENTRY}.region_dispatch", "got array"),
    case("deferred_bias_params_object", with_entry(deferred_bias_params={}), f"{ENTRY}.deferred_bias_params", "got object"),
    case("deferred_bias_params_string", with_entry(deferred_bias_params="bias"), f"{ENTRY}.deferred_bias_params", "got string"),
    case("skip_source_lowering_object", with_entry(skip_source_lowering={}), f"{ENTRY}.skip_source_lowering", "got object"),
    # --- rules
    case("rule_string", document(injections=["m"]), RULE, "expected an object, got string"),
    case("rule_without_match", document(injections=[{"ep_size": 2}]), RULE, '"match"'),
    case("match_number", document(injections=[{"match": 1}]), f"{RULE}.match", "expected a string, got number"),
    case("orphan_rule", document(injections=[{"match": "other", "ep_size": 2}]), f"{RULE}.match", "no param_plan entry for 'other'"),
    case(
        "two_rules_for_one_fqn",
        document(injections=[{"match": "m", "ep_size": 2}, {"match": "m", "inner_target": "self"}]),
        "injections[1].match",
        "the first is injections[0]",
    ),
    case("unknown_rule_key", with_rule(bogus=1), f"{RULE}.bogus", "unknown key 'bogus'"),
    case("rule_attribute_name_instead_of_key", with_rule(_ep_size=2), f"{RULE}._ep_size", "unknown key"),
    case("ep_size_boolean", with_rule(ep_size=True), f"{RULE}.ep_size", "expected an integer, got boolean"),
    case("ep_size_float", with_rule(ep_size=2.0), f"{RULE}.ep_size", "expected an integer, got number"),
    case("ep_stack_array", with_rule(ep_stack=[]), f"{RULE}.ep_stack", "expected an object, got array"),
    case("inner_wrapper_number", with_rule(inner_wrapper=3), f"{RULE}.inner_wrapper", "got number"),
    case("inner_wrapper_array", with_rule(inner_wrapper=["pkg.mod.fn"]), f"{RULE}.inner_wrapper", "got array"),
    case("target_not_dotted", with_rule(inner_wrapper={"_target_": "wrapper"}), f'{RULE}.inner_wrapper["_target_"]', "dotted import path"),
    case("target_number", with_rule(local_compute_fn={"_target_": 3}), f'{RULE}.local_compute_fn["_target_"]', "dotted import path"),
    case("inner_out_src_bad_placement", with_rule(inner_out_src={"o": {"tp": "X"}}), f'{RULE}.inner_out_src["o"]["tp"]', "cannot parse placement 'X'"),
    case("inner_target_object", with_rule(inner_target={}), f"{RULE}.inner_target", "got object"),
]
# fmt: on


# The packages the corpus and the shared fixture name Targets of: what the tests trust.
PRODUCERS = ("deepseek_planner.*", "hyper_parallel.*")


# ------------------------------------------------------------------ any Python value a plan may hold


class Opaque:
    """An object JSON has no form for; its class is an importable callable."""

    def method(self) -> None:
        """A bound method: callable, but no import path leads back to it."""


class Level(Enum):
    """An Enum whose values are not str: not a mesh axis key."""

    LOW = 1


def _cycle_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def _cycle_dict() -> dict[str, Any]:
    table: dict[str, Any] = {"tp": Shard(0)}
    table["self"] = table
    return table


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value} if depth % 2 else [value]
    return value


ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    # Past 64 bits, and past the digits Python turns into text (built lazily: Hypothesis
    # itself cannot repr an int that long).
    st.sampled_from([63, 64, 400, 5000]).map(lambda e: -(10**e) if e > 100 else 2**e),
    st.floats(),  # nan, inf, -0.0, subnormals included
    st.text(max_size=4),
    st.sampled_from(["\ud800", "é", "tp", "first_input", "pkg.mod.fn", "S(0)", "R"]),
    st.sampled_from(
        [Shard(0), Shard(-1), Replicate(), Partial("sum"), _StridedShard(1, split_factor=2)]
    ),
    st.sampled_from(list(MeshAxis) + [Level.LOW]),
    st.sampled_from(
        [
            Target("pkg.mod.fn"),
            Target("pkg.mod.fn", ring=True, sizes=[1, 2]),
            Target("pkg.mod.fn", sizes=(1, 2)),
            Target("pkg.mod.fn", scale=float("nan")),
            Target("pkg.mod.fn", table={1: "a"}),
        ]
    ),
    st.sampled_from([json.dumps, len, math.sqrt, Opaque, Opaque().method, lambda: 0, Opaque()]),
)
KEYS = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["tp", "cp", "_target_", "w", "out"] + list(MeshAxis) + [Level.LOW]),
    st.integers(-2, 2),
    st.none(),
)
VALUES = st.one_of(
    st.recursive(
        ATOMS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.frozensets(st.integers(0, 3), max_size=2),
            st.sets(st.text(max_size=2), max_size=2),
            st.dictionaries(KEYS, inner, max_size=3),
        ),
        max_leaves=8,
    ),
    st.builds(_cycle_list),
    st.builds(_cycle_dict),
    st.sampled_from([_nested(80), _nested(81), _nested(30)]),
)


# ------------------------------------------------------------------ the JSON codec's cases


def stdlib_bytes(document: Any) -> bytes:
    """The artifact's form, as the standard library writes it (raises where it refuses)."""
    return (json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def stdlib_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the standard library path of meta.py fail (the pure-Python indenting writer,
    the hooked reader), so only the fast path can succeed."""
    dumps = json.dumps

    def refuse_indent(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("indent") is not None:
            raise AssertionError("the standard library's indenting writer ran")
        return dumps(*args, **kwargs)  # the C encoder: the fast path's tokens

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the standard library reader ran")

    monkeypatch.setattr(json, "dumps", refuse_indent)  # the module meta.py calls
    monkeypatch.setattr(json, "loads", refuse)


PLAIN = {
    "param_plan": {"model.layers.0.mlp": {"params": {"up.weight": {"tp": "S(0)"}}}},
    "injections": [{"match": "model.layers.0.mlp", "ep_size": 2}],
    "parallel_dims": {"loss_parallel": True, "tp": 8, "none": None, "ratio": 0.5},
    "mesh_dim_names": ["dp", "tp"],
    "empty": [{}, []],
}


@dataclasses.dataclass
class Point:
    x: int


class Name(str):
    pass


def cycle() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items
