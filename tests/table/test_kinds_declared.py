"""A kind is one record (issues 23, 43): a typed ``Record`` in ``KINDS`` of
shardplan/table/kinds.py, whose functions ``freeze_<record>`` / ``rebuild_<record>`` live
in shardplan/convert/kinds.py; the kind names rows use are one mapping (``KIND_NAMES``):
for each step a name serves, a record plus the write condition (freeze) or absent value
(rebuild) it says. The templates only print the blocks the generator decides. A kind
cannot be half-added: each missing piece, and a row naming such a kind, exits 2 naming
what is missing, and leaves generated/ as it was.

The generator runs in this process (tests.helpers.run_specgen_here).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shardplan.convert import kinds
from shardplan.table.kinds import KIND_NAMES, KINDS, Written
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.additions import set_row_argument
from tests.helpers import REPO, replace_once, run_specgen_here, snapshot

FUNCTIONS = "shardplan/convert/kinds.py"
DATA = "shardplan/table/kinds.py"
MACROS = "templates/kinds.j2"
TABLE = "shardplan/table/spec_fields.py"


def _fresh_kind() -> str:
    """README's example name, or the next free one where the kinds module already has it
    (a user who followed README's "Adding a kind" literally)."""
    taken = {*KINDS, *KIND_NAMES, *dir(kinds)}
    n = 1
    while (name := "int_nonzero" if n == 1 else f"int_nonzero_{n}") in taken or (
        f"freeze_{name}" in taken
    ):
        n += 1
    return name


NEW_KIND = _fresh_kind()


def k(text: str) -> str:
    """``text`` with README's kind name replaced by this module's new kind."""
    return text.replace("int_nonzero", NEW_KIND)


FUNCTION = k(
    "\n\ndef freeze_int_nonzero(value: Any, path: str) -> int:\n"
    '    """A non-zero int."""\n'
    "    return freeze_int(value, path)\n"
)
# The new kind's record: it reads back through the int record's rebuild.
RECORD = k(
    '"int_nonzero": Record(shows="integer", schema={"type": "integer"}, held_as="int", '
    'reads_back=("int",))'
)
# The new kind's name: what a row naming it means, for the one step it serves.
NAME = k('"int_nonzero": KindName(freeze=Writes("int_nonzero", Written.TRUTHY))')
EP_SIZE_ROW = 'SpecField("_ep_size", "ep_size", GROUP_INJECTIONS, "int_truthy", "int_truthy",'


def declare(root: Path, name: str, line: str) -> None:
    """Add ``line`` (one entry) to the dict ``name`` of the kinds module, wherever its last
    entry is: the test does not lean on the text of any kind's line."""
    path = root / DATA
    text = path.read_text()
    opening = re.search(rf"^{name}: dict\[[^\n]*\] = {{\n", text, re.M)
    assert opening, f"test setup: no {name} dict in {DATA}"
    path.write_text(text[: opening.end()] + f"    {line},\n" + text[opening.end() :])


def append(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.write_text(path.read_text() + text)


replace = replace_once


def freeze_ep_size_with_int_nonzero(root: Path, written: str = "") -> None:
    """The table's _ep_size row, frozen by the new kind name int_nonzero (its presence the
    name's, unless ``written`` says the row's own)."""
    new = EP_SIZE_ROW.replace(
        '"int_truthy", "int_truthy",', k(f'"int_nonzero", "int_truthy", {written}')
    )
    replace(root, TABLE, EP_SIZE_ROW, new)


def refused(root: Path, *fragments: str) -> None:
    before = snapshot(root / "generated")
    result = run_specgen_here(root, "generate")
    assert result.returncode == 2, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(root / "generated") == before


def test_a_record_without_its_function_exits_2(repo_copy: Path) -> None:
    declare(repo_copy, "KINDS", RECORD)
    refused(repo_copy, k("KINDS['int_nonzero'] has no function: write freeze_int_nonzero"))


def test_a_function_without_its_record_exits_2(repo_copy: Path) -> None:
    append(repo_copy, FUNCTIONS, FUNCTION)
    refused(repo_copy, k("function freeze_int_nonzero has no record in KINDS"))


def test_a_record_missing_a_field_exits_2_naming_its_line(repo_copy: Path) -> None:
    append(repo_copy, FUNCTIONS, FUNCTION)
    declare(repo_copy, "KINDS", RECORD.replace(', held_as="int"', ""))
    line = (repo_copy / DATA).read_text().splitlines().index(
        f"    {RECORD},".replace(', held_as="int"', "")
    ) + 1
    refused(repo_copy, f"{DATA}:{line}: cannot import the kinds module", "argument: 'held_as'")


def test_a_name_whose_record_does_not_exist_exits_2(repo_copy: Path) -> None:
    declare(repo_copy, "KIND_NAMES", NAME)
    refused(
        repo_copy,
        k("KIND_NAMES['int_nonzero']: freeze record 'int_nonzero' has no freeze_int_nonzero"),
    )


def test_a_record_no_kind_name_stands_for_exits_2(repo_copy: Path) -> None:
    """Rows use only the names: a record none of them stands for could never be used."""
    append(repo_copy, FUNCTIONS, FUNCTION)
    declare(repo_copy, "KINDS", RECORD)
    refused(repo_copy, k("KINDS['int_nonzero'] has no kind name: name it in KIND_NAMES"))


def test_a_record_name_is_no_kind_name_a_row_may_use(repo_copy: Path) -> None:
    """One vocabulary: a row naming a record ('names') rather than a kind name is refused,
    listing the names."""
    record = next(record for record in KINDS if record not in KIND_NAMES)
    row = next(row for row in SPEC_FIELDS if row.freeze)  # found in the table, not its text
    set_row_argument(repo_copy, TABLE, "SPEC_FIELDS", row.name, 3, repr(record))
    names = sorted(name for name, kind in KIND_NAMES.items() if kind.freeze)
    refused(repo_copy, f"unknown freeze kind {record!r}", f"Known kinds: {', '.join(names)}.")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            k('"int_nonzero": KindName(freeze=Writes("int", "sometimes"))'),
            "'sometimes' is not a valid Written",
        ),
        (k('"int_nonzero": KindName()'), k("KIND_NAMES['int_nonzero'] serves no step")),
        (
            k('"int_nonzero": KindName(rebuild=Reads("int", "zero"))'),
            k("KIND_NAMES['int_nonzero']: the absent value 'zero' is not a Python literal"),
        ),
    ],
    ids=["no-write-condition", "no-step", "absent-not-a-literal"],
)
def test_a_kind_name_that_does_not_say_its_meaning_exits_2(
    repo_copy: Path, name: str, message: str
) -> None:
    declare(repo_copy, "KIND_NAMES", name)
    refused(repo_copy, message)


