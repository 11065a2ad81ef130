"""The weekly flow, as a user meets it: additions made as README says ("Adding a spec
field", "Adding a plan-level field", "A new kind") in a copy of the whole repository, then
`make codegen`, then the suite, which must pass with no further edit.

One copy holds every addition at once (the README promises each alone and all together;
together is the harder case and costs one run). Not examples but the class
(tests/additions.py, ``every_kind_field``): a row for every kind name a row may use, in
every group (param_plan, injections, a top-level plan key, one nested in
``parallel_dims``), with each default its kinds keep (None, falsy, truthy and another,
where the defaults laws allow them; rows written always among them, which older artifacts
frozen again gain: tests/older_artifacts.py), at the first, a middle and the last position of its group, named
with ordinary words; beside them an exempt field, one set after construction, and
README's three examples as written, a new kind with a row using it among them. Every place
an edit goes is found in the copy's own files, README's examples are taken from README's
own fragments (so the steps tested are the steps written), so the test also passes where
the product table already holds a user's rows, and a name a user already took is not
taken twice.

It is not part of `make test`: `make flow` runs it, and CI runs that after the suite.

Which tests run in the copy, by a rule, not by hand: all of them but the ones marked
``processes`` and ``copies_the_suite`` (this one: it would recurse). A ``processes`` test
starts other processes to watch what they do: torch process groups applying the example
plans and the shared fixture (a row added as README says is "not an apply input", step 3,
so they cannot see it), writers killed or raced, fresh interpreters' imports and entry
points. What they watch is the processes, not the table's rows, and the suite runs them on
the product table; in the copy they would double the cost of this test for no row they
could see.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import additions
from tests.helpers import REPO, SHARED_FIXTURES, make_codegen, run_in

# The rows of the copy's tables freeze writes even at their absent value, by the copy's kinds.
WRITTEN_AT_ABSENT = """
import json
from shardplan.table.kinds import crossings
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS
tables = ((SPEC_FIELDS, ModuleShardingSpec), (PLAN_FIELDS, ShardingPlan))
print(json.dumps([
    name for rows, cls in tables
    for name, crossing in crossings(rows, cls).items() if crossing.written_at_absent
]))
"""
# Outside the rule above: deselected in the copy, with the reason in this module's docstring.
NOT_IN_THE_COPY = "not processes and not copies_the_suite"


def copy_checkout(tmp_path: Path) -> Path:
    """Every file git tracks in this checkout (or, outside git, every file but the venv's
    and caches), into ``tmp_path/repo``, with the shared fixture beside it when there is one:
    a user's checkout, README and docs included, without the 1-GB venv."""
    root = tmp_path / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if listed.returncode == 0 and listed.stdout:
        names = [name for name in listed.stdout.split("\0") if name]
    else:
        skip = {".venv", ".git", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache"}
        names = [
            p.relative_to(REPO).as_posix()
            for p in REPO.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(REPO).parts)
        ]
    for name in names:
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is still listed
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    if SHARED_FIXTURES.is_dir():
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "fixtures").symlink_to(SHARED_FIXTURES)
    return root


