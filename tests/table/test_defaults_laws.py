"""The defaults laws (docs/contract.md §6): (a) an artifact without a row's key rebuilds the
field's default; (b) every value freeze leaves unwritten rebuilds as itself (a
truthy-written key's falsy values as its falsy default).

For every pair of kind names a row may use, and every default the freeze kind's pool of
live values holds (tests/strategies.py, POOLS: what the field's type allows, None
included), generate's verdict on a row of that pair and default must be what freezing and
rebuilding the row's values really gives. Kind names, pools and records are read from the
modules as they are, so a kind added as README says is covered with no edit here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from generator import pipeline
from generator.config import load_config
from generator.errors import GeneratorError
from generator.table import LoadedTable, load_tables, validate
from shardplan import reference
from shardplan.convert.trust import admission
from shardplan.errors import FreezeError, MetaError
from shardplan.table.kinds import KIND_NAMES, default_literal, resolve
from shardplan.table.spec_fields import GROUP_PARAM_PLAN, SpecField
from tests.additions import NewField
from tests.helpers import REPO, copy_repo, run_python_here, run_specgen_here
from tests.strategies import pool_of

CONFIG = load_config(REPO)
NAME = "probe"  # the trial row's field: a name no table has
DRAWS = 24  # live values drawn from each freeze kind's pool


@functools.cache
def _kinds_and_format() -> tuple[Any, Any]:
    _, facts, form, _ = pipeline._environment(CONFIG, ())  # no table validated
    return facts, form


@functools.cache
def _spec_table() -> LoadedTable:
    return next(table for table in load_tables(CONFIG) if table.config.name == "spec")


def _names(step: str) -> list[str]:
    """The kind names a crossing row may use for ``step`` (derived records aside)."""
    derived = {"sharded_params"}  # computed from the entries, named by no field's row
    return [
        name
        for name, kind in KIND_NAMES.items()
        if (meaning := getattr(kind, step)) is not None and meaning.record not in derived
    ]


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _domain(freeze: str) -> list[Any]:
    """None and the distinct live values the freeze kind's pool gives (seeded)."""
    pool = pool_of(SpecField(NAME, NAME, GROUP_PARAM_PLAN, freeze, "opt_scalar"))
    rng = random.Random(freeze)
    found: dict[str, Any] = {"None": None}
    for _ in range(DRAWS):
        value = pool(rng)
        found.setdefault(f"{type(value).__name__}:{value!r}", value)
    return list(found.values())


def _field_with_default(value: Any) -> dataclasses.Field[Any] | None:
    """A dataclass field whose default is ``value``, where a Python literal states it."""
    if isinstance(value, (list, dict)):
        if value:
            return None
        spec: Any = dataclasses.field(default_factory=type(value))
    else:
        spec = dataclasses.field(default=value)
    probe = dataclasses.make_dataclass("Probe", [(NAME, Any, spec)])
    found = dataclasses.fields(probe)[0]
    return found if default_literal(found) is not None else None


def _verdict(row: SpecField, field: dataclasses.Field[Any]) -> str:
    """generate's refusal of a spec table of ``row`` alone, for ``field``, or ""."""
    facts, form = _kinds_and_format()
    loaded = _spec_table()
    # The probe row alone, of a class holding the probe field alone (annotated Any: the
    # type law is tests/table/test_typed_values.py's): the verdict is the row's, and cheap.
    trial = dataclasses.replace(
        loaded, rows=(row,), fields={NAME: field}, cls=None
    )
    try:
        validate(trial, facts, form)
    except GeneratorError as exc:
        return str(exc)
    return ""


def _default_of(field: dataclasses.Field[Any]) -> Any:
    return field.default_factory() if callable(field.default_factory) else field.default


