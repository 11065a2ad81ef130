"""A value is what its field says (docs/contract.md §6, the type law): for every row of
both tables whose annotation names JSON's own types (``int``, ``float``, ``str``, ``bool``,
``Scalar``, each with or without ``| None``), artifacts holding a value of any other JSON
type are refused by ``read_plan`` and by the pair, naming the key; an absent key gives the
default; every value freeze writes comes back of its type; freeze refuses a live value of
another type. The cases are drawn from the annotations as the kinds module resolves them,
not listed, so a typed field added as README says is covered with no edit here (the weekly
flow runs this module in a copy that adds one of each kind).

Also: a JSON object without ``param_plan`` is no artifact, and ``show --html`` never
writes its page over an artifact.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from generator.kinds import shown_type
from shardplan import FreezeError, MetaError, freeze_plan, load_meta, read_plan, rebuild_plan
from shardplan.table.format import GROUP_INJECTIONS, GROUP_PARAM_PLAN, GROUP_PLAN
from shardplan.table.kinds import admits, field_types
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS

JSON_TYPES = (type(None), bool, int, float, str)
# One JSON value of each type an artifact may hold, by its JSON name.
SAMPLES: dict[str, Any] = {
    "null": None,
    "string": "abc",
    "integer": 3,
    "number": 2.5,
    "boolean": True,
    "array": ["x"],
    "object": {"k": 1},
}
# Live values of each type a typed field holds, freeze's input.
LIVE: dict[type, tuple[Any, ...]] = {
    type(None): (None,),
    bool: (True, False),
    int: (0, 5, -3, 2**40),
    float: (0.5, -2.25, 1e300, 7),  # an int stands for a float (PEP 484)
    str: ("", "x", "é"),
}


def _members(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _typed_rows() -> list[tuple[type, Any, Any]]:
    """(class, row, resolved annotation) of every crossing row whose annotation names only
    JSON's scalar types (None among them or not)."""
    found = []
    for cls, rows, groups in (
        (ModuleShardingSpec, SPEC_FIELDS, (GROUP_PARAM_PLAN, GROUP_INJECTIONS)),
        (ShardingPlan, PLAN_FIELDS, (GROUP_PLAN,)),
    ):
        hints = field_types(cls)
        for row in rows:
            hint = hints.get(row.name)
            if row.group in groups and hint is not None and hint is not Any:
                if all(member in JSON_TYPES for member in _members(hint)):
                    found.append((cls, row, hint))
    return found


TYPED = _typed_rows()


def _label(case: tuple[type, Any, Any]) -> str:
    return f"{case[1].name}: {shown_type(case[2])}"


def _document(row: Any, value: Any) -> dict[str, Any]:
    """A document holding ``value`` under the row's key (and one module, ``m``)."""
    document: dict[str, Any] = {"param_plan": {"m": {}}}
    if row.group == GROUP_PARAM_PLAN:
        document["param_plan"]["m"][row.key] = value
    elif row.group == GROUP_INJECTIONS:
        document["injections"] = [{"match": "m", row.key: value}]
    elif row.within:
        document[row.within] = {row.leaf: value}
    else:
        document[row.key] = value
    return document


def _both(tmp_path: Path, document: dict[str, Any]) -> list[Any]:
    """The plan (or the MetaError) read_plan and the pair give for ``document``."""
    path = tmp_path / "codegen_meta.json"
    path.write_text(json.dumps(document))
    found: list[Any] = []
    for read in (
        lambda: read_plan(path, allow_targets=()),
        lambda: rebuild_plan(load_meta(path), allow_targets=()),
    ):
        try:
            found.append(read())
        except MetaError as exc:
            found.append(exc)
    return found


def _value(plan: Any, cls: type, row: Any) -> Any:
    holder = plan.modules["m"] if cls is ModuleShardingSpec else plan
    return getattr(holder, row.name)


def test_the_typed_rows_are_drawn_from_both_tables() -> None:
    assert {cls for cls, _, _ in TYPED} == {ModuleShardingSpec, ShardingPlan}


@pytest.mark.parametrize("case", TYPED, ids=_label)
def test_a_value_of_another_json_type_is_refused_by_read_plan_and_the_pair(
    case: tuple[type, Any, Any], tmp_path: Path
) -> None:
    _, row, hint = case
    wrong = {name: v for name, v in SAMPLES.items() if not admits(hint, type(v))}
    assert set(wrong) >= {"string", "array", "object"} - (
        {"string"} if admits(hint, str) else set()
    )
    for name, value in wrong.items():
        for found in _both(tmp_path, _document(row, value)):
            assert isinstance(found, MetaError), (row.name, name, found)
            assert found.path.endswith(row.leaf), (row.name, name, found.path)
            if value is not None:  # a null is refused as never written, strictly
                said = {"integer": "number"}.get(name, name)  # json_type: an int is a number
                assert "expected" in found.message and f"got {said}" in found.message, found


@pytest.mark.parametrize("case", TYPED, ids=_label)
def test_an_absent_key_gives_the_default_and_each_value_freeze_writes_keeps_its_type(
    case: tuple[type, Any, Any], tmp_path: Path
) -> None:
    cls, row, hint = case
    default = next(f for f in dataclasses.fields(cls) if f.name == row.name).default
    for plan in _both(tmp_path, {"param_plan": {"m": {}}}):
        assert type(_value(plan, cls, row)) is type(default) and _value(plan, cls, row) == default
    written = 0
    for value in (v for member in _members(hint) for v in LIVE[member]):
        spec = ModuleShardingSpec(**{row.name: value}) if cls is ModuleShardingSpec else None
        plan = (
            ShardingPlan(modules={"m": spec})
            if spec
            else ShardingPlan(modules={"m": ModuleShardingSpec()}, **{row.name: value})
        )
        document = json.loads(json.dumps(_frozen(plan)))
        if document == _frozen(ShardingPlan(modules={"m": ModuleShardingSpec()})):
            continue  # left unwritten: the defaults laws' business (test_defaults_laws)
        written += 1
        for back in _both(tmp_path, document):
            got = _value(back, cls, row)
            assert type(got) is type(value) and got == value, (row.name, value, got)
    assert written, row.name


