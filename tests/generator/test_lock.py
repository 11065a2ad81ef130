"""The table lock on disk, under edits and under faults (docs/contract.md §10,
docs/evolving.md): an unusable lock is exit 2 with the way out, never "no lock"; `--new-lock`
replaces it deliberately, merging both sides of a conflict and keeping both histories of
breaks; and the lock records the meaning old artifacts depend on (each used kind's write
condition and absent value, each retired key's group), so changing it is classified.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generator.evolution import merge_sides
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.helpers import remove_region_dispatch, replace_once, run_specgen_here, snapshot

TABLE = "shardplan/table/spec_fields.py"
SPEC = "shardplan/table/spec.py"
KINDS = "shardplan/table/kinds.py"
LOCK = "generated/table.lock.json"
OUT_NAMES_KEY = 'SpecField("out_names", "out_names", GROUP_PARAM_PLAN,'
NO_RETIRED = "RETIRED_KEYS: tuple[RetiredKey, ...] = ()"


edit = replace_once


def rename_out_names_without_alias(root: Path) -> None:
    edit(
        root,
        TABLE,
        OUT_NAMES_KEY,
        OUT_NAMES_KEY.replace('"out_names", GROUP', '"output_names", GROUP'),
    )


def retire_region_dispatch(root: Path, group: str) -> None:
    remove_region_dispatch(root)
    edit(
        root,
        TABLE,
        NO_RETIRED,
        "RETIRED_KEYS: tuple[RetiredKey, ...] = (\n"
        f'    RetiredKey("region_dispatch", {group}, "dispatch moved to the runtime"),\n'
        ")",
    )


def lock(root: Path) -> dict[str, object]:
    return json.loads((root / LOCK).read_text())


def conflicted(base: Path, ours: Path, theirs: Path) -> str:
    """What git's textual merge of three locks leaves: the merged text with conflict markers."""
    result = subprocess.run(
        [
            "git",
            "merge-file",
            "-p",
            "-L",
            "HEAD",
            "-L",
            "base",
            "-L",
            "other",
            str(ours),
            str(base),
            str(theirs),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode > 0, "test setup: the two locks merged without a conflict"
    assert "<<<<<<< HEAD" in result.stdout
    return result.stdout


# ------------------------------------------------------------------ unusable is exit 2


def test_a_lock_with_conflict_markers_refuses_a_careless_merge_that_removes_a_row(
    repo_copy: Path,
) -> None:
    """Before: the conflicted lock read as "no lock", and the removed row was accepted."""
    path = repo_copy / LOCK
    text = path.read_text()
    path.write_text(text.replace('  "breaks"', '<<<<<<< HEAD\n=======\n>>>>>>> other\n  "breaks"'))
    remove_region_dispatch(repo_copy)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "generated/table.lock.json is unusable: it holds merge-conflict markers" in result.stderr
    assert "leave the lock as git left it, and run `specgen generate --new-lock`" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


@pytest.mark.parametrize(
    "text",
    [
        '{"rows": "garbage"}',
        "not json at all",
        "[]",
        '{"tables": {"spec": {"rows": [], "retired": []}}, "breaks": "none"}',
        '{"tables": {"spec": {"rows": [], "retired": []}}, "breaks": [1]}',
        '{"tables": {"spec": {"rows": [{"name": "x"}], "retired": []}}, "breaks": []}',
    ],
    ids=[
        "rows-garbage",
        "not-json",
        "not-an-object",
        "breaks-not-a-list",
        "break-not-an-entry",
        "row-not-a-row",
    ],
)
@pytest.mark.parametrize("command", ["generate", "check"])
def test_an_unusable_lock_exits_2_never_no_lock(repo_copy: Path, text: str, command: str) -> None:
    (repo_copy / LOCK).write_text(text)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, command)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "generated/table.lock.json is unusable" in result.stderr
    assert "restore it from git (`git checkout -- generated/table.lock.json`)" in result.stderr
    assert "`specgen generate --new-lock`" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_a_lock_deleted_beside_the_other_generated_files_exits_2(repo_copy: Path) -> None:
    (repo_copy / LOCK).unlink()
    remove_region_dispatch(repo_copy)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "it is missing, but the other generated files are there" in result.stderr
    assert not (repo_copy / LOCK).exists()


@pytest.mark.parametrize("empty_folder", [False, True], ids=["no-generated", "empty-generated"])
def test_a_fresh_project_has_no_lock_and_that_is_fine(repo_copy: Path, empty_folder: bool) -> None:
    shutil.rmtree(repo_copy / "generated")
    if empty_folder:
        (repo_copy / "generated").mkdir()
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert lock(repo_copy)["breaks"] == []


# ------------------------------------------------------------------ --new-lock


def test_new_lock_writes_a_deleted_lock_anew_and_check_then_passes(repo_copy: Path) -> None:
    (repo_copy / LOCK).unlink()
    result = run_specgen_here(repo_copy, "generate", "--new-lock")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "written anew from the table as it is" in result.stdout
    assert run_specgen_here(repo_copy, "check").returncode == 0


def test_new_lock_keeps_the_breaks_a_malformed_lock_still_holds(repo_copy: Path) -> None:
    remove_region_dispatch(repo_copy)
    assert run_specgen_here(repo_copy, "generate", "--allow-breaking").returncode == 0
    recorded = lock(repo_copy)["breaks"]
    document = lock(repo_copy)
    document["breaks"] = [*recorded, "a hand-written note"]  # type: ignore[misc]
    (repo_copy / LOCK).write_text(json.dumps(document))
    assert run_specgen_here(repo_copy, "generate").returncode == 2
    result = run_specgen_here(repo_copy, "generate", "--new-lock")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 entry(ies) of breaks could not be read" in result.stdout
    assert lock(repo_copy)["breaks"] == recorded


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--new-lock"),
        ("diff", "--new-lock"),
        ("table", "--new-lock"),
        ("generate", "--new-lock"),
    ],
    ids=["check", "diff", "table", "usable-lock"],
)
def test_new_lock_where_it_means_nothing_exits_2_and_writes_nothing(
    repo_copy: Path, args: tuple[str, ...]
) -> None:
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--new-lock" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


