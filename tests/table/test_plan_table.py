"""The plan level crosses the artifact through a table of its own (issue 17, docs/contract.md §2b),
rendered by the same generator mechanism as the spec table.

Each case edits a throwaway copy of the repository, as a developer would (README "Adding a
plan-level field"), runs specgen there, and checks what they would see. The copy's own table and generated
code are the ones imported, in this process (tests.helpers.run_specgen_here,
run_python_here). Real process: only `specgen check` under -X importtime (what a fresh
interpreter imports).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

from shardplan.table.format import GROUP_DERIVED, GROUP_OTHERS, GROUP_PLAN
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ShardingPlan
from tests.additions import fresh_name
from tests.helpers import (
    REPO,
    insert_text,
    run_python_here,
    run_specgen_here,
    snapshot,
)

SPEC = "shardplan/table/spec.py"
PLAN_TABLE = "shardplan/table/plan_fields.py"
# Where a new ShardingPlan field and its row go: after loss_parallel, as README says.
LAST_PLAN_SETTING = "    loss_parallel: bool = False\n"
LOSS_PARALLEL_ROW = (
    '              doc="Whether the loss is computed on vocabulary-sharded logits."),\n'
)
# README's example name, or the next free one where a user's table already has it.
NAME = fresh_name(REPO, "ShardingPlan", "pipeline_stages")
PIPELINE_FIELD = f"    {NAME}: int = 1\n"
PIPELINE_ROW = (
    f'    SpecField("{NAME}", "{NAME}", GROUP_PLAN, "int", "int",\n'
    '              doc="How many pipeline stages the plan was made for."),\n'
)

ROUND_TRIP = """
import json, sys
import shardplan
from shardplan.artifact.meta import dump_meta, load_meta
from shardplan.table.spec import ShardingPlan
dump_meta(shardplan.freeze_plan(ShardingPlan(**{sys.argv[2]: 4})), sys.argv[1])
plan = shardplan.rebuild_plan(load_meta(sys.argv[1]))
print(json.dumps({"stages": getattr(plan, sys.argv[2]), "file": json.load(open(sys.argv[1]))}))
"""


def _add_pipeline_stages_field(root: Path) -> None:
    insert_text(root / SPEC, LAST_PLAN_SETTING, PIPELINE_FIELD)


def _add_pipeline_stages_row(root: Path) -> None:
    insert_text(root / PLAN_TABLE, LOSS_PARALLEL_ROW, PIPELINE_ROW)


def test_a_plan_field_without_a_row_exits_2_naming_it_and_touches_nothing(
    repo_copy: Path,
) -> None:
    _add_pipeline_stages_field(repo_copy)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    assert (
        f"field '{NAME}' of shardplan.table.spec:ShardingPlan has no table row.\n"
        "  Add a SpecField row for it to shardplan/table/plan_fields.py" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_a_plan_row_without_a_field_exits_2_naming_it(repo_copy: Path) -> None:
    _add_pipeline_stages_row(repo_copy)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2
    assert f"({NAME}): the plan class has no field '{NAME}'" in result.stderr


def test_a_plan_field_with_its_row_crosses_the_file_and_shows_in_the_contract(
    repo_copy: Path, tmp_path: Path
) -> None:
    _add_pipeline_stages_field(repo_copy)
    _add_pipeline_stages_row(repo_copy)
    assert run_specgen_here(repo_copy, "check").returncode == 1  # generated/ is behind the table
    generate = run_specgen_here(repo_copy, "generate")
    assert generate.returncode == 0, generate.stderr
    assert f"compatible: plan table: row added: {NAME}" in generate.stdout
    assert run_specgen_here(repo_copy, "check").returncode == 0

    outcome = run_python_here(
        repo_copy, "-c", ROUND_TRIP, str(tmp_path / "codegen_meta.json"), NAME
    )
    assert outcome.returncode == 0, outcome.stderr
    crossed = json.loads(outcome.stdout)
    assert crossed["stages"] == 4 and crossed["file"][NAME] == 4

    generated = repo_copy / "generated"
    schema = json.loads((generated / "codegen_meta.schema.json").read_text())
    assert schema["properties"][NAME]["description"] == (
        "How many pipeline stages the plan was made for."
    )
    assert f"| `{NAME}` | plan |" in (generated / "fields.md").read_text()
    lock = json.loads((generated / "table.lock.json").read_text())
    assert {"key": NAME, "name": NAME}.items() <= next(
        row for row in lock["tables"]["plan"]["rows"] if row["key"] == NAME
    ).items()
    meta = (generated / "meta.py").read_text()
    assert f"    {NAME}: int | None | Unset = UNSET\n" in meta


def test_removing_a_plan_row_and_its_field_without_retiring_exits_2_naming_the_key(
    repo_copy: Path,
) -> None:
    spec = repo_copy / SPEC
    spec.write_text(spec.read_text().replace("    tied_pairs: list[tuple[str, str]]", "    # "))
    table = repo_copy / PLAN_TABLE
    text = table.read_text()
    start = text.index('    SpecField("tied_pairs"')
    end = text.index("    SpecField(", start + 1)
    table.write_text(text[:start] + text[end:])
    before = snapshot(repo_copy / "generated")
    recorded = json.loads((repo_copy / "generated" / "table.lock.json").read_text())["breaks"]
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout
    assert "key 'tied_pairs' (tied_pairs) removed without retiring it" in result.stderr
    assert snapshot(repo_copy / "generated") == before
    allowed = run_specgen_here(repo_copy, "generate", "--allow-breaking")
    assert allowed.returncode == 0, allowed.stderr
    breaks = json.loads((repo_copy / "generated" / "table.lock.json").read_text())["breaks"]
    assert breaks[: len(recorded)] == recorded
    assert [b["change"] for b in breaks[len(recorded) :]] == [
        "plan table: key 'tied_pairs' (tied_pairs) removed without retiring it: artifacts "
        "holding it no longer load"
    ]


RENAMED_READ = """
import json, sys
import shardplan
from shardplan.artifact.meta import load_meta, meta_to_json
plan = shardplan.rebuild_plan(load_meta(sys.argv[1]), strict=True)
print(json.dumps({"mesh": plan.mesh_dim_names,
                  "written": json.loads(meta_to_json(shardplan.freeze_plan(plan)))}))
