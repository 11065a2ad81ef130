"""Bad input (docs/contract.md §10): every malformed meta is a MetaError whose ``.path`` and
message name the place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shardplan.artifact.meta import load_meta
from shardplan.errors import MetaError
from shardplan.table.spec import ShardingPlan
from tests.implementations import IMPLEMENTATIONS, use_both_implementations

ENTRY = 'param_plan["m"]'
RULE = "injections[0]"

impl = IMPLEMENTATIONS["reference"]  # rebound per test by the fixture below
implementation = use_both_implementations(__name__)


def document(**top: Any) -> bytes:
    """A valid one-module meta, with top-level keys replaced by ``top``."""
    return json.dumps({"param_plan": {"m": {}}, "injections": [], **top}).encode("utf-8")


def with_entry(**keys: Any) -> bytes:
    return document(param_plan={"m": keys})


def with_rule(**keys: Any) -> bytes:
    return document(injections=[{"match": "m", **keys}])


def load_and_rebuild(tmp_path: Path, raw: bytes, *, strict: bool = True) -> ShardingPlan:
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(raw)
    return impl.rebuild_live_plan_from_meta(load_meta(path), strict=strict)


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


@pytest.mark.parametrize(("raw", "path", "fragment"), MALFORMED)
def test_malformed_meta_is_a_meta_error_naming_its_place(
    tmp_path: Path, raw: bytes, path: str, fragment: str
) -> None:
    with pytest.raises(MetaError) as caught:
        load_and_rebuild(tmp_path, raw)
    assert caught.value.path == path
    message = str(caught.value)
    assert message.startswith(f"{path}: " if path else "")
    assert fragment in message


@pytest.mark.parametrize(
    "raw",
    [b'{"param_plan": ', b'{"param_plan": {}, "x": "\xff"}', b'{"a": 1, "a": 2}', b'{"x": NaN}'],
    ids=["truncated_json", "not_utf8", "duplicate_key", "nan_constant"],
)
def test_unreadable_file_error_names_the_file(tmp_path: Path, raw: bytes) -> None:
    with pytest.raises(MetaError, match="codegen_meta.json"):
        load_and_rebuild(tmp_path, raw)


def test_missing_file_is_a_meta_error(tmp_path: Path) -> None:
    with pytest.raises(MetaError, match="cannot read"):
        load_meta(tmp_path / "absent.json")


def test_meta_error_is_a_value_error() -> None:
    assert issubclass(MetaError, ValueError)


def test_non_strict_rebuild_ignores_unknown_keys_in_entries_and_rules(tmp_path: Path) -> None:
    raw = document(
        param_plan={"m": {"params": {}, "bogus": 1}},
        injections=[{"match": "m", "ep_size": 2, "from_the_future": {"x": 1}}],
    )
    spec = load_and_rebuild(tmp_path, raw, strict=False).modules["m"]
    assert spec.params == {}
    assert spec._ep_size == 2


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param(
            with_entry(bogus=1, params={"w": {"tp": "S(x)"}}),
            f'{ENTRY}.params["w"]["tp"]',
            id="bad_placement",
        ),
        pytest.param(
            document(injections=[{"match": "other", "bogus": 1}]), f"{RULE}.match", id="orphan_rule"
        ),
        pytest.param(
            document(injections=[{"match": "m"}, {"match": "m", "bogus": 1}]),
            "injections[1].match",
            id="two_rules",
        ),
        pytest.param(
            with_entry(bogus=1, out_names="out"), f"{ENTRY}.out_names", id="out_names_string"
        ),
        pytest.param(with_rule(bogus=1, ep_size=True), f"{RULE}.ep_size", id="ep_size_boolean"),
        pytest.param(document(param_plan={"m": "entry"}), ENTRY, id="entry_string"),
    ],
)
def test_non_strict_rebuild_still_refuses_everything_but_unknown_keys(
    tmp_path: Path, raw: bytes, path: str
) -> None:
    with pytest.raises(MetaError) as caught:
        load_and_rebuild(tmp_path, raw, strict=False)
    assert caught.value.path == path


def test_check_entry_builds_the_entry_s_path_only_when_it_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shardplan.artifact import plan_meta

    built: list[str] = []
    real_entry_path = plan_meta.entry_path

    def counting_entry_path(fqn: str) -> str:
        built.append(fqn)
        return real_entry_path(fqn)

    monkeypatch.setattr(plan_meta, "entry_path", counting_entry_path)
    entry = {"params": {}, "out_names": ["y"]}
    assert plan_meta.check_entry(entry, "m", ("params", "out_names"), True) is entry
    assert plan_meta.check_entry({"junk": 1}, "m", ("params",), False) == {"junk": 1}
    assert built == []
    with pytest.raises(MetaError) as caught:
        plan_meta.check_entry({"params": {}, "junk": 1}, "m", ("params",), True)
    assert caught.value.path == 'param_plan["m"].junk' and built == ["m"]


def test_rules_of_a_dict_or_str_subclass_built_in_python_are_indexed_as_before() -> None:
    """index_rules' accepting path tests exact types; a subclass takes the checking path,
    which accepts it as isinstance did."""
    from shardplan.artifact.meta import CodegenMeta
    from shardplan.artifact.plan_meta import index_rules

    class Rule(dict):  # type: ignore[type-arg]
        pass

    class Name(str):
        pass

    first, second = Rule(match="m", ep_size=2), {"match": Name("n"), "ep_size": 2}
    meta = CodegenMeta(param_plan={"m": {}, "n": {}}, injections=[first, second])
    assert index_rules(meta, ("ep_size",), True) == {"m": (0, first), "n": (1, second)}
    meta.injections.append(Rule(match=Name("n")))
    with pytest.raises(MetaError, match="a second rule for 'n'; the first is injections.1.") as e:
        index_rules(meta, ("ep_size",), True)
    assert e.value.path == "injections[2].match"


def test_the_entry_check_takes_a_value_whose_equality_refuses_none() -> None:
    """The accepting path's set test compares values with None; a value built in Python
    whose == raises (an array) takes the loop, which tests identity, as before."""
    from shardplan.artifact import plan_meta

    class Array:
        def __eq__(self, other: object) -> bool:
            raise ValueError("the truth value of an array is ambiguous")

        __hash__ = object.__hash__

    entry = {"params": Array()}
    assert plan_meta.check_entry(entry, "m", ["params"], True) is entry
    with pytest.raises(MetaError) as caught:
        plan_meta.check_entry({"params": Array(), "out_names": None}, "m", ("params",), True)
    assert caught.value.path == 'param_plan["m"].out_names'
    with pytest.raises(MetaError) as caught:
        plan_meta.check_entry({"params": None}, "m", ("params",), True)
    assert caught.value.path == 'param_plan["m"].params' and "never written" in str(caught.value)


def test_the_rebuilds_inline_entry_check_takes_a_value_whose_equality_refuses_none() -> None:
    """The generated rebuild tests an entry inline (a type test and two set operations); a
    value built in Python whose == raises takes check_entry, and the kind names it."""
    import shardplan
    from shardplan.artifact.meta import CodegenMeta

    class Array:
        def __eq__(self, other: object) -> bool:
            raise ValueError("the truth value of an array is ambiguous")

        __hash__ = object.__hash__

    meta = CodegenMeta(param_plan={"m": {"params": Array()}}, injections=[])
    with pytest.raises(MetaError) as caught:
        shardplan.rebuild_plan(meta)
    assert caught.value.path == 'param_plan["m"].params'