def _frozen(plan: ShardingPlan) -> dict[str, Any]:
    from shardplan.artifact.meta import meta_to_dict

    return meta_to_dict(freeze_plan(plan))


@pytest.mark.parametrize("case", TYPED, ids=_label)
def test_freeze_refuses_a_live_value_of_another_type(case: tuple[type, Any, Any]) -> None:
    cls, row, hint = case
    # Truthy values, so a key written only when truthy is written (a falsy one is absent).
    for value in ("abc", 2.5, 3, True, ["x"], {"k": 1}, (1,), object()):
        if any(type(value) is m or m is float and type(value) is int for m in _members(hint)):
            continue
        if cls is ModuleShardingSpec:
            plan = ShardingPlan(modules={"m": ModuleShardingSpec(**{row.name: value})})
        else:
            plan = ShardingPlan(**{row.name: value})
        with pytest.raises(FreezeError) as caught:
            freeze_plan(plan)
        assert caught.value.path.endswith(row.name), (row.name, value, caught.value.path)


# ------------------------------------------------------------ generate's third law


def _verdict(annotation: Any, freeze: str, rebuild: str) -> str:
    """generate's refusal of a spec table of one row, ``recompute: <annotation> = None``
    with these kinds, or ""."""
    from generator import pipeline
    from generator.config import load_config
    from generator.errors import GeneratorError
    from generator.table import load_tables, validate
    from shardplan.table.rows import SpecField
    from tests.helpers import REPO

    config = load_config(REPO)
    _, facts, form, _ = pipeline._environment(config, ())  # no table validated
    loaded = next(t for t in load_tables(config) if t.config.name == "spec")
    probe = dataclasses.make_dataclass(
        "Probe", [("recompute", annotation, dataclasses.field(default=None))]
    )
    row = SpecField("recompute", "recompute", GROUP_PARAM_PLAN, freeze, rebuild, doc="R.")
    trial = dataclasses.replace(
        loaded,
        rows=(row,),
        fields={"recompute": dataclasses.fields(probe)[0]},
        cls=probe,
    )
    try:
        validate(trial, facts, form)
    except GeneratorError as exc:
        return str(exc)
    return ""


def test_generate_refuses_kinds_that_disagree_with_the_annotation_naming_those_that_fit() -> None:
    from tests.additions import DISAGREEING, offered_pairs

    annotation, freeze, rebuild = DISAGREEING
    refusal = _verdict(bool | None, freeze, rebuild)
    assert refusal.startswith(
        "table row 1 (recompute): the field is annotated bool | None, and rebuild "
        "'opt_scalar' gives str | int | float | bool: str, int and float are no instances "
        "of it.\n  Kind names that fit: "
    ), refusal
    offered = offered_pairs(annotation, freeze, rebuild)
    assert offered and all(f"{f!r} with {r!r}" in refusal for f, r in offered)
    # Each pair offered fits (the weekly flow generates them and runs mypy --strict).
    assert all(not _verdict(bool | None, *pair) for pair in offered)
    # The kinds of every type: a typed field takes its own kind names, no other's.
    for kind, hint in (("int", int), ("float", float), ("str", str), ("flag", bool)):
        assert not _verdict(hint | None, kind, kind), kind
        others = [k for k in ("int", "float", "str", "flag") if k != kind]
        assert all(_verdict(hint | None, other, other) for other in others), kind


# ------------------------------------------------------------ what is no artifact


def test_a_json_object_without_param_plan_is_no_artifact_anywhere(tmp_path: Path) -> None:
    from shardplan import cli

    other = tmp_path / "package.json"
    other.write_text('{"name": "x", "version": "1"}\n')
    for found in _both(tmp_path, {"name": "x"}):
        assert isinstance(found, MetaError)
        assert str(found) == "not a codegen_meta artifact: no param_plan"
    artifact = tmp_path / "codegen_meta.json"
    artifact.write_text(json.dumps({"param_plan": {}}))
    assert cli.main(["show", str(other)]) == 2
    assert cli.main(["diff", str(other), str(other)]) == 2  # never "same plan"
    assert cli.main(["diff", str(artifact), str(other)]) == 2


def test_show_never_writes_its_page_over_the_artifact_or_another_one(tmp_path: Path) -> None:
    from shardplan import cli

    artifact, other, page = (tmp_path / n for n in ("a.json", "b.json", "page.html"))
    artifact.write_text(json.dumps({"param_plan": {"m": {}}}))
    other.write_text(json.dumps({"param_plan": {}}, indent=2))
    before = {p: p.read_bytes() for p in (artifact, other)}
    assert cli.main(["show", str(artifact), "--html", str(artifact)]) == 2
    assert cli.main(["show", str(artifact), "--html", str(other)]) == 2
    assert {p: p.read_bytes() for p in (artifact, other)} == before
    assert cli.main(["show", str(artifact), "--html", str(page)]) == 0
    assert cli.main(["show", str(artifact), "--html", str(page)]) == 0  # a page it wrote