def test_a_row_naming_a_kind_that_exists_nowhere_exits_2(repo_copy: Path) -> None:
    freeze_ep_size_with_int_nonzero(repo_copy)
    refused(repo_copy, k("unknown freeze kind 'int_nonzero'"))


def test_a_row_with_a_presence_that_is_no_condition_exits_2_naming_it(repo_copy: Path) -> None:
    append(repo_copy, FUNCTIONS, FUNCTION)
    declare(repo_copy, "KINDS", RECORD)
    declare(repo_copy, "KIND_NAMES", NAME)
    freeze_ep_size_with_int_nonzero(repo_copy, 'written="sometimes", ')
    refused(repo_copy, "table row", "(_ep_size): written='sometimes' must be one of")


def test_a_complete_new_kind_is_one_record_and_its_function(repo_copy: Path) -> None:
    """The README recipe: the function, its record and its kind name; a row uses the
    name; the templates print the block."""
    append(repo_copy, FUNCTIONS, FUNCTION)
    declare(repo_copy, "KINDS", RECORD)
    declare(repo_copy, "KIND_NAMES", NAME)
    freeze_ep_size_with_int_nonzero(repo_copy)
    result = run_specgen_here(repo_copy, "generate")
    assert result.returncode == 0, result.stderr
    freeze = (repo_copy / "generated" / "freeze.py").read_text()
    assert k('__freeze_int_nonzero(__value, __module_path(__fqn) + "._ep_size")') in freeze, freeze[
        -800:
    ]
    assert k("# _ep_size: int_nonzero, written when truthy\n") in freeze
    # The _ep_size block alone (a user's row may follow it): int_nonzero reads back as int.
    block = freeze.partition("# _ep_size")[2].split("\n        # ")[0]
    assert "freeze_" in block and "admit(" not in block


