"""Bad input (docs/contract.md §10): every malformed meta is a MetaError whose ``.path`` and
message name the place."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardplan.artifact.meta import load_meta
from shardplan.errors import MetaError
from shardplan.table.spec import ShardingPlan
from tests.cases import ENTRY, MALFORMED, RULE, document, with_entry, with_rule
from tests.implementations import IMPLEMENTATIONS, use_both_implementations

impl = IMPLEMENTATIONS["reference"]  # rebound per test by the fixture below
implementation = use_both_implementations(__name__)


def load_and_rebuild(tmp_path: Path, raw: bytes, *, strict: bool = True) -> ShardingPlan:
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(raw)
    return impl.rebuild_live_plan_from_meta(load_meta(path), strict=strict)


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