# ------------------------------------------------------------------ merging two branches


@pytest.fixture
def two_branches(repo_copy: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two branches of one project, each with a deliberate break recorded: ours removed
    region_dispatch, theirs renamed out_names without an alias. Returns the base lock,
    ours and theirs (ours is ``repo_copy``)."""
    base = tmp_path / "base.lock.json"
    shutil.copy(repo_copy / LOCK, base)
    theirs = tmp_path / "theirs"
    shutil.copytree(repo_copy, theirs)
    remove_region_dispatch(repo_copy)
    assert run_specgen_here(repo_copy, "generate", "--allow-breaking").returncode == 0
    rename_out_names_without_alias(theirs)
    assert run_specgen_here(theirs, "generate", "--allow-breaking").returncode == 0
    return base, repo_copy, theirs


def test_merging_two_branches_locks_keeps_both_histories_of_breaks(
    two_branches: tuple[Path, Path, Path],
) -> None:
    base, ours, theirs = two_branches
    ours_breaks, theirs_breaks = lock(ours)["breaks"], lock(theirs)["breaks"]
    # The merge: the table merged by hand (both edits), the lock left as git leaves it.
    rename_out_names_without_alias(ours)
    (ours / LOCK).write_text(conflicted(base, ours / LOCK, theirs / LOCK))
    refused = run_specgen_here(ours, "generate")
    assert refused.returncode == 2 and "merge-conflict markers" in refused.stderr
    result = run_specgen_here(ours, "generate", "--new-lock")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "merged both sides of the conflict" in result.stdout
    # Ours, then theirs' that ours lacks (the breaks both branches inherited appear once).
    merged = [*ours_breaks, *(b for b in theirs_breaks if b not in ours_breaks)]  # type: ignore[union-attr]
    assert lock(ours)["breaks"] == merged
    assert len(merged) == len(ours_breaks) + 1
    check = run_specgen_here(ours, "check")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_merge_that_undoes_the_other_branchs_break_is_refused(
    two_branches: tuple[Path, Path, Path],
) -> None:
    """Theirs renamed out_names to output_names and artifacts were written with it; a merged
    table without the rename breaks them, and neither branch recorded that."""
    base, ours, theirs = two_branches
    (ours / LOCK).write_text(conflicted(base, ours / LOCK, theirs / LOCK))
    before = snapshot(ours / "generated")
    result = run_specgen_here(ours, "generate", "--new-lock")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "key 'output_names' renamed to 'out_names' without an alias" in result.stderr
    assert "specgen generate --new-lock --allow-breaking" in result.stderr
    assert snapshot(ours / "generated") == before


# ------------------------------------------------------------------ the recorded meaning


def test_moving_a_retired_key_to_another_group_is_breaking(repo_copy: Path) -> None:
    """Before: exit 0, and old artifacts holding the key in param_plan were then refused."""
    retire_region_dispatch(repo_copy, "GROUP_PARAM_PLAN")
    assert run_specgen_here(repo_copy, "generate").returncode == 0
    edit(
        repo_copy,
        TABLE,
        'RetiredKey("region_dispatch", GROUP_PARAM_PLAN,',
        'RetiredKey("region_dispatch", GROUP_INJECTIONS,',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "retired key 'region_dispatch' moved from param_plan to injections" in result.stderr


def _default_true_made_false(root: Path, names: set[str]) -> None:
    """In the copy's spec module, the default ``True`` of each field of ``names`` made
    ``False`` (found by parsing the module: a user's field may read like ours)."""
    path = root / SPEC
    lines = path.read_text().splitlines(keepends=True)
    for node in ast.walk(ast.parse("".join(lines))):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) in names:
            value = node.value
            assert isinstance(value, ast.Constant) and value.value is True, ast.dump(node)
            line = lines[value.lineno - 1]
            lines[value.lineno - 1] = (
                line[: value.col_offset] + "False" + line[value.end_col_offset :]
            )
    path.write_text("".join(lines))


def test_changing_a_kind_names_absent_value_is_breaking(repo_copy: Path) -> None:
    """Before: exit 0, and every old artifact without is_boundary then rebuilt to False. The
    defaults of the fields whose rows use the name move with it (else law (a) refuses the
    edit before the lock is read): every such row's key is listed as breaking."""
    edit(
        repo_copy,
        KINDS,
        '    "bool_default_true": KindName(rebuild=Reads("bool", "True")),\n',
        '    "bool_default_true": KindName(rebuild=Reads("bool", "False")),\n',
    )
    using = [
        (table, row)
        for table, rows in (("spec", SPEC_FIELDS), ("plan", PLAN_FIELDS))
        for row in rows
        if row.rebuild == "bool_default_true" and not row.absent
    ]
    assert using, "no row uses bool_default_true: the edit tests nothing"
    _default_true_made_false(repo_copy, {row.name for _, row in using})
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    for table, row in using:
        assert (
            f"{table} table: key {row.key!r}: a missing key now gives False, was True: old "
            "artifacts without it now mean something else" in result.stderr
        ), row.key
    assert snapshot(repo_copy / "generated") == before


def test_a_rows_own_absent_value_is_recorded_and_changing_it_is_breaking(repo_copy: Path) -> None:
    """The presence is the row's: absent= on one row breaks that key alone."""
    edit(
        repo_copy,
        "shardplan/table/spec_fields.py",
        '"scalar", "bool_default_true",',
        '"scalar", "bool_default_true", absent="False",',
    )
    edit(repo_copy, SPEC, "    is_boundary: bool = True\n", "    is_boundary: bool = False\n")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "key 'is_boundary': a missing key now gives False, was True" in result.stderr
    assert "sequence_parallel" not in result.stderr
    rows = lock(repo_copy)["tables"]["spec"]["rows"]  # type: ignore[index]
    row = next(r for r in rows if r["key"] == "is_boundary")
    assert (row["written"], row["absent"]) == ("not None", "True")


def test_changing_a_kind_names_write_condition_changes_the_bytes(repo_copy: Path) -> None:
    edit(
        repo_copy,
        KINDS,
        '"name_list": KindName(Writes("names", Written.TRUTHY),',
        '"name_list": KindName(Writes("names", Written.NOT_NONE),',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "changes the bytes freeze writes: spec table: key 'out_names': now written when not None, was truthy"
        in result.stdout
    )


def _version_1(document: dict[str, Any]) -> dict[str, Any]:
    """The lock as written before it recorded meanings: no version, kind names in the rows."""
    old = {key: value for key, value in document.items() if key != "version"}
    for part in old["tables"].values():
        for row in part["rows"]:
            row["freeze"], row["rebuild"] = "named_placements", "named_placements"
    return old


@pytest.mark.parametrize(
    ("older", "keeps_breaks"),
    [(_version_1, True), (lambda document: {**document["tables"]["spec"], "breaks": []}, False)],
    ids=["kind-names", "before-tables-were-named"],
)
def test_an_old_format_lock_is_unusable_and_new_lock_keeps_its_breaks(
    repo_copy: Path, older: Callable[[dict[str, Any]], dict[str, Any]], keeps_breaks: bool
) -> None:
    """Nothing writes these formats any more: exit 2 naming the way out, never read as
    something else (a kind name is no record); --new-lock then writes the lock anew,
    keeping every break the old one recorded."""
    recorded = lock(repo_copy)["breaks"]
    assert recorded, "test setup: the repository's lock records a break"
    (repo_copy / LOCK).write_text(json.dumps(older(lock(repo_copy))))
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "generated/table.lock.json is unusable: it" in result.stderr
    assert "`specgen generate --new-lock`" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before
    renewed = run_specgen_here(repo_copy, "generate", "--new-lock")
    assert renewed.returncode == 0, renewed.stderr
    assert lock(repo_copy)["version"] == 2
    assert lock(repo_copy)["breaks"] == (recorded if keeps_breaks else [])
    assert run_specgen_here(repo_copy, "check").returncode == 0


def _code(root: Path) -> dict[str, str]:
    """The generated files, their digests (the stamp, the staleness guard's) left out."""
    return {
        name: re.sub("[0-9a-f]{64}", "<digest>", data.decode())
        for name, data in snapshot(root / "generated").items()
    }


def test_a_row_restated_with_a_synonym_is_no_change(repo_copy: Path) -> None:
    """A kind name is its meaning: is_boundary frozen by 'plain' rather than 'scalar', and
    in_src by 'placement_map' rather than 'named_placements', mean the same record and
    presence, so the code is the same and generate reports nothing (it once reported
    "changes the bytes freeze writes"). The comments name the records, not the names."""
    before = _code(repo_copy)
    edit(repo_copy, TABLE, '"scalar", "bool_default_true",', '"plain", "bool_default_true",')
    edit(
        repo_copy,
        TABLE,
        'SpecField("in_src", "in_src", GROUP_PARAM_PLAN, "named_placements", "named_placements",',
        'SpecField("in_src", "in_src", GROUP_PARAM_PLAN, "placement_map", "placement_map",',
    )
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the table changed" not in result.stdout
    assert "bytes" not in result.stdout and "break" not in result.stdout
    assert _code(repo_copy) == before
    freeze = (repo_copy / "generated" / "freeze.py").read_text()
    assert "# is_boundary: scalar, written when not None, once bool reads it back" in freeze
    assert "# in_src: placements, written when not None" in freeze
    assert "placement_map" not in freeze and "named_placements" not in freeze


# ------------------------------------------------------------------ reading a conflict


def test_both_sides_of_a_diff3_conflict_leave_the_base_out() -> None:
    text = "a\n<<<<<<< HEAD\nours\n||||||| base\nbase\n=======\ntheirs\n>>>>>>> other\nz\n"
    assert merge_sides(text) == ("a\nours\nz\n", "a\ntheirs\nz\n")


def test_markers_that_do_not_nest_as_git_writes_them_are_no_two_sides() -> None:
    assert merge_sides("a\n<<<<<<< HEAD\nours\nz\n") is None
    assert merge_sides("a\n=======\nz\n") is None


# ------------------------------------------------------------------ the lock in git's history


def _commit_all(root: Path, message: str) -> None:
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=root, check=True, capture_output=True,
        )  # fmt: skip

    if not (root / ".git").exists():
        git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", message)


