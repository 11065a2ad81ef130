"""A kind is defined once, in one place (issues 11, 17): its function and its lines in
WRITTEN_WHEN / ABSENT / READS_BACK / SCHEMA in shardplan/convert/kinds.py. It needs no
macro: templates/kinds.j2 lays every kind out, and a macro of its own overrides that only
where a kind's code is genuinely special. A kind cannot be half-added: each missing piece,
and a row naming such a kind, exits 2 naming what is missing, and leaves generated/ as it was.

The generator runs in this process (tests.helpers.run_specgen_here). Real processes: only
the README steps (`make codegen`, then pytest in the copy), which are what a developer runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shardplan.convert import kinds
from tests.helpers import REPO, replace_once, run_specgen_here, snapshot

KINDS = "shardplan/convert/kinds.py"
MACROS = "templates/kinds.j2"
TABLE = "shardplan/table/spec_fields.py"
MACRO = "{% macro freeze_int_nonzero(f, out, at) %}{{ freeze(f, out, at) }}{% endmacro %}\n"
FUNCTION = (
    "\n\ndef freeze_int_nonzero(value: Any, path: str) -> int:\n"
    '    """A non-zero int."""\n'
    "    return freeze_int_truthy(value, path)\n"
)
# An override of the generic layout for an existing kind, and how the generic one is reached.
DICT_COPY_MACRO = "{%% macro freeze_dict_copy(f, out, at) %%}%s{%% endmacro %%}\n"
EP_SIZE_ROW = 'SpecField("_ep_size", "ep_size", GROUP_INJECTIONS, "int_truthy", "int_truthy",'


def declare(root: Path, name: str, line: str) -> None:
    """Add ``line`` (one entry) to the dict literal ``name`` of the kinds module, wherever
    its last entry is: the test does not lean on the text of any kind's line."""
    path = root / KINDS
    text = path.read_text()
    opening = re.search(rf"^{name}: dict\[[^\n]*\] = {{\n", text, re.M)
    assert opening, f"test setup: no {name} literal in {KINDS}"
    path.write_text(text[: opening.end()] + f"    {line},\n" + text[opening.end() :])


