"""The command line: commands, their old spellings, exit statuses, `specgen table`.

Every run is in this process (tests.helpers.run_specgen_here): no case needs a real one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from generator.__main__ import ExitStatus
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.helpers import (
    REPO,
    run_specgen_here,
    snapshot,
)

ROW = {f.name: number for number, f in enumerate(SPEC_FIELDS, start=1)}  # name -> row number


def test_table_command_prints_every_row() -> None:
    result = run_specgen_here(REPO, "table")
    assert result.returncode == 0
    tables = re.split(r"\n(?=\w+ table \()", result.stdout)
    assert [t.splitlines()[0] for t in tables] == [
        "spec table (shardplan/table/spec_fields.py, ModuleShardingSpec)",
        "plan table (shardplan/table/plan_fields.py, ShardingPlan)",
    ]
    lines = tables[0].splitlines()[2:]
    assert lines[0].split() == ["#", "name", "key", "group", "freeze", "rebuild", "post_init"]
    number = ROW["_deferred_bias_params"]
    assert lines[number + 1].split() == [
        str(number),
        "_deferred_bias_params",
        "deferred_bias_params",
        "param_plan",
        "name_list",
        "tuple_empty",
        "yes",
    ]
    assert [line.split()[1] for line in lines if re.match(r"\d+ ", line)] == list(ROW)


# ------------------------------------------------------------------- the command line


def test_exit_statuses_have_names() -> None:
    assert [(status.name, int(status)) for status in ExitStatus] == [
        ("OK", 0),
        ("DRIFT", 1),
        ("BAD_INPUT", 2),
    ]


@pytest.mark.parametrize(
    "args",
    [("check",), ("--check",)],
    ids=["subcommand", "alias"],
)
def test_check_and_its_alias_exit_1_on_drift(repo_copy: Path, args: tuple[str, ...]) -> None:
    path = repo_copy / "generated" / "freeze.py"
    path.write_text(path.read_text() + "# stray\n")
    result = run_specgen_here(repo_copy, *args)
    assert result.returncode == ExitStatus.DRIFT
    assert "-# stray" in result.stdout and "generated/freeze.py is stale" in result.stderr


@pytest.mark.parametrize("args", [(), ("generate",)], ids=["no-command", "generate"])
def test_generate_is_the_default_command(repo_copy: Path, args: tuple[str, ...]) -> None:
    path = repo_copy / "generated" / "freeze.py"
    path.write_text("broken\n")
    result = run_specgen_here(repo_copy, *args)
    assert result.returncode == ExitStatus.OK and "wrote generated/freeze.py" in result.stdout
    assert run_specgen_here(repo_copy, "check").returncode == ExitStatus.OK


@pytest.mark.parametrize("args", [("diff",), ("--diff",)], ids=["subcommand", "alias"])
def test_diff_and_its_alias_print_the_diff_and_exit_0(
    repo_copy: Path, args: tuple[str, ...]
) -> None:
    path = repo_copy / "generated" / "rebuild.py"
    path.write_text(path.read_text() + "# stray\n")
    result = run_specgen_here(repo_copy, *args)
    assert result.returncode == ExitStatus.OK and "-# stray" in result.stdout
    assert path.read_text().endswith("# stray\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("table", "--check"),
            "`specgen table --check` means nothing: run `specgen table` or `specgen check`",
        ),
        (("generate", "--diff"), "`specgen generate --diff` means nothing"),
        (("check", "--check"), "`specgen check --check` means nothing"),
    ],
    ids=["table-check", "generate-diff", "check-check"],
)
def test_a_command_line_that_means_nothing_exits_2_and_writes_nothing(
    repo_copy: Path, args: tuple[str, ...], message: str
) -> None:
    (repo_copy / "generated" / "freeze.py").write_text("stale\n")
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, *args)  # always with --root
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.startswith("specgen: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert snapshot(repo_copy / "generated") == before
