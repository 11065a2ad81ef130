"""Any name a dataclass field may take is a valid row name (issue 43): where a field's local,
an object's local or a CodegenMeta field may live, the generated code's own names begin with
two underscores (issue 52), a form the generator refuses for every field and key, or are
names the class's module binds; CodegenMeta's body spells its few (generator.blocks.Words).
By construction, with no probe. What is refused is refused in
words: a name beginning with two underscores, and a field that would shadow a name the
class's own module binds (``field``: dataclasses.field, which later fields call).

Runs are in this process (tests.helpers.run_specgen_here, call_in).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from generator.__main__ import ExitStatus
from shardplan.table.format import GROUP_OTHERS
from shardplan.table.plan_fields import PLAN_FIELDS
from tests.additions import NewField
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

# The names the issue lists: each was a name of the generated rebuild's own.
ISSUE_NAMES = ("type", "value", "entry", "fqn", "meta", "spec", "rule", "strict")
SPEC_MODULE = "shardplan/table/spec.py"


def _bound(source: str) -> set[str]:
    """Every name ``source`` binds anywhere: imports, definitions, parameters, assignments."""
    bound: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return bound


def _round_trips(values: dict[str, object]) -> str:
    """Freeze and rebuild (generated code and reference alike, the project imported from
    the copy by call_in) a plan whose module sets ``values``, and one that sets none."""
    import shardplan
    from shardplan import reference
    from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

    plan = ShardingPlan(
        modules={"a": ModuleShardingSpec(out_names=["y"], **values), "b": ModuleShardingSpec()}
    )
    meta = shardplan.freeze_plan(plan)
    assert meta == reference.freeze_plan(plan)
    assert shardplan.rebuild_plan(meta).modules == plan.modules
    assert reference.rebuild_plan(meta).modules == plan.modules
    plain = ShardingPlan(modules={"c": ModuleShardingSpec(params={})})
    assert shardplan.rebuild_plan(shardplan.freeze_plan(plain)).modules == plain.modules
    return "ok"


def test_fields_named_after_the_generated_codes_own_names_generate_check_and_rebuild(
    tmp_path: Path,
) -> None:
    """The issue's eight names, added together as README's "Adding a spec field" says."""
    root = copy_repo(tmp_path / "repo")
    row = 'SpecField("{name}", "{name}", GROUP_INJECTIONS, "plain", "opt_scalar", doc="A test.")'
    for name in ISSUE_NAMES:
        after = NewField(
            "ModuleShardingSpec",
            name,
            "Scalar | None = None",
            row,
            lambda rows: next(r for r in rows if r.name == "_ep_size"),
        )
        assert after.add(root) == name
    for command in ("generate", "check"):
        result = run_specgen_here(root, command)
        assert result.returncode == ExitStatus.OK, result.stderr
    rebuild = (root / "generated/rebuild.py").read_text()
    assert "\n__type = type\n" in rebuild and "    __value: Any\n" in rebuild
    values = {name: f"{name}!" for name in ISSUE_NAMES}
    assert call_in(root, lambda: _round_trips(values)) == "ok"


def test_every_name_the_generated_modules_bind_is_a_valid_field_name(tmp_path: Path) -> None:
    """No list to keep: whatever the generated modules bind today, a field of that name
    (all of them at once) generates, checks and round-trips, but for the spec module's own
    names, which are refused in words (below), and the names beginning with two underscores,
    which no field may take."""
    generated = "".join(p.read_text() for p in sorted((REPO / "generated").glob("*.py")))
    own = _bound((REPO / SPEC_MODULE).read_text())
    bound = _bound(generated)
    assert {"__NO_RULE", "__rebuild_scalar", "__entry", "__value"} <= bound
    names = sorted(n for n in bound - own - {"annotations"} if not n.startswith("__"))
    assert {"check_meta", "meta", "plan", "document", "targets"} <= set(names)
    root = copy_repo(tmp_path / "repo")
    for name in names:
        add_field(
            root, name, f'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'
        )
    for command in ("generate", "check"):
        result = run_specgen_here(root, command)
        assert result.returncode == ExitStatus.OK, result.stderr
    assert call_in(root, lambda: _round_trips({n: i for i, n in enumerate(names)})) == "ok"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("field", "name 'field' shadows a name the class's module binds ("),
        ("ModuleShardingSpec", "name 'ModuleShardingSpec' shadows a name the class's module"),
        ("__private", "name begins with two underscores, which Python keeps for itself"),
    ],
)
def test_a_field_the_class_module_or_python_keeps_is_refused_in_words(
    repo_copy: Path, name: str, message: str
) -> None:
    add_field(
        repo_copy, name, f'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'
    )
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == ExitStatus.BAD_INPUT, result.stderr
    assert f"table row {added_row_number()} ({name}): {message}" in result.stderr
    assert "Rename the field (and its row)." in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


def _plan_key_row(root: Path, index: int, key: str) -> None:
    insert_text(
        root / SPEC_MODULE,
        "    loss_parallel: bool = False\n",
        f"    probe_{index}: object = None\n",
    )
    row = f'SpecField("probe_{index}", "{key}", GROUP_PLAN, "scalar", "opt_scalar")'
    insert_text(
        root / "shardplan/table/plan_fields.py",
        '    SpecField("other_keys"',
        f"    {with_doc(row)},\n",
        before=True,
    )


def test_plan_keys_named_after_codegen_metas_own_names_work(tmp_path: Path) -> None:
    """A top-level key is a field of CodegenMeta: ``field`` and ``UNSET`` are names its
    class body uses, spelled otherwise for these keys."""
    root = copy_repo(tmp_path / "repo")
    for index, key in enumerate(("field", "UNSET", "document", "meta")):
        _plan_key_row(root, index, key)
    for command in ("generate", "check"):
        result = run_specgen_here(root, command)
        assert result.returncode == ExitStatus.OK, result.stderr

    def round_trip() -> str:
        import shardplan
        from shardplan.table.spec import ShardingPlan

        plan = ShardingPlan(probe_0="a", probe_1=1, probe_2=True, probe_3=2.5)  # type: ignore[call-arg]
        path = tmp_path / "codegen_meta.json"
        shardplan.dump_meta(shardplan.freeze_plan(plan), path)
        assert path.read_text().count('"field": "a"') == 1
        assert shardplan.rebuild_plan(shardplan.load_meta(path)) == plan
        return "ok"

    assert call_in(root, round_trip) == "ok"


def test_a_plan_key_python_keeps_exits_2_and_writes_nothing(repo_copy: Path) -> None:
    others = next(n for n, f in enumerate(PLAN_FIELDS, start=1) if f.group == GROUP_OTHERS)
    keys = ("__init__", "__dict__", "__class__.key")
    for index, key in enumerate(keys):
        _plan_key_row(repo_copy, index, key)
    before = snapshot(repo_copy / "generated")
    for command in ("generate", "check"):
        result = run_specgen_here(repo_copy, command)
        assert result.returncode == ExitStatus.BAD_INPUT, result.stderr
        for index, key in enumerate(keys):
            assert (
                f"table 'plan' row {others + index} (probe_{index}): key {key!r} names a field "
                "of CodegenMeta and begins with two underscores, which Python keeps"
            ) in result.stderr, result.stderr
    assert snapshot(repo_copy / "generated") == before


def test_a_generated_module_imports_exactly_the_names_its_code_calls() -> None:
    """The import list is read from the module's code: a name in a docstring, a comment or a
    string literal is no call, and a builtin is bound only where the code calls it."""
    from generator.blocks import module_imports

    defined = frozenset({"freeze_x", "rebuild_y", "Replicate", "UNSET_TOO"})
    body = (
        "def f(__value):\n"
        '    """__rebuild_y, in a docstring."""\n'
        "    # __len in a comment\n"
        "    return __freeze_x(__value) or __Replicate(__type(__value)) or __UNSET or '__dict'\n"
    )
    assert module_imports(defined, body) == {
        "functions": ["Replicate", "freeze_x"],
        "shapes": ["UNSET"],
        "builtins": ["type"],
    }


def test_every_part_kinds_j2_prints_is_a_part_of_a_block() -> None:
    """A row's block holds every part of generator.blocks.PARTS, "" where the row has none,
    and nothing else: a part kinds.j2 prints that is not in PARTS is StrictUndefined's error."""
    from generator.blocks import PARTS

    parts = set(re.findall(r"\bb\.(\w+)", (REPO / "templates/kinds.j2").read_text()))
    assert parts == PARTS