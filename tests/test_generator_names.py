"""A field may not be named after a name the generated code binds where the field's local
would live, nor a plan-level key after a name CodegenMeta's class body or its module uses,
nor either begin with two underscores; every other name works. What the generated code
uses is read off what the templates render, so a template's new name is covered too.

Every run is in this process (tests.helpers.run_specgen_here, call_in): no case needs a real
one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path

import pytest

from generator import pipeline
from generator.__main__ import ExitStatus
from generator.config import load_config
from generator.errors import GeneratorError
from generator.table import load_tables
from shardplan.table.format import GROUP_OTHERS, GROUP_PLAN
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.spec_fields import GROUP_INJECTIONS, GROUP_PARAM_PLAN, SPEC_FIELDS, SpecField
from tests.helpers import (
    REPO,
    add_field,
    added_row_number,
    call_in,
    copy_repo,
    insert_text,
    run_specgen_here,
    snapshot,
    with_doc,
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


@functools.cache
def _loaded() -> tuple[object, ...]:
    """The configured tables as imported, once: each trial adds its row to a copy."""
    return tuple(load_tables(CONFIG))


def _try_field(name: str, group: str, key: str = "", table: int = 0) -> str | None:
    """The generator's refusal of the tables plus a row ``name`` (keyed ``key``, default
    the name) in ``group`` of the ``table``-th table, or None: what
    pipeline.load_validated_tables does, with the environment made once."""
    tables = list(_loaded())
    row = SpecField(name, key or name, group, "scalar", "opt_scalar", doc="A probe.")
    loaded = tables[table]
    tables[table] = dataclasses.replace(
        loaded, rows=(*loaded.rows, row), fields={**loaded.fields, name: True}
    )
    try:
        pipeline._validated(*_environment(), CONFIG, tuple(tables))  # type: ignore[arg-type]
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
            "and already imports it from .meta.\n  Rename the field (and its row)." in result.stderr
        )  # check_meta
        assert "and already binds it as a module-level name." in result.stderr  # NO_RULE
    assert snapshot(repo_copy / "generated") == before


# ------------------------------------------------------------------- plan-level keys

PLAN_ROW = len(PLAN_FIELDS) + 1  # a row added at the end of the plan table (in process)
# Plan-level keys the issue found accepted although the generated code then broke: every
# freeze raised a TypeError (field, __init__), `import generated.meta` failed (__dict__),
# every artifact failed to load (__class__). Each becomes a field of CodegenMeta.
BREAKING_PLAN_KEYS = {
    "field": "and already imports it from dataclasses.",
    "__init__": "and Python keeps names beginning with two underscores for itself",
    "__dict__": "and Python keeps names beginning with two underscores for itself",
    "__class__": "and Python keeps names beginning with two underscores for itself",
}


@pytest.mark.parametrize("key", sorted(BREAKING_PLAN_KEYS))
def test_a_plan_key_that_would_break_codegen_meta_is_refused_naming_the_row(key: str) -> None:
    refusal = _try_field("probe", GROUP_PLAN, key=key, table=1)
    assert refusal is not None and refusal.startswith(
        f"table 'plan' row {PLAN_ROW} (probe): name {key!r} clashes with the generated code: "
        "generated/meta.py names a field of CodegenMeta after the key, " + BREAKING_PLAN_KEYS[key]
    ), refusal
    assert refusal.endswith("Choose another key for the row."), refusal


@pytest.mark.parametrize(
    ("name", "module", "how"),
    [
        ("check_meta", "meta.py", "a field of CodegenMeta after the key, and already defines it."),
        ("extra_keys", None, None),  # no name the generated code uses: accepted
        ("strict", "rebuild.py", "a Python variable after the field, and already takes it as a"),
        ("value", "rebuild.py", "a Python variable after the field, and already binds it as a"),
    ],
)
def test_a_plan_row_is_refused_where_its_name_or_key_shadows_the_generated_code(
    name: str, module: str | None, how: str | None
) -> None:
    refusal = _try_field(name, GROUP_PLAN, table=1)
    if module is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.startswith(
            f"table 'plan' row {PLAN_ROW} ({name}): name {name!r} clashes with the generated "
            f"code: generated/{module} names {how}"
        ), refusal


@pytest.mark.parametrize("name", ["__init__", "__dict__", "__class__", "__private"])
def test_a_spec_field_beginning_with_two_underscores_is_refused(name: str) -> None:
    refusal = _try_field(name, GROUP_INJECTIONS)
    assert refusal is not None and refusal.startswith(
        f"table row {len(ROW) + 1} ({name}): name {name!r} clashes with the generated code: "
        "generated/rebuild.py names a Python variable after the field, and Python keeps names "
        "beginning with two underscores for itself"
    ), refusal


def test_a_spec_field_named_field_is_accepted_where_nothing_shadows_it() -> None:
    # `field` is meta.py's import, but a spec field's local lives in rebuild.py only.
    assert _try_field("field", GROUP_PARAM_PLAN) is None


def test_plan_keys_that_would_break_the_generated_code_exit_2_and_write_nothing(
    repo_copy: Path,
) -> None:
    """The command line, as a user meets it: each key a row of its own (a harmless field
    name), every row named in one message, for generate and check alike."""
    plan_file = repo_copy / "shardplan/table/plan_fields.py"
    others = next(n for n, f in enumerate(PLAN_FIELDS, start=1) if f.group == GROUP_OTHERS)
    for index, key in enumerate(BREAKING_PLAN_KEYS):
        insert_text(
            repo_copy / "shardplan/table/spec.py",
            "    loss_parallel: bool = False\n",
            f"    probe_{index}: object = None\n",
        )
        row = f'SpecField("probe_{index}", "{key}", GROUP_PLAN, "scalar", "opt_scalar")'
        insert_text(plan_file, '    SpecField("other_keys"', f"    {with_doc(row)},\n", before=True)
    before = snapshot(repo_copy / "generated")
    for command in ("generate", "check"):
        result = run_specgen_here(repo_copy, command)
        assert result.returncode == ExitStatus.BAD_INPUT, result.stderr
        assert "Traceback" not in result.stderr
        for index, key in enumerate(BREAKING_PLAN_KEYS):
            assert (
                f"table 'plan' row {others + index} (probe_{index}): name {key!r} clashes with "
                "the generated code: generated/meta.py names a field of CodegenMeta after the "
                f"key, {BREAKING_PLAN_KEYS[key]}"
            ) in result.stderr, result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_a_name_a_template_edit_introduces_is_refused_with_no_list_to_update(
    repo_copy: Path,
) -> None:
    """The names come from what the templates render: a helper a template starts to call
    is refused as a field name at once, and accepted again once the template drops it."""
    template = repo_copy / "templates/rebuild.py.j2"
    original = template.read_text(encoding="utf-8")
    insert_text(
        template,
        "NO_RULE: tuple[int, dict[str, Any]] = (-1, {})\n",
        "\n\ndef new_helper() -> None:\n    pass\n",
    )
    add_field(
        repo_copy,
        "new_helper",
        'SpecField("new_helper", "new_helper", GROUP_PARAM_PLAN, "scalar", "opt_scalar")',
    )
    result = run_specgen_here(repo_copy)
    assert result.returncode == ExitStatus.BAD_INPUT, result.stderr
    assert (
        f"table row {added_row_number()} (new_helper): name 'new_helper' clashes with the "
        "generated code: generated/rebuild.py names a Python variable after the field, and "
        "already defines it.\n  Rename the field (and its row)."
    ) in result.stderr
    template.write_text(original, encoding="utf-8")
    assert run_specgen_here(repo_copy).returncode == 0