def _observed(row: SpecField, field: dataclasses.Field[Any], values: list[Any]) -> list[str]:
    """The laws the row breaks as freezing and rebuilding its values shows (the table-driven
    reference: the generated code gives the same, tests/generated/test_laws.py)."""
    crossing = resolve(row, field)
    default = _default_of(field)
    reference.SPEC_CROSSINGS[NAME] = crossing
    try:
        broken = []
        absent = reference._rebuild_fields({}, (row,), "m", True, admission(()))[NAME]
        if not _same(absent, default):
            broken.append(f"(a): an absent key gave {absent!r}")
        if default is not None and crossing.writes(default):  # (c): written, back as itself
            try:
                frozen = reference._freeze_fields(SimpleNamespace(**{NAME: default}), (row,), "m")
                back = reference._rebuild_fields(frozen, (row,), "m", True, admission(()))[NAME]
            except (FreezeError, MetaError) as exc:
                back = exc
            if not _same(back, default):
                broken.append(f"(c): the default was written and came back {back!r}")
        for value in values:
            try:
                frozen = reference._freeze_fields(SimpleNamespace(**{NAME: value}), (row,), "m")
            except FreezeError:
                continue  # refused, loudly: not left unwritten
            if row.key in frozen:
                continue
            back = reference._rebuild_fields(frozen, (row,), "m", True, admission(()))[NAME]
            normalised = crossing.written == "truthy" and not value and not back
            if not (_same(back, value) or normalised):
                broken.append(f"(b): {value!r} was not written and came back {back!r}")
        return broken
    finally:
        del reference.SPEC_CROSSINGS[NAME]


def _fits(message: str) -> list[tuple[str, str]]:
    """The (freeze, rebuild) kind names a refusal offers."""
    offered = message.partition("Kind names that keep it")[2]
    return re.findall(r"'(\w+)' with '(\w+)'", offered)


def test_generate_refuses_exactly_the_rows_whose_values_or_default_do_not_come_back() -> None:
    number = 1
    tried = kept = refused = 0
    mismatches = []
    for freeze in _names("freeze"):
        values = _domain(freeze)
        defaults = [f for f in map(_field_with_default, values) if f is not None]
        for rebuild in _names("rebuild"):
            for field in defaults:
                row = SpecField(NAME, NAME, GROUP_PARAM_PLAN, freeze, rebuild, doc="A probe.")
                verdict = _verdict(row, field)
                seen = _observed(row, field, values)
                tried += 1
                if bool(verdict) != bool(seen):
                    mismatches.append((freeze, rebuild, _default_of(field), verdict, seen))
                    continue
                if not verdict:
                    kept += 1
                    continue
                refused += 1
                # One message: the row, the default, what comes back instead, what fits.
                assert verdict.startswith(
                    f"table row {number} ({NAME}): the field's default "
                    f"{_default_of(field)!r} does not come back"
                ), verdict
                assert "\n" not in verdict.partition("\n  ")[2], verdict
                assert " instead." in verdict, verdict
                assert "Kind names that keep it" in verdict or "No kind name of" in verdict
                for fit in _fits(verdict):  # every pair offered keeps both laws
                    fitted = dataclasses.replace(row, freeze=fit[0], rebuild=fit[1])
                    assert not _verdict(fitted, field), (fit, _verdict(fitted, field))
                    assert not _observed(fitted, field, values), fit
    assert not mismatches, mismatches[:5]
    # The class is covered: both verdicts, across every pair.
    pairs = len(_names("freeze")) * len(_names("rebuild"))
    assert kept and refused and tried >= 2 * pairs, (tried, kept, refused)


def test_a_default_other_than_none_fits_where_a_kind_writes_when_not_the_default() -> None:
    """scalar_unless_default/scalar_or_default keep a default of 4 and a None beside it."""
    field = _field_with_default(4)
    assert field is not None
    row = SpecField(
        NAME, NAME, GROUP_PARAM_PLAN, "scalar_unless_default", "scalar_or_default", doc="A."
    )
    assert _verdict(row, field) == ""
    assert _observed(row, field, [None, 4, 0, 7, True, 4.0]) == []


def test_a_field_without_a_default_is_told_which_value_does_not_come_back() -> None:
    """Law (b) alone, on a field with no default: the refusal names no default (never
    dataclasses.MISSING's repr), only the value freeze leaves unwritten."""
    field = dataclasses.fields(dataclasses.make_dataclass("Probe", [(NAME, Any)]))[0]
    row = SpecField(NAME, NAME, GROUP_PARAM_PLAN, "int_truthy", "bool_default_true", doc="A.")
    verdict = _verdict(row, field)
    assert verdict.startswith(f"table row 1 ({NAME}): a value does not come back"), verdict
    assert "rebuilds as True instead" in verdict and "MISSING" not in verdict, verdict