def append(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.write_text(path.read_text() + text)


replace = replace_once


def freeze_ep_size_with_int_nonzero(root: Path) -> None:
    """The table's _ep_size row, frozen by the new kind int_nonzero."""
    new = EP_SIZE_ROW.replace('"int_truthy", "int_truthy"', '"int_nonzero", "int_truthy"')
    replace(root, TABLE, EP_SIZE_ROW, new)


def refused(root: Path, *fragments: str) -> None:
    before = snapshot(root / "generated")
    result = run_specgen_here(root, "generate")
    assert result.returncode == 2, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(root / "generated") == before


def test_a_macro_without_its_function_exits_2(repo_copy: Path) -> None:
    append(repo_copy, MACROS, MACRO)
    refused(repo_copy, "macro freeze_int_nonzero has no kind in shardplan/convert/kinds.py")


def test_a_row_naming_a_kind_with_only_a_macro_exits_2(repo_copy: Path) -> None:
    """The issue's case: a macro, a row using it, and no function anywhere."""
    append(repo_copy, MACROS, MACRO)
    freeze_ep_size_with_int_nonzero(repo_copy)
    refused(repo_copy, "macro freeze_int_nonzero has no kind in shardplan/convert/kinds.py")


def test_a_rebuild_kind_without_its_schema_fragment_exits_2(repo_copy: Path) -> None:
    append(
        repo_copy,
        KINDS,
        "\n\ndef rebuild_int_nonzero(value: Any, path: str) -> int:\n"
        '    """A non-zero int."""\n'
        "    return rebuild_int_truthy(value, path)\n",
    )
    declare(repo_copy, "ABSENT", '"int_nonzero": "0"')
    refused(repo_copy, "rebuild kind 'int_nonzero' has no SCHEMA line")


def test_a_function_without_its_declaration_exits_2(repo_copy: Path) -> None:
    append(repo_copy, KINDS, FUNCTION)
    refused(repo_copy, "function freeze_int_nonzero has no line in WRITTEN_WHEN")


def test_a_declaration_without_its_function_exits_2(repo_copy: Path) -> None:
    declare(repo_copy, "WRITTEN_WHEN", '"int_nonzero": "truthy"')
    refused(repo_copy, "freeze kind 'int_nonzero' is declared in WRITTEN_WHEN but has no function")


def test_a_row_naming_a_kind_that_exists_nowhere_exits_2(repo_copy: Path) -> None:
    freeze_ep_size_with_int_nonzero(repo_copy)
    refused(repo_copy, "unknown freeze kind 'int_nonzero'")


def test_a_macro_calling_a_name_the_kinds_module_lacks_exits_2_naming_the_row(
    repo_copy: Path,
) -> None:
    body = "# {{ f.name }}\n{{ out }}[{{ f.key | pyrepr }}] = copy_of(spec.{{ f.name }})"
    append(repo_copy, MACROS, DICT_COPY_MACRO % body)
    refused(
        repo_copy,
        "(_ep_stack): its freeze block (in templates/kinds.j2) uses "
        "'copy_of', which shardplan/convert/kinds.py does not define",
    )


def test_a_complete_new_kind_generates_with_no_macro(repo_copy: Path) -> None:
    """The README recipe: the function and its declarations, in the kinds module alone; a
    row uses it, and the generic layout of templates/kinds.j2 calls it."""
    append(repo_copy, KINDS, FUNCTION)
    declare(repo_copy, "WRITTEN_WHEN", '"int_nonzero": "truthy"')
    declare(repo_copy, "READS_BACK", '"int_nonzero": ("int_truthy",)')
    freeze_ep_size_with_int_nonzero(repo_copy)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    freeze = (repo_copy / "generated" / "freeze.py").read_text()
    assert 'freeze_int_nonzero(value, module_path(fqn) + "._ep_size")' in freeze, freeze[-800:]


# ------------------------------------------------------------------ said once


def test_each_kind_s_write_condition_and_absent_value_are_stated_once() -> None:
    """Only shardplan/convert/kinds.py states them; the templates and the reference read them."""
    sources = {
        path.relative_to(REPO).as_posix(): path.read_text()
        for folder in ("shardplan", "generator", "templates")
        for path in (REPO / folder).rglob("*")
        if path.suffix in (".py", ".j2") and "__pycache__" not in path.parts
    }
    for name in ("WRITTEN_WHEN", "ABSENT", "READS_BACK", "SCHEMA"):
        defining = [p for p, text in sources.items() if re.search(rf"^{name}\b.*=", text, re.M)]
        assert defining == [KINDS], (name, defining)
    # No template restates a condition or a default literal for a kind by name.
    for kind in kinds.ABSENT:
        assert f'"{kind}": "' not in sources[MACROS]


def test_the_declarations_cover_exactly_the_kind_functions() -> None:
    tree = ast.parse((REPO / KINDS).read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {f"freeze_{k}" for k in kinds.WRITTEN_WHEN} == {
        f for f in functions if f.startswith("freeze_")
    }
    assert {f"rebuild_{k}" for k in kinds.ABSENT} == {
        f for f in functions if f.startswith("rebuild_")
    }


@pytest.mark.parametrize("kind", sorted(kinds.ABSENT))
def test_absent_value_is_a_fresh_python_literal(kind: str) -> None:
    first, second = kinds.absent_value(kind), kinds.absent_value(kind)
    assert first == second and repr(first) == kinds.ABSENT[kind]
    if isinstance(first, (dict, list)):  # mutable: each spec gets its own
        assert first is not second


# ------------------------------------------------------------------ shortcuts


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '"scalar": ("is", "bool", "str"),',
            '"scalar": ("is", "list"),',
            "FREEZE_SHORTCUTS['scalar']: ('is', ...) takes type names among",
        ),
        (
            '"tuple_empty": ("call", "common_string_tuple"),',
            '"tuple_empty": ("call", "common_tuple_of_nothing"),',
            "REBUILD_SHORTCUTS['tuple_empty']: ('call', name) needs a function this module defines",
        ),
        (
            '"plain": ("is", "str", "bool"),',
            '"plain": ("is", "str", "bool"),\n    "no_such_kind": ("is", "str"),',
            "FREEZE_SHORTCUTS['no_such_kind']: no such freeze kind in WRITTEN_WHEN",
        ),
    ],
    ids=["a type JSON lacks", "an undefined function", "an undeclared kind"],
)
def test_a_bad_shortcut_declaration_exits_2_naming_it(
    repo_copy: Path, old: str, new: str, message: str
) -> None:
    replace(repo_copy, KINDS, old, new)
    refused(repo_copy, message)