@pytest.mark.copies_the_suite
def test_additions_of_every_kind_group_and_position_leave_the_whole_suite_green(
    tmp_path: Path,
) -> None:
    root = copy_checkout(tmp_path)
    # An exempt row has no key, so generate lists no change for it.
    added = [
        name
        for name, crossing in (
            (addition.add(root), "GROUP_EXEMPT" not in addition.row)
            for addition in (
                *additions.every_kind_field(),
                *additions.EVERY_FIELD,
                *additions.typed_fields(),
            )
        )
        if crossing
    ]
    # README's own three examples, from its fragments, as written.
    added += [steps.add(root) for steps in additions.README_STEPS]

    make = make_codegen(root)
    assert make.returncode == 0, make.stdout + make.stderr
    # A row freeze writes even at its absent value gives older artifacts its key when they
    # are frozen again: listed as changing the bytes, the others as compatible.
    gained = set(json.loads(run_in(root, "-c", WRITTEN_AT_ABSENT).stdout))
    assert gained & set(added) and set(added) - gained  # the class holds both
    for name in added:
        effect = "changes the bytes freeze writes" if name in gained else "compatible"
        assert re.search(rf"{effect}: (spec|plan) table: row added: {name} ", make.stdout), (
            name,
            make.stdout,
        )
    kind_row = added[-1]
    assert re.search(
        rf"__freeze_int_nonzero\w*\(\s*__value, __module_path\(__fqn\) \+ \".{kind_row}\"\s*\)",
        (root / "generated" / "freeze.py").read_text(),
    ), kind_row

    _passes_ci_checks(root)
    suite = run_in(
        root,
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-m", NOT_IN_THE_COPY,
        env={"HYPOTHESIS_PROFILE": "steps"},
        timeout=600,
    )  # fmt: skip
    summary = suite.stdout.strip().splitlines()[-1] if suite.stdout.strip() else ""
    assert suite.returncode == 0, suite.stdout[-6000:] + suite.stderr[-3000:]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary


def _make(root: Path, target: str) -> subprocess.CompletedProcess[str]:
    """`make <target>` in ``root``, as CI runs it, with this interpreter's folder standing
    in for the project's venv."""
    return subprocess.run(
        ["make", "-s", target, "STAMP=", f"BIN={Path(sys.executable).parent}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _passes_ci_checks(root: Path) -> None:
    """What CI runs besides the tests: `make check` and `make mypy` (mypy --strict over
    generated/, shardplan/ and generator/), in the copy."""
    for target in ("check", "mypy"):
        done = _make(root, target)
        assert done.returncode == 0, (target, done.stdout[-4000:], done.stderr[-2000:])


# README's plan-level field, read from an artifact written before it and holding "abc".
OLDER_AND_WRONG = """
import json, sys, tempfile
from pathlib import Path
from shardplan import MetaError, read_plan
name = sys.argv[1]
path = Path(tempfile.mkdtemp()) / "codegen_meta.json"
path.write_text(json.dumps({"param_plan": {"m": {}}}))
print(json.dumps([getattr(read_plan(path, allow_targets=()), name)]))
path.write_text(json.dumps({"param_plan": {"m": {}}, name: "abc"}))
try:
    read_plan(path, allow_targets=())
except MetaError as exc:
    print(json.dumps(str(exc)))
"""


@pytest.mark.copies_the_suite
def test_readme_field_sections_followed_as_written_pass_what_ci_runs(tmp_path: Path) -> None:
    """README "Adding a spec field" and "Adding a plan-level field", exactly as written, in
    a fresh copy: `make codegen`, then the tests of the tables and of typed values, `make
    check` and `make mypy` all pass, and the plan-level field reads its default from an
    older artifact and refuses "abc"."""
    root = copy_checkout(tmp_path)
    spec_field = additions.README_SPEC_FIELD.add(root)
    plan_field = additions.README_PLAN_FIELD.add(root)
    make = make_codegen(root)
    assert make.returncode == 0, make.stdout + make.stderr
    for name in (spec_field, plan_field):
        assert f"row added: {name} " in make.stdout, make.stdout
    _passes_ci_checks(root)
    read = run_in(root, "-c", OLDER_AND_WRONG, plan_field)
    assert read.returncode == 0, read.stderr
    default, refusal = map(json.loads, read.stdout.splitlines())
    assert default == [1]
    assert refusal == f"{plan_field}: expected an integer, got string"
    tests = ("tests/table/test_typed_values.py", "tests/table/test_table.py", "tests/table/test_plan_table.py")
    suite = run_in(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, timeout=600)
    assert suite.returncode == 0, suite.stdout[-6000:] + suite.stderr[-3000:]