def test_deleting_generated_in_a_git_checkout_is_no_fresh_project(repo_copy: Path) -> None:
    """`rm -rf generated && make codegen` once read as a fresh project: a rename without an
    alias passed and the recorded breaks were erased. The lock as committed still holds."""
    remove_region_dispatch(repo_copy)
    assert run_specgen_here(repo_copy, "generate", "--allow-breaking").returncode == 0
    recorded = lock(repo_copy)["breaks"]
    assert recorded
    _commit_all(repo_copy, "a table with one recorded break")
    shutil.rmtree(repo_copy / "generated")
    rename_out_names_without_alias(repo_copy)
    refused = run_specgen_here(repo_copy, "generate")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "key 'out_names' renamed to 'output_names' without an alias" in refused.stderr
    assert not (repo_copy / "generated").exists()
    edit(repo_copy, TABLE, '"output_names", GROUP', '"out_names", GROUP')
    again = run_specgen_here(repo_copy, "generate")
    assert again.returncode == 0, again.stderr
    assert "whose breaks are kept" in again.stdout
    assert lock(repo_copy)["breaks"] == recorded


def test_a_lock_whose_breaks_were_emptied_by_hand_fails_check(repo_copy: Path) -> None:
    remove_region_dispatch(repo_copy)
    assert run_specgen_here(repo_copy, "generate", "--allow-breaking").returncode == 0
    _commit_all(repo_copy, "one recorded break")
    emptied = {**lock(repo_copy), "breaks": []}
    (repo_copy / LOCK).write_text(json.dumps(emptied, indent=2) + "\n")
    for committed in (False, True):  # emptied in the work tree, then committed so
        if committed:
            _commit_all(repo_copy, "breaks emptied by hand")
        result = run_specgen_here(repo_copy, "check")
        assert result.returncode == 2, result.stdout + result.stderr
        assert "no longer records the break" in result.stderr
        assert "Traceback" not in result.stderr
    restored = run_specgen_here(repo_copy, "generate", "--new-lock")
    assert restored.returncode == 0, restored.stderr
    assert lock(repo_copy)["breaks"] and run_specgen_here(repo_copy, "check").returncode == 0


def test_the_lock_mode_is_decided_once_from_the_command() -> None:
    """One mode a run (as black's WriteBack): check and diff only report; generate refuses
    a breaking edit unless --allow-breaking records it; --new-lock replaces a lock."""
    from generator.evolution import LockMode

    report = LockMode(writes=False)
    assert LockMode.from_command("check", True, True) == report
    assert LockMode.from_command("diff", False, False) == report
    plain = LockMode.from_command("generate", False, False)
    assert plain == LockMode() and plain.writes
    assert not plain.allow_breaking and not plain.new_lock
    both = LockMode.from_command("generate", True, True)
    assert both.writes and both.allow_breaking and both.new_lock
    assert not (report.allow_breaking or report.new_lock)