# ------------------------------------------------------- issue 42's example, end to end

MICRO_BATCHES = NewField(
    "ModuleShardingSpec",
    "micro_batches",
    "int | None = 4",
    'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "FREEZE", "REBUILD", '
    'doc="Micro-batches the module splits its input into.")',
    lambda rows: next(row for row in rows if row.name == "region_dispatch"),
)

ROUND_TRIP = """
import json, sys
from shardplan import freeze_plan, rebuild_plan, reference
from shardplan.artifact.meta import meta_from_dict
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
name = sys.argv[1]
seen = {}
for impl, freeze, rebuild in (
    ("generated", freeze_plan, rebuild_plan),
    ("reference", reference.freeze_plan, reference.rebuild_plan),
):
    plan = ShardingPlan(modules={
        "none": ModuleShardingSpec(**{name: None}),
        "default": ModuleShardingSpec(),
        "seven": ModuleShardingSpec(**{name: 7}),
    })
    meta = freeze(plan)
    back = rebuild(meta)
    old = rebuild(meta_from_dict({"param_plan": {"m": {}}}))
    try:
        rebuild(meta_from_dict({"param_plan": {"m": {name: 4}}}))
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    seen[impl] = {
        "entries": meta.param_plan,
        "back": {fqn: getattr(spec, name) for fqn, spec in back.modules.items()},
        "old": getattr(old.modules["m"], name),
        "refused": refused,
    }
print(json.dumps(seen))
"""


def _added(root: Path, freeze: str, rebuild: str) -> str:
    row = MICRO_BATCHES.row.replace("FREEZE", freeze).replace("REBUILD", rebuild)
    return dataclasses.replace(MICRO_BATCHES, row=row).add(root)


def test_issue_example_with_opt_scalar_exits_2_naming_the_row_default_value_and_fits(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / "repo")
    name = _added(root, "scalar", "opt_scalar")
    result = run_specgen_here(root, "generate")
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr  # one message, its fix on the second line
    assert re.match(
        rf"specgen: table row \d+ \({name}\): the field's default 4 does not come back "
        r"\(freeze 'scalar', written when not None; rebuild 'opt_scalar'\): an artifact "
        r"without the key rebuilds None instead\.$",
        lines[0],
    ), lines[0]
    assert (
        # The annotation (int | None) decides: the kinds of its type, not scalar's.
        lines[1] == "  Kind names that keep it: 'int' with 'int'."
    )


def test_issue_example_with_the_kinds_offered_rebuilds_4_from_old_artifacts_and_none_as_none(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / "repo")
    name = _added(root, "int", "int")
    result = run_specgen_here(root, "generate")
    assert result.returncode == 0, result.stderr
    ran = run_python_here(root, "-c", ROUND_TRIP, name)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["generated"] == seen["reference"]
    found = seen["generated"]
    assert found["old"] == 4  # an artifact written before the field
    assert found["back"] == {"none": None, "default": 4, "seven": 7}
    assert [entry.get(name, "absent") for entry in found["entries"].values()] == [
        None,  # written as null
        "absent",  # the default, left out
        7,
    ]
    assert "is the default, which is never written" in found["refused"]


@pytest.mark.parametrize("strict", [True, False])
def test_a_null_is_refused_where_freeze_never_writes_one_and_read_where_it_does(
    strict: bool,
) -> None:
    """Today's rows write no null in an entry: strict refuses one, lenient reads absent."""
    from shardplan.artifact.meta import meta_from_dict

    meta = meta_from_dict({"param_plan": {"m": {"region_dispatch": None}}})
    if strict:
        with pytest.raises(MetaError, match="is never written here"):
            reference.rebuild_plan(meta)
    else:
        assert reference.rebuild_plan(meta, strict=False).modules["m"].region_dispatch is None
