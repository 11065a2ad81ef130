"""A field may not be named after a name the generated code binds where the field's local
would live; every other name works.

Every run is in this process (tests.helpers.run_specgen_here, call_in): no case needs a real
one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path

from generator import pipeline
from generator.__main__ import ExitStatus
from generator.config import load_config
from generator.errors import GeneratorError
from generator.table import load_tables
from shardplan.table.spec_fields import GROUP_INJECTIONS, GROUP_PARAM_PLAN, SPEC_FIELDS, SpecField
from tests.helpers import (
    REPO,
    add_field,
    added_row_number,
    call_in,
    copy_repo,
    run_specgen_here,
    snapshot,
)

CONFIG = load_config(REPO)
OUTPUTS = CONFIG.outputs  # every file the generator writes, as declared in [tool.specgen]
ROW = {f.name: number for number, f in enumerate(SPEC_FIELDS, start=1)}  # name -> row number


# ------------------------------------------------------------------- name clashes


def _names_the_generated_modules_bind() -> list[str]:
    """Every name generated/*.py binds (imports, definitions, parameters, assignments),
    read off their AST; the table's own field names (the rebuild's locals) left out."""
    bound: set[str] = set()
    for name in (n for n in OUTPUTS if n.endswith(".py")):
        for node in ast.walk(ast.parse((CONFIG.output / name).read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    return sorted(bound - set(ROW))


# The names the issue found accepted although every rebuild_plan then failed.
ISSUE_CLASHES = (
    "check_meta",
    "check_entry",
    "PARAM_PLAN_KEYS",
    "rebuild_scalar",
    "ModuleShardingSpec",
    "rule_path",
    "NO_RULE",
)


@functools.cache
def _environment() -> tuple[object, ...]:
    """The templates' environment, made once: it compiles every template (0.2 s), which
    pipeline.load_validated_tables would redo for each of the ~200 trial tables."""
    return pipeline._environment(CONFIG)


def _try_field(name: str, group: str) -> str | None:
    """The generator's refusal of the table plus a row ``name`` in ``group``, or None: what
    pipeline.load_validated_tables does, with the environment made once."""
    spec, *others = load_tables(CONFIG)
    row = SpecField(name, name, group, "scalar", "opt_scalar", doc="A probe.")
    trial = dataclasses.replace(spec, rows=(*spec.rows, row), fields={**spec.fields, name: True})
    _, kinds, form = _environment()
    try:
        pipeline._validated(kinds, form, CONFIG, (trial, *others))  # type: ignore[arg-type]
    except GeneratorError as exc:
        return str(exc)
    return None


def test_every_name_the_generated_modules_bind_is_refused_or_harmless_as_a_field_name(
    tmp_path: Path,
) -> None:
    names = _names_the_generated_modules_bind()
    assert set(ISSUE_CLASHES) <= set(names) and "value" in names and "strict" in names
    accepted = []
    for name in names:
        outcomes = {
            group: _try_field(name, group) for group in (GROUP_PARAM_PLAN, GROUP_INJECTIONS)
        }
        refusal = outcomes[GROUP_PARAM_PLAN]
        assert outcomes[GROUP_INJECTIONS] == refusal, name  # the same function binds both
        if refusal is None:
            accepted.append(name)
        else:
            assert refusal.startswith(
                f"table row {len(ROW) + 1} ({name}): name {name!r} clashes with the generated "
                f"code: generated/rebuild.py names a Python variable after the field, and already "
            ), refusal
    assert not set(ISSUE_CLASHES) & set(accepted)

    # What is accepted must work: every such field set, and on an artifact without them.
    root = copy_repo(tmp_path / "repo")
    for name in accepted:
        add_field(
            root, name, f'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'
        )
    assert run_specgen_here(root).returncode == 0
    assert call_in(root, lambda: _round_trips_with_fields(accepted)) == "ok"


def _round_trips_with_fields(names: list[str]) -> str:
    """Freeze and rebuild, with the generated code of the project imported (call_in), a plan
    setting every field in ``names``, and one setting none of them."""
    import shardplan
    from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

    values = {n: i for i, n in enumerate(names)}
    plan = ShardingPlan(
        modules={
            "a": ModuleShardingSpec(out_names=["y"], _ep_size=2, **values),  # type: ignore[arg-type]
            "b": ModuleShardingSpec(),
        }
    )
    rebuilt = shardplan.rebuild_plan(shardplan.freeze_plan(plan))
    assert rebuilt.modules == plan.modules, rebuilt.modules
    plain = ShardingPlan(modules={"c": ModuleShardingSpec(params={})})
    assert shardplan.rebuild_plan(shardplan.freeze_plan(plain)).modules == plain.modules
    return "ok"


def test_fields_named_after_generated_code_exit_2_naming_each_row_and_the_clash(
    repo_copy: Path,
) -> None:
    for name in ISSUE_CLASHES:
        add_field(
            repo_copy,
            name,
            f'SpecField("{name}", "{name}", GROUP_INJECTIONS, "plain", "opt_scalar")',
        )
    before = snapshot(repo_copy / "generated")
    for command in ("generate", "check"):
        result = run_specgen_here(repo_copy, command)
        assert result.returncode == ExitStatus.BAD_INPUT, result.stderr
        assert "Traceback" not in result.stderr
        for index, name in enumerate(ISSUE_CLASHES):
            assert (
                f"table row {added_row_number(index)} ({name}): name {name!r} clashes"
                in result.stderr
            )
        assert (
            "and already imports it from generated.meta.\n  Rename the field (and its row)."
            in result.stderr
        )  # check_meta
        assert "and already binds it as a module-level name." in result.stderr  # NO_RULE
    assert snapshot(repo_copy / "generated") == before
