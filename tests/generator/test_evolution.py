"""Safe evolution of the field table (issue 13): aliases and retired keys keep old
artifacts loading, and `specgen generate` classifies every table edit against the lock
of the table as last generated, refusing a breaking one unless it is deliberate.

The end-to-end cases edit a copy of the repository, as a developer would edit theirs, and
run the generator and the copy's code in this process (tests.helpers.run_specgen_here,
run_python_here): no case needs a real process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.evolution import Changes, classify, lock_of
from generator.table import Table, Tables
from shardplan.table.format import GROUP_ROLES, TABLE_GROUPS
from shardplan.table.kinds import KINDS, Crossing, Written, parse_literal
from shardplan.table.rows import RetiredKey as Retired, SpecField as Row
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.helpers import (
    remove_region_dispatch,
    replace_once,
    run_python_here,
    run_specgen_here,
    snapshot,
)
from tests.older_artifacts import frozen_again

TABLE = "shardplan/table/spec_fields.py"
SPEC = "shardplan/table/spec.py"
OUT_NAMES_ROW = 'SpecField("out_names", "out_names", GROUP_PARAM_PLAN, "name_list", "name_list",'
NO_RETIRED = "RETIRED_KEYS: tuple[RetiredKey, ...] = ()"


edit = replace_once


def rebuild_and_refreeze(root: Path, entry: dict[str, object]) -> dict[str, object]:
    """In the copy: strictly rebuild an artifact holding ``entry``, freeze it again, and
    return the refrozen entry."""
    document = json.dumps({"param_plan": {"m": entry}})
    script = (
        "import json, shardplan\n"
        "from shardplan.artifact.meta import meta_from_json\n"
        f"plan = shardplan.rebuild_plan(meta_from_json({document!r}), strict=True)\n"
        "print(json.dumps(shardplan.freeze_plan(plan).param_plan['m']))\n"
    )
    result = run_python_here(root, "-c", script)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def lock(root: Path) -> dict[str, object]:
    return json.loads((root / "generated" / "table.lock.json").read_text())


# ------------------------------------------------------------------ end to end


def test_renaming_a_key_with_an_alias_keeps_old_artifacts_rebuilding_strictly(
    repo_copy: Path,
) -> None:
    edit(
        repo_copy,
        TABLE,
        OUT_NAMES_ROW,
        OUT_NAMES_ROW.replace('"out_names", GROUP', '"output_names", GROUP').replace(
            '"name_list", "name_list",', '"name_list", "name_list", aliases=("out_names",),'
        ),
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    assert "key 'out_names' renamed to 'output_names'" in result.stdout
    refrozen = rebuild_and_refreeze(repo_copy, {"is_boundary": True, "out_names": ["y", "z"]})
    assert refrozen["output_names"] == ["y", "z"] and "out_names" not in refrozen
    assert run_specgen_here(repo_copy, "check").returncode == 0
    fields = (repo_copy / "generated" / "fields.md").read_text()
    assert "| `out_names` | `output_names` | param_plan |" in fields


def test_an_alias_and_its_key_together_are_refused_naming_the_alias(repo_copy: Path) -> None:
    edit(
        repo_copy,
        TABLE,
        OUT_NAMES_ROW,
        OUT_NAMES_ROW.replace(
            '"name_list", "name_list",', '"name_list", "name_list", aliases=("names",),'
        ),
    )
    assert run_specgen_here(repo_copy, "generate").returncode == 0
    script = (
        "import shardplan\nfrom shardplan.artifact.meta import meta_from_json\n"
        'meta = meta_from_json(\'{"param_plan": {"m": {"out_names": ["a"], "names": ["b"]}}}\')\n'
        "try:\n    shardplan.rebuild_plan(meta)\nexcept ValueError as exc:\n    print(exc.path)\n"
    )
    result = run_python_here(repo_copy, "-c", script)
    assert result.stdout.strip() == 'param_plan["m"].names', result.stderr


def test_retiring_a_key_keeps_artifacts_holding_it_rebuilding(repo_copy: Path) -> None:
    remove_region_dispatch(repo_copy)
    edit(
        repo_copy,
        TABLE,
        NO_RETIRED,
        "RETIRED_KEYS: tuple[RetiredKey, ...] = (\n"
        '    RetiredKey("region_dispatch", GROUP_PARAM_PLAN, "dispatch moved to the runtime"),\n'
        ")",
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    assert (
        "changes the bytes freeze writes: spec table: key 'region_dispatch' retired "
        "(param_plan): rebuild accepts and drops it, so freeze drops region_dispatch from "
        "artifacts that hold it" in result.stdout
    )
    refrozen = rebuild_and_refreeze(repo_copy, {"is_boundary": True, "region_dispatch": True})
    assert refrozen == frozen_again({"param_plan": {"m": {"is_boundary": True}}})["param_plan"]["m"]
    assert (
        "Retired, read and dropped: dispatch moved to the runtime"
        in (repo_copy / "generated" / "codegen_meta.schema.json").read_text()
    )


PLAN_TABLE = "shardplan/table/plan_fields.py"
NO_PLAN_RETIRED = "PLAN_RETIRED_KEYS: tuple[RetiredKey, ...] = ()"


def retire_plan_keys(root: Path, *keys: str) -> None:
    retired = "".join(f'    RetiredKey("{key}", GROUP_PLAN, "no reader left"),\n' for key in keys)
    edit(
        root,
        PLAN_TABLE,
        NO_PLAN_RETIRED,
        f"PLAN_RETIRED_KEYS: tuple[RetiredKey, ...] = (\n{retired})",
    )


def test_retiring_plan_level_keys_is_listed_and_freeze_drops_them(repo_copy: Path) -> None:
    """A plan-level key no row owns rides along in other_keys; retired, rebuild drops it,
    so freeze drops it from every artifact that holds it. Once generate said nothing."""
    retire_plan_keys(repo_copy, "codegen_version", "parallel_dims.old_flag")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    for key in ("codegen_version", "parallel_dims.old_flag"):
        assert (
            f"changes the bytes freeze writes: plan table: key {key!r} retired (plan): rebuild "
            f"accepts and drops it, so freeze drops {key} from artifacts that hold it"
        ) in result.stdout
    document = json.dumps(
        {
            "param_plan": {},
            "codegen_version": 3,
            "producer": "kept",
            "parallel_dims": {"old_flag": True, "loss_parallel": True, "mine": 1},
        }
    )
    script = (
        "import json, shardplan\n"
        "from shardplan.artifact.meta import meta_from_json\n"
        f"plan = shardplan.rebuild_plan(meta_from_json({document!r}), strict=True)\n"
        "from shardplan.artifact.meta import meta_to_json\n"
        "print(meta_to_json(shardplan.freeze_plan(plan)))\n"
    )
    ran = run_python_here(repo_copy, "-c", script)
    assert ran.returncode == 0, ran.stderr
    refrozen = json.loads(ran.stdout)
    assert "codegen_version" not in refrozen and refrozen["producer"] == "kept"
    kept = {"sequence_parallel": True, "loss_parallel": True, "mine": 1}
    assert refrozen["parallel_dims"] == frozen_again({"parallel_dims": kept})["parallel_dims"]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "source.file_path",
            "PLAN_RETIRED_KEYS[0] (source.file_path): no row's key nests in 'source', so the "
            "retirement would drop nothing",
        ),
        (
            "parallel_dims",
            "PLAN_RETIRED_KEYS[0] (parallel_dims): rows nest their keys in 'parallel_dims', "
            "which freeze still writes",
        ),
    ],
    ids=["in-an-object-no-row-nests-in", "an-object-rows-nest-in"],
)
def test_a_retirement_that_would_drop_nothing_or_a_live_object_exits_2_naming_it(
    repo_copy: Path, key: str, message: str
) -> None:
    """source.file_path: no row nests a key in 'source', which freeze carries whole, so
    the retirement would drop nothing (once accepted silently); parallel_dims: the object
    rows still write their keys in."""
    retire_plan_keys(repo_copy, key)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_removing_a_row_without_retiring_its_key_exits_2_naming_it(repo_copy: Path) -> None:
    remove_region_dispatch(repo_copy)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2
    assert "key 'region_dispatch' (region_dispatch) removed without retiring it" in result.stderr
    assert "aliases=" in result.stderr and "RetiredKey(" in result.stderr
    assert "--allow-breaking" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_adding_a_row_is_compatible_and_exits_0(repo_copy: Path) -> None:
    from tests.helpers import add_field

    add_field(
        repo_copy,
        "grad_scale",
        'SpecField("grad_scale", "grad_scale", GROUP_PARAM_PLAN, "scalar", "opt_scalar")',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    assert (
        "compatible: spec table: row added: grad_scale (key 'grad_scale', param_plan)"
        in result.stdout
    )
    schema = json.loads((repo_copy / "generated" / "codegen_meta.schema.json").read_text())
    assert "grad_scale" in schema["$defs"]["entry"]["properties"]
    assert "| `grad_scale` |" in (repo_copy / "generated" / "fields.md").read_text()


def test_allow_breaking_records_the_break_and_the_next_check_passes(repo_copy: Path) -> None:
    before = lock(repo_copy)["breaks"]
    remove_region_dispatch(repo_copy)
    result = run_specgen_here(repo_copy, "generate", "--allow-breaking")
    assert result.returncode == 0, result.stderr
    breaks = lock(repo_copy)["breaks"]
    assert isinstance(breaks, list) and breaks[: len(before)] == before  # kept, and one more
    assert len(breaks) == len(before) + 1 and "region_dispatch" in breaks[-1]["change"]
    check = run_specgen_here(repo_copy, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    # Recorded once: regenerating keeps the record and adds nothing.
    assert run_specgen_here(repo_copy, "generate").returncode == 0
    assert lock(repo_copy)["breaks"] == breaks


def test_allow_breaking_means_nothing_to_check(repo_copy: Path) -> None:
    result = run_specgen_here(repo_copy, "check", "--allow-breaking")
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["fields.md", "codegen_meta.schema.json", "table.lock.json"])
def test_check_fails_when_the_reference_schema_or_lock_is_stale(repo_copy: Path, name: str) -> None:
    path = repo_copy / "generated" / name
    path.write_text(path.read_text().replace("param_plan", "param-plan", 1))
    result = run_specgen_here(repo_copy, "check")
    assert result.returncode == 1
    assert f"generated/{name} is stale" in result.stderr


def test_a_table_edit_not_regenerated_leaves_schema_and_reference_stale(repo_copy: Path) -> None:
    edit(
        repo_copy,
        TABLE,
        'doc="The declared order of the module\'s outputs."',
        'doc="Output order."',
    )
    result = run_specgen_here(repo_copy, "check")
    assert result.returncode == 1
    for name in ("fields.md", "codegen_meta.schema.json"):
        assert f"generated/{name} is stale" in result.stderr


# ------------------------------------------------------------------ the classification


def row(number: int, key: str, **changes: object) -> Row:
    fields: dict[str, object] = {
        "name": key,
        "key": key,
        "group": "param_plan",
        "freeze": "scalar",
        "rebuild": "opt_scalar",
        "post_init": False,
        "doc": "d",
        "aliases": (),
        **changes,
    }
    return Row(**fields)  # type: ignore[arg-type]


def table(*rows: Row, retired: tuple[Retired, ...] = ()) -> Tables:
    """A spec table of these rows, as the generator holds it once validated."""
    spec = Table(
        name="spec",
        rows=rows,
        retired=retired,
        roles={group: GROUP_ROLES[group] for group in TABLE_GROUPS["spec"]},
        top_level_groups=(),
        module="t",
        source_file="t.py",
        digest="d" * 64,
        cls="t:T",
        crossings={
            r.name: Crossing(
                freeze=r.freeze,
                rebuild=r.rebuild,
                written=Written(r.written or "not None"),
                absent_parsed=parse_literal(r.absent or "None")[0],
                annotation="str | None",
                freeze_record=KINDS["scalar"],
                rebuild_record=KINDS["scalar"],
                # What the lock does not read:
                reads_back=True,
                null_is_none=False,
                writes_null=False,
                refuses_none=False,
            )
            for r in rows
        },
        init_fields=tuple(r.name for r in rows),
    )
    return Tables((spec,))


BASE = table(row(1, "a"), row(2, "b"))


@pytest.mark.parametrize(
    ("after", "kind", "fragment"),
    [
        (table(row(1, "a"), row(2, "b"), row(3, "c")), "compatible", "row added: c"),
        (
            table(row(1, "a"), row(2, "b"), row(3, "c", written="always")),
            "bytes",
            "row added: c (key 'c', param_plan), written even at its absent value None: "
            "older artifacts frozen again gain the key",
        ),
        (
            table(row(1, "a"), row(2, "b"), row(3, "c", absent="0")),
            "bytes",
            "row added: c (key 'c', param_plan), written even at its absent value 0",
        ),
        (table(row(1, "a", aliases=("old_a",)), row(2, "b")), "compatible", "alias 'old_a' added"),
        (table(row(1, "a", name="alpha"), row(2, "b")), "compatible", "spec attribute a -> alpha"),
        (table(row(1, "b"), row(2, "a")), "bytes", "param_plan rows reordered: b, a"),
        (table(row(1, "a", freeze="plain"), row(2, "b")), "bytes", "freeze kind scalar -> plain"),
        (table(row(1, "a2", name="a", aliases=("a",)), row(2, "b")), "bytes", "renamed to 'a2'"),
        (
            table(row(1, "a"), retired=(Retired("b", "param_plan", "gone"),)),
            "bytes",
            "key 'b' retired",
        ),
        (table(row(1, "a")), "breaking", "key 'b' (b) removed without retiring it"),
        (
            table(row(1, "a2", name="a"), row(2, "b")),
            "breaking",
            "renamed to 'a2' without an alias",
        ),
        (table(row(1, "a", rebuild="bool_default_true"), row(2, "b")), "breaking", "rebuild kind"),
        (table(row(1, "a", group="injections"), row(2, "b")), "breaking", "moved from param_plan"),
    ],
)
def test_each_table_edit_is_classified(after: Tables, kind: str, fragment: str) -> None:
    changes = classify(lock_of(BASE, []), after)
    found = {"compatible": changes.compatible, "bytes": changes.bytes, "breaking": changes.breaking}
    assert any(fragment in item for item in found[kind]), changes
    # Listed once, under its own effect.
    assert [item for items in found.values() for item in items if fragment in item] == [
        next(item for item in found[kind] if fragment in item)
    ]
    if kind != "breaking":
        assert changes.breaking == []


def test_dropping_an_alias_or_a_retired_key_is_breaking() -> None:
    before = table(row(1, "a", aliases=("old",)), retired=(Retired("gone", "param_plan", "r"),))
    changes = classify(lock_of(before, []), table(row(1, "a")))
    assert any("alias 'old'" in item for item in changes.breaking)
    assert any("retired key 'gone' dropped" in item for item in changes.breaking)


def test_an_unchanged_table_has_no_changes() -> None:
    assert classify(lock_of(BASE, []), BASE) == Changes()


# ------------------------------------------------------------------ bad declarations

# Row numbers as generate names them, from the table (a user's rows may come before these).
ROW = {row.name: number for number, row in enumerate(SPEC_FIELDS, start=1)}
IN_DST_ROW = (
    'SpecField("in_dst", "in_dst", GROUP_PARAM_PLAN, "named_placements", "named_placements",'
)


@pytest.mark.parametrize(
    ("relative", "old", "new", "message"),
    [
        (
            TABLE,
            IN_DST_ROW,
            IN_DST_ROW.replace(
                '"named_placements", "named_placements",',
                '"named_placements", "named_placements", aliases=("in_src",),',
            ),
            f"alias: key 'in_src' is already used by table row {ROW['in_src']} (in_src)",
        ),
        (
            TABLE,
            NO_RETIRED,
            'RETIRED_KEYS: tuple[RetiredKey, ...] = (RetiredKey("params", "param_plan", "r"),)',
            f"RETIRED_KEYS[0] (params): key 'params' is already used by table row {ROW['params']} (params)",
        ),
        (
            TABLE,
            NO_RETIRED,
            'RETIRED_KEYS: tuple[RetiredKey, ...] = (RetiredKey("old", "exempt", "r"),)',
            "RETIRED_KEYS[0] (old): group must be one of 'param_plan', 'injections'",
        ),
        (
            TABLE,
            NO_RETIRED,
            'RETIRED_KEYS: tuple[RetiredKey, ...] = (RetiredKey("match", "injections", "r"),)',
            "key 'match' is reserved by the artifact format in injections",
        ),
        (
            TABLE,
            'doc="Input name -> the placement the module computes on."',
            'doc=""',
            f"table row {ROW['in_dst']} (in_dst): a row that crosses the artifact needs a one-line doc",
        ),
        (
            "shardplan/table/kinds.py",
            '        schema={"type": ["integer", "boolean"]},\n',
            "",
            "missing 1 required keyword-only argument: 'schema'",
        ),
    ],
    ids=["alias_clash", "retired_clash", "retired_group", "retired_reserved", "no_doc", "fragment"],
)
def test_a_bad_alias_retirement_doc_or_fragment_exits_2_naming_it(
    repo_copy: Path, relative: str, old: str, new: str, message: str
) -> None:
    edit(repo_copy, relative, old, new)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before
