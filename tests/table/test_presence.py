"""Presence and nesting on the row (issue 23, docs/contract.md §2b): a plan-level key the
document does not hold is told apart from one holding a value or null, so loading then
dumping never invents a key, and a row added after an artifact was written reads it as
absent; a nested key's aliases live in its object; keys that collide with the format's
containers exit 2 naming the row.

Each case edits a throwaway copy of the repository as a developer would, runs the
generator there, and runs the copy's own code in this process (tests.helpers).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shardplan.artifact.meta import dump_meta, load_meta, meta_from_json, meta_to_bytes
from shardplan.artifact.shapes import UNSET
from shardplan.errors import MetaError
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.additions import fresh_name
from tests.helpers import (
    REPO,
    insert_text,
    replace_once,
    run_python_here,
    run_specgen_here,
    shared_fixture,
)

FIXTURE = "qwen3_moe_codegen_meta.json"
TRUSTED = ("hyper_parallel.*",)  # the subtree the shared fixture's Targets name
SPEC = "shardplan/table/spec.py"
PLAN_TABLE = "shardplan/table/plan_fields.py"
LAST_PLAN_SETTING = "    loss_parallel: bool = False\n"
LOSS_PARALLEL_ROW = (
    '              doc="Whether the loss is computed on vocabulary-sharded logits."),\n'
)

# In the copy: each artifact loaded, rebuilt strictly, the new field's value, and whether
# dumping what was loaded gives the file's bytes back (no key invented) and a document the
# copy's own schema accepts.
READ_OLD = """
import json, sys
import jsonschema
import shardplan
from shardplan.artifact.meta import load_meta, meta_to_bytes
name, schema_path, *paths = sys.argv[1:]
schema = json.load(open(schema_path))
seen = {}
for path in paths:
    meta = load_meta(path)
    plan = shardplan.rebuild_plan(meta, allow_targets=("hyper_parallel.*",))
    written = meta_to_bytes(meta)
    again = meta_to_bytes(shardplan.freeze_plan(plan))
    jsonschema.validate(json.loads(again), schema)
    seen[path] = {
        "value": getattr(plan, name),
        "same": written.rstrip(b"\\n") == open(path, "rb").read().rstrip(b"\\n"),
        "keys": sorted(json.loads(written)),
    }
print(json.dumps(seen))
"""


def _old_artifact(tmp_path: Path) -> Path:
    """An artifact written by today's code, before the copy's table edit."""
    path = tmp_path / "old_codegen_meta.json"
    plan = ShardingPlan(modules={"m": ModuleShardingSpec(params={})}, loss_parallel=True)
    import shardplan

    dump_meta(shardplan.freeze_plan(plan), path)
    return path


def _read_in_copy(root: Path, name: str, *paths: Path) -> dict[str, dict[str, object]]:
    schema = root / "generated" / "codegen_meta.schema.json"
    ran = run_python_here(root, "-c", READ_OLD, name, str(schema), *map(str, paths))
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)  # type: ignore[no-any-return]


def _add_plan_field(root: Path, field: str, row: str, effect: str = "compatible") -> None:
    insert_text(root / SPEC, LAST_PLAN_SETTING, field)
    insert_text(root / PLAN_TABLE, LOSS_PARALLEL_ROW, row)
    generate = run_specgen_here(root, "generate")
    assert generate.returncode == 0, generate.stderr
    assert f"{effect}: plan table: row added" in generate.stdout


def test_a_new_top_level_bool_reads_old_artifacts_as_absent_strictly(
    repo_copy: Path, tmp_path: Path
) -> None:
    old = _old_artifact(tmp_path)
    fixture = shared_fixture(FIXTURE)
    _add_plan_field(
        repo_copy,
        "    flag: bool = False\n",
        '    SpecField("flag", "flag", GROUP_PLAN, "bool", "bool_default_false",\n'
        '              doc="A flag added after the artifacts were written."),\n',
        # Written always: older artifacts frozen again gain the key (load -> dump does not).
        effect="changes the bytes freeze writes",
    )
    seen = _read_in_copy(repo_copy, "flag", old, fixture)
    for path in (old, fixture):
        assert seen[str(path)]["value"] is False  # absent: the row's default, no error
        assert seen[str(path)]["same"] is True  # load -> dump wrote no "flag" key
        assert "flag" not in seen[str(path)]["keys"]


def test_readme_plan_level_example_keeps_other_producers_files_byte_identical(
    repo_copy: Path, tmp_path: Path
) -> None:
    """README "Adding a plan-level field", literally: pipeline_stages: int = 1, written when
    not the default (int/int)."""
    fixture = shared_fixture(FIXTURE)
    # README's name, or the next free one where the table already has it.
    name = fresh_name(REPO, "ShardingPlan", "pipeline_stages")
    _add_plan_field(
        repo_copy,
        f"    {name}: int = 1\n",
        f'    SpecField("{name}", "{name}", GROUP_PLAN, "int", "int",\n'
        '              doc="How many pipeline stages the plan was made for."),\n',
    )
    seen = _read_in_copy(repo_copy, name, fixture, _old_artifact(tmp_path))
    for entry in seen.values():
        assert entry["same"] is True and name not in entry["keys"]
        assert entry["value"] == 1  # the field's default (law (a)), as fields.md states


def test_an_absent_key_rebuilds_to_the_fields_default_where_no_kind_name_says_one(
    repo_copy: Path, tmp_path: Path
) -> None:
    """scalar_or_default names no absent value: an old artifact without the key rebuilds to
    the dataclass field's default, 3, and the field reference says so."""
    _add_plan_field(
        repo_copy,
        "    warmup_steps: Scalar = 3\n",
        '    SpecField("warmup_steps", "warmup_steps", GROUP_PLAN, "scalar_unless_default",\n'
        '              "scalar_or_default", doc="Steps before sharding takes effect."),\n',
    )
    seen = _read_in_copy(repo_copy, "warmup_steps", _old_artifact(tmp_path))
    (entry,) = seen.values()
    assert entry["value"] == 3 and entry["same"] is True
    fields_md = (repo_copy / "generated" / "fields.md").read_text()
    assert (
        "| `warmup_steps` | plan | string, number or boolean | not default | `3` | `warmup_steps` |"
        in fields_md
    )