# ------------------------------------------------------------------ said once


def test_the_kinds_are_declared_once_and_no_template_names_one() -> None:
    """Only shardplan/table/kinds.py states the records and the names' presets; the
    templates print what the generator decides and name no kind."""
    sources = {
        path.relative_to(REPO).as_posix(): path.read_text()
        for folder in ("shardplan", "generator", "templates")
        for path in (REPO / folder).rglob("*")
        if path.suffix in (".py", ".j2") and "__pycache__" not in path.parts
    }
    for name in ("KINDS", "KIND_NAMES"):
        defining = [p for p, text in sources.items() if re.search(rf"^{name}\b.*=", text, re.M)]
        assert defining == [DATA], (name, defining)
    templates = "".join(text for path, text in sources.items() if path.endswith(".j2"))
    for kind in (*KINDS, *KIND_NAMES):
        assert not re.search(rf"\b{kind}\(", templates), kind
        assert f'"{kind}"' not in templates, kind


def test_the_records_cover_exactly_the_kind_functions() -> None:
    tree = ast.parse((REPO / FUNCTIONS).read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    prefixes = ("freeze_", "rebuild_", "check_")
    steps = {f.partition("_")[2] for f in functions if f.startswith(prefixes)}
    assert steps == set(KINDS)


def test_a_name_that_differs_only_by_presence_is_the_same_record() -> None:
    """The seed's names stand for 12 records: bool_default_true and _false are bool
    with another absent value; name_list, attr_list and opt_name_list are names written
    when truthy, not None and always; every name states its write condition."""
    true, false = KIND_NAMES["bool_default_true"].rebuild, KIND_NAMES["bool_default_false"].rebuild
    assert true and false and (true.record, false.record) == ("bool", "bool")
    assert (true.absent, false.absent) == ("True", "False")
    lists = [KIND_NAMES[n].freeze for n in ("name_list", "attr_list", "opt_name_list")]
    assert {w.record for w in lists if w} == {"names"}
    assert [w.written for w in lists if w] == [Written.TRUTHY, Written.NOT_NONE, Written.ALWAYS]
    assert KIND_NAMES["plain"].freeze == KIND_NAMES["scalar"].freeze
    assert len(KINDS) < len(KIND_NAMES)
    conditions = {kind.freeze.written for kind in KIND_NAMES.values() if kind.freeze}
    assert conditions == set(Written)  # every condition has a name that says it


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'rebuild_shortcut=Shortcut(call="common_string_tuple"),',
            'rebuild_shortcut=Shortcut(call="common_tuple_of_nothing"),',
            "KINDS['name_tuple']: rebuild_shortcut call='common_tuple_of_nothing' is no function "
            "the module defines",
        ),
        (
            'held_as="int | bool",',
            'held_as="int | bool",\n        freeze_shortcut=Shortcut(exactly=(int,)),',
            "KINDS['int_or_true']: freeze_shortcut, but there is no freeze_int_or_true",
        ),
        (
            'WriteShortcut("writable_table", "live_tables_writable")',
            'WriteShortcut("writable_table", "no_such_check")',
            "KINDS['placements']: write_shortcut check='no_such_check' is no function the module "
            "defines",
        ),
    ],
    ids=["an undefined function", "a step the record lacks", "a write check undefined"],
)
def test_a_bad_shortcut_declaration_exits_2_naming_it(
    repo_copy: Path, old: str, new: str, message: str
) -> None:
    replace(repo_copy, DATA, old, new)
    refused(repo_copy, message)


def test_a_macro_that_fails_to_render_exits_2_without_a_traceback(repo_copy: Path) -> None:
    """A layout macro reading a name the templates lack: one message naming the template,
    exit 2."""
    replace(
        repo_copy,
        MACROS,
        "# {{ b.comment }}\n{% if b.source %}",
        "# {{ no_such_global[0] }}\n{% if b.source %}",
    )
    refused(repo_copy, "templates/kinds.j2")