def test_a_macro_that_fails_to_render_exits_2_without_a_traceback(repo_copy: Path) -> None:
    """A macro reading a name the templates lack fails while the generator checks the
    calls it renders: one message naming the template, exit 2."""
    append(repo_copy, MACROS, DICT_COPY_MACRO % "{{ no_such_global[0] }}")
    refused(repo_copy, "templates/kinds.j2")


def test_a_kind_s_own_macro_overrides_the_generic_layout(repo_copy: Path) -> None:
    """A macro named for a declared kind is what the generator picks for its rows."""
    body = "# {{ f.name }}: by its own macro\n{{ freeze(f, out, at) }}"
    append(repo_copy, MACROS, DICT_COPY_MACRO % body)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    freeze = (repo_copy / "generated" / "freeze.py").read_text()
    assert "# _ep_stack: by its own macro" in freeze
    assert "by its own macro" not in (REPO / "generated" / "freeze.py").read_text()


# ------------------------------------------------------------------ README "A new kind"


def test_readme_steps_for_a_new_kind_used_by_a_new_field_leave_the_tests_passing(
    tmp_path: Path,
) -> None:
    """README "A new kind", followed as written in a copy, for a new field that uses it:
    the kinds module (function and declarations) and the strategies' pool, then the
    field and its row, `make codegen`, and the table-sensitive tests pass unedited."""
    from tests.helpers import assert_tests_pass_in, copy_repo_with_tests, make_codegen
    from tests.test_add_a_field import _table_sensitive_tests

    root = copy_repo_with_tests(tmp_path)
    # The kind, in the kinds module alone: its function with the others, then its lines.
    kinds_file = root / KINDS
    section = "# ------------------------------------------------------------- what each kind means"
    text = kinds_file.read_text()
    assert text.count(section) == 1, "test setup: the declarations' section header moved"
    kinds_file.write_text(text.replace(section, FUNCTION.strip("\n") + "\n\n\n" + section))
    declare(root, "WRITTEN_WHEN", '"int_nonzero": "truthy"')
    declare(root, "READS_BACK", '"int_nonzero": ("int_truthy",)')
    # Its pool of live values, for the properties.
    declare_pool = root / "tests" / "strategies.py"
    text = declare_pool.read_text()
    anchor = "POOLS: dict[str, Callable[[Any], Any]] = {\n"
    assert text.count(anchor) == 1
    declare_pool.write_text(
        text.replace(anchor, anchor + '    "int_nonzero": lambda r: r.randrange(4),\n')
    )
    # A new field that uses it.
    spec = root / "shardplan" / "table" / "spec.py"
    spec.write_text(
        spec.read_text().replace(
            "    _ep_size: int = 0\n",
            "    _ep_size: int = 0\n    warmup_steps: int | None = None\n",
        )
    )
    replace(
        root,
        TABLE,
        '              doc="The expert-parallel degree; absent means 0, no expert parallelism."),\n',
        '              doc="The expert-parallel degree; absent means 0, no expert parallelism."),\n'
        '    SpecField("warmup_steps", "warmup_steps", GROUP_INJECTIONS, "int_nonzero",'
        ' "int_truthy", doc="Steps before the injection takes effect."),\n',
    )
    make = make_codegen(root)
    assert make.returncode == 0, make.stdout + make.stderr
    freeze = (root / "generated" / "freeze.py").read_text()
    assert 'freeze_int_nonzero(value, module_path(fqn) + ".warmup_steps")' in freeze
    assert_tests_pass_in(root, _table_sensitive_tests())