def test_a_truthy_default_is_refused_for_the_falsy_values_it_would_become(
    repo_copy: Path,
) -> None:
    """int_truthy with a default of 3: 0 is never written, so it would come back as 3 (law
    (b)); generate says so, naming the row, the default, the value and the names that fit."""
    insert_text(repo_copy / SPEC, LAST_PLAN_SETTING, "    warmup_steps: int = 3\n")
    insert_text(
        repo_copy / PLAN_TABLE,
        LOSS_PARALLEL_ROW,
        '    SpecField("warmup_steps", "warmup_steps", GROUP_PLAN, "int_truthy", "int_truthy",\n'
        '              doc="Steps before sharding takes effect."),\n',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    row_number = [row.name for row in PLAN_FIELDS].index("loss_parallel") + 2  # after it
    assert (
        f"table 'plan' row {row_number} (warmup_steps): the field's default 3 does not come back"
        in result.stderr
    )
    assert "a falsy value is never written, so it rebuilds as 3 instead" in result.stderr
    # The records' own names keep no such default; the kinds of its type (int) do.
    assert "Kind names that keep it: 'int' with 'int'." in result.stderr


def test_a_field_whose_default_no_literal_states_cannot_cross(
    repo_copy: Path,
) -> None:
    insert_text(
        repo_copy / SPEC, LAST_PLAN_SETTING, "    hook: object = field(default_factory=object)\n"
    )
    row = '    SpecField("hook", "hook", GROUP_PLAN, "scalar", "int_truthy", doc="A hook."),\n'
    insert_text(repo_copy / PLAN_TABLE, LOSS_PARALLEL_ROW, row)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    row_number = [row.name for row in PLAN_FIELDS].index("loss_parallel") + 2  # after it
    assert (
        f"table 'plan' row {row_number} (hook): the field's default has no Python literal, so "
        "no absent key can rebuild it" in result.stderr
    )
    # absent= names what an absent key gives, but no artifact can give back object():
    # law (a) refuses it, naming the default.
    replace_once(repo_copy, PLAN_TABLE, 'doc="A hook."', 'doc="A hook.", absent="0"')
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    assert "the default has no Python literal, so no absent key can rebuild it" in result.stderr


def test_a_nested_key_renamed_with_an_alias_reads_the_old_value(repo_copy: Path) -> None:
    fixture = shared_fixture(FIXTURE)
    assert json.loads(fixture.read_text())["parallel_dims"]["loss_parallel"] is True
    replace_once(
        repo_copy,
        PLAN_TABLE,
        '"parallel_dims.loss_parallel", GROUP_PLAN,\n              "bool", "bool_default_false",',
        '"parallel_dims.loss_par", GROUP_PLAN,\n              "bool", "bool_default_false",'
        ' aliases=("parallel_dims.loss_parallel",),',
    )
    generate = run_specgen_here(repo_copy, "generate")
    assert generate.returncode == 0, generate.stderr
    code = """
import sys, shardplan, json
from shardplan.artifact.meta import load_meta
from shardplan import reference
meta = load_meta(sys.argv[1])
print(json.dumps([
    shardplan.rebuild_plan(meta, allow_targets=("hyper_parallel.*",)).loss_parallel,
    reference.rebuild_plan(meta, allow_targets=("hyper_parallel.*",)).loss_parallel,
]))
"""
    ran = run_python_here(repo_copy, "-c", code, str(fixture))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == [True, True]


@pytest.mark.parametrize(
    ("key", "aliases", "says"),
    [
        ("parallel_dims", "()", "is also the object row"),
        ("param_plan.x", "()", "nests in 'param_plan', which the artifact format reserves"),
        ("injections.x", "()", "nests in 'injections', which the artifact format reserves"),
        ("extra.x", "()", "nests in 'extra', which the artifact format reserves"),
        ("frozen_sharded_params.x", "()", "is also the object row"),
        ("x", '("parallel_dims.tp_size",)', "alias 'parallel_dims.tp_size' leaves the object"),
    ],
)
def test_keys_colliding_with_the_formats_containers_exit_2_naming_the_row(
    repo_copy: Path, key: str, aliases: str, says: str
) -> None:
    insert_text(repo_copy / SPEC, LAST_PLAN_SETTING, "    x: bool = False\n")
    insert_text(
        repo_copy / PLAN_TABLE,
        LOSS_PARALLEL_ROW,
        f'    SpecField("x", "{key}", GROUP_PLAN, "bool", "bool_default_false",\n'
        f'              doc="A colliding key.", aliases={aliases}),\n',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert says in result.stderr
    assert re.search(
        r"table 'plan' row \d+ \((x|parallel_dims|frozen_sharded_params)\)", result.stderr
    )
    assert "(x)" in result.stderr or f"nests {key!r}" in result.stderr


def _fields_md_absent() -> dict[str, str]:
    """Key -> the "when absent" column of generated/fields.md, for both tables."""
    text = (REPO / "generated" / "fields.md").read_text()
    found = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`"):
            found[cells[0].strip("`")] = cells[4].strip("`")
    return found


def _document_without(key: str) -> dict[str, object]:
    """A minimal document with one module, one rule, and every key but ``key``."""
    document: dict[str, object] = {
        "param_plan": {"m": {}},
        "injections": [],
        "special_handlers": {},
        "mesh_dim_names": ["tp"],
        "tied_pairs": [],
        "parallel_dims": {"sequence_parallel": True, "loss_parallel": False},
    }
    within, _, leaf = key.rpartition(".")
    if within:
        document[within] = {k: v for k, v in document[within].items() if k != leaf}  # type: ignore[attr-defined]
    document.pop(key, None)
    return document


@pytest.mark.parametrize("implementation", ["generated", "reference"])
def test_every_plan_row_absent_rebuilds_to_what_fields_md_states(implementation: str) -> None:
    import shardplan
    from shardplan import reference

    module = shardplan if implementation == "generated" else reference
    stated = _fields_md_absent()
    for row in PLAN_FIELDS:
        if row.group != "plan":
            continue
        meta = meta_from_json(json.dumps(_document_without(row.key)))
        if not row.within:
            assert getattr(meta, row.key) is UNSET
        plan = module.rebuild_plan(meta)
        assert repr(getattr(plan, row.name)) == stated[row.key], row.key


@pytest.mark.parametrize("implementation", ["generated", "reference"])
def test_every_spec_row_absent_rebuilds_to_what_fields_md_states(implementation: str) -> None:
    import shardplan
    from shardplan import reference

    module = shardplan if implementation == "generated" else reference
    stated = _fields_md_absent()
    meta = meta_from_json(json.dumps({"param_plan": {"m": {}}, "injections": []}))
    spec = module.rebuild_plan(meta).modules["m"]
    for row in SPEC_FIELDS:
        if row.key:
            assert repr(getattr(spec, row.name)) == stated[row.key], row.key


@pytest.mark.parametrize("key", ["special_handlers", "tied_pairs", "mesh_dim_names"])
def test_plan_level_nulls_load_lenient_reads_them_as_absent_strict_refuses(key: str) -> None:
    import shardplan
    from shardplan import reference

    document = {"param_plan": {}, "injections": [], key: None}
    meta = meta_from_json(json.dumps(document))
    assert getattr(meta, key) is None  # null is held, not UNSET
    assert meta_to_bytes(meta) == (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    absent = {"special_handlers": {}, "tied_pairs": [], "mesh_dim_names": None}[key]
    for module in (shardplan, reference):
        assert getattr(module.rebuild_plan(meta, strict=False), key) == absent
        if key == "mesh_dim_names":  # freeze writes null for None: strict reads it
            assert module.rebuild_plan(meta).mesh_dim_names is None
        else:
            with pytest.raises(MetaError, match="null is never written here") as caught:
                module.rebuild_plan(meta)
            assert caught.value.path == key


def test_loading_then_dumping_a_document_without_plan_keys_adds_none(tmp_path: Path) -> None:
    text = json.dumps({"injections": [], "param_plan": {}, "source": {"a": 1}}, indent=2)
    path = tmp_path / "codegen_meta.json"
    path.write_text(text + "\n")
    dump_meta(load_meta(path), tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == text + "\n"