"""


def test_a_plan_key_renamed_with_an_alias_still_loads_old_artifacts_strictly(
    repo_copy: Path, tmp_path: Path
) -> None:
    table = repo_copy / PLAN_TABLE
    table.write_text(
        table.read_text().replace(
            'SpecField("mesh_dim_names", "mesh_dim_names", GROUP_PLAN, "opt_name_list", '
            '"opt_name_tuple",',
            'SpecField("mesh_dim_names", "mesh_axes", GROUP_PLAN, "opt_name_list", '
            '"opt_name_tuple", aliases=("mesh_dim_names",),',
        )
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    assert "renamed to 'mesh_axes'" in result.stdout
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps(
            {"param_plan": {"m": {}}, "injections": [], "mesh_dim_names": ["dp", "tp"]},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    outcome = run_python_here(repo_copy, "-c", RENAMED_READ, str(old))
    assert outcome.returncode == 0, outcome.stderr
    read = json.loads(outcome.stdout)
    assert read["mesh"] == ["dp", "tp"]
    assert read["written"]["mesh_axes"] == ["dp", "tp"] and "mesh_dim_names" not in read["written"]


# ------------------------------------------------------------------ said once, from the table


def _plan_level_keys() -> set[str]:
    keys = {f.key for f in PLAN_FIELDS if f.group in (GROUP_PLAN, GROUP_DERIVED)}
    return keys | {key.partition(".")[0] for key in keys} | {key.rpartition(".")[2] for key in keys}


def test_no_hand_written_runtime_module_or_template_spells_a_plan_level_key() -> None:
    """The plan level's keys come from the table: outside the tables, the examples and the
    staleness guard, no runtime module nor template holds one as a string literal."""
    quoted = re.compile("|".join(rf"[\"']{re.escape(k)}[\"']" for k in sorted(_plan_level_keys())))
    places = [
        *(REPO / "shardplan").rglob("*.py"),
        *(REPO / "templates").rglob("*"),
    ]
    found = []
    for path in places:
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(("shardplan/table/", "shardplan/examples/")) or not path.is_file():
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if quoted.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []


def test_the_plan_table_has_a_row_for_every_plan_field_but_modules() -> None:

    fields = [f.name for f in dataclasses.fields(ShardingPlan)]
    named = [f.name for f in PLAN_FIELDS if f.group != GROUP_DERIVED]
    assert sorted(named) == sorted(set(fields) - {"modules"})
    assert [f.name for f in PLAN_FIELDS if f.group == GROUP_OTHERS] == ["other_keys"]


def test_specgen_check_imports_neither_torch_nor_msgspec_nor_orjson() -> None:
    """`specgen check` as CI runs it, with -X importtime: the generator stands on its own."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "generator", "--root", str(REPO), "check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert imported and not imported & {"torch", "msgspec", "orjson"}
