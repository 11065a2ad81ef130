"""What a user adds to the tables, made as README says, in a copy of the repository.

The README's weekly flow is "add a field (or a kind) as the steps say, `make codegen`,
`make test` passes". The tests that check that promise (tests/test_weekly_flow.py) make
these additions in a copy; so do the tests that need a table unlike the product's. Every
place an edit goes is found in the copy's own files (the row of a field, the last row of a
group, the class body), never assumed from today's table: the product table may already
hold a user's rows of any kind, group and position.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SPEC_MODULE = "shardplan/table/spec.py"
SPEC_TABLE = "shardplan/table/spec_fields.py"
PLAN_TABLE = "shardplan/table/plan_fields.py"
KINDS_MODULE = "shardplan/convert/kinds.py"
STRATEGIES = "tests/strategies.py"
DECISIONS = "shardplan/table/apply_decisions.py"
TABLES = {
    "ModuleShardingSpec": (SPEC_TABLE, "SPEC_FIELDS"),
    "ShardingPlan": (PLAN_TABLE, "PLAN_FIELDS"),
}
DECISION_TABLES = {"ModuleShardingSpec": "SPEC", "ShardingPlan": "PLAN"}


@dataclass(frozen=True)
class Row:
    """A row of a table module, as its source holds it."""

    name: str
    group: str  # the group argument's source text: GROUP_PARAM_PLAN, "plan", ...
    first_line: int  # 1-based, inclusive
    last_line: int


def rows_in(root: Path, table_file: str, variable: str) -> list[Row]:
    """The ``SpecField(...)`` rows of ``variable`` in the copy's ``table_file``, in order."""
    source = (root / table_file).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == variable for t in targets):
                assert isinstance(node.value, ast.Tuple), f"{table_file}: {variable} is no tuple"
                return [_row(call, source) for call in node.value.elts]  # type: ignore[arg-type]
    raise AssertionError(f"test setup: no {variable} in {table_file}")


def _row(call: ast.Call, source: str) -> Row:
    name, group = call.args[0], call.args[2]
    assert isinstance(name, ast.Constant), "test setup: a row's name is not a literal"
    assert call.end_lineno is not None
    return Row(
        name.value, ast.get_source_segment(source, group) or "", call.lineno, call.end_lineno
    )


def field_names(root: Path, cls: str) -> list[str]:
    """The fields of dataclass ``cls`` in the copy's spec module, in order."""
    return [name for name, _ in _class_fields(root, cls)]


def _class_fields(root: Path, cls: str) -> list[tuple[str, int]]:
    """(field name, last line) of each annotated field of ``cls``."""
    tree = ast.parse((root / SPEC_MODULE).read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return [
        (n.target.id, n.end_lineno or n.lineno)
        for n in body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ]


def _insert_lines(path: Path, after_line: int, text: str) -> None:
    """Insert ``text`` (whole lines) after 1-based line ``after_line`` (0: at the top)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:after_line]) + text + "".join(lines[after_line:]))


def fresh_name(root: Path, cls: str, wanted: str) -> str:
    """``wanted``, or ``wanted_2``, ... : a field name the copy's ``cls`` does not have yet."""
    taken = set(field_names(root, cls))
    name, n = wanted, 1
    while name in taken:
        n += 1
        name = f"{wanted}_{n}"
    return name


@dataclass(frozen=True)
class NewField:
    """A field added as README's steps say: the dataclass field, its row, its decision.

    ``after`` places both the field and the row: ``None`` is the first row of the table;
    otherwise a function of the copy's rows giving the row to follow.
    """

    cls: str  # "ModuleShardingSpec" or "ShardingPlan"
    wanted: str  # the name, unless the copy already has a field of that name
    annotation: str  # "bool | None = None"
    row: str  # the row with {name} for the name: 'SpecField("{name}", "{name}", ...)'
    after: Callable[[list[Row]], Row] | None
    decision: str = "a setting no apply reads"

    def add(self, root: Path) -> str:
        """Make the three edits in ``root``; return the field's name."""
        name = fresh_name(root, self.cls, self.wanted)
        table_file, variable = TABLES[self.cls]
        rows = rows_in(root, table_file, variable)
        follow = None if self.after is None else self.after(rows)
        # Step 1: the dataclass field, beside the field of the row it follows.
        fields = _class_fields(root, self.cls)
        after_field = (
            _first_line_of_field(root, self.cls, fields[0][0]) - 1
            if follow is None
            else dict(fields)[follow.name]
        )
        _insert_lines(root / SPEC_MODULE, after_field, f"    {name}: {self.annotation}\n")
        # Step 2: the row, where it sits in the frozen key order.
        row = "    " + self.row.format(name=name) + ",\n"
        after_line = rows[0].first_line - 1 if follow is None else follow.last_line
        _insert_lines(root / table_file, after_line, row)
        # Step 3: what apply_plan does with it.
        add_apply_decision(root, DECISION_TABLES[self.cls], name, self.decision)
        return name


def _first_line_of_field(root: Path, cls: str, field: str) -> int:
    tree = ast.parse((root / SPEC_MODULE).read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(
        n.lineno
        for n in body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == field
    )


def last_of_group(group: str) -> Callable[[list[Row]], Row]:
    """The last row whose group argument is ``group`` (its source text)."""

    def pick(rows: list[Row]) -> Row:
        return [row for row in rows if row.group == group][-1]

    return pick


def add_apply_decision(root: Path, table: str, name: str, why: str) -> None:
    """README's step "say what apply_plan does with it": ``name`` is not an apply input of
    ``table`` ("SPEC" or "PLAN"), for ``why``."""
    path = root / DECISIONS
    anchor = f"{table}_DECISIONS: dict[str, tuple[str, str]] = {{\n"
    text = path.read_text()
    assert text.count(anchor) == 1, f"test setup: {anchor!r} moved in {path}"
    path.write_text(text.replace(anchor, f'{anchor}    "{name}": (NOT_APPLY_INPUT, "{why}"),\n'))


# The ordinary additions of issue 35's acceptance, each unlike README's own example.
FLAG_AFTER_PARAM_PLAN = NewField(
    "ModuleShardingSpec",
    "fuse_norm",
    "bool | None = None",
    'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "scalar", "opt_scalar", '
    'doc="Whether the norm is fused into the next matmul.")',
    last_of_group("GROUP_PARAM_PLAN"),
)
COUNT_AFTER_INJECTIONS = NewField(
    "ModuleShardingSpec",
    "micro_batches",
    "int = 0",
    'SpecField("{name}", "{name}", GROUP_INJECTIONS, "int_truthy", "int_truthy", '
    'doc="Micro-batches the injection splits its input into; absent means 0.")',
    last_of_group("GROUP_INJECTIONS"),
)
LABEL_FIRST = NewField(
    "ModuleShardingSpec",
    "label",
    "str | None = None",
    'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "scalar", "opt_scalar", '
    'doc="A name the planner gives the module, for people reading the artifact.")',
    None,
)
# README's plan-level example, with its non-None default.
PIPELINE_STAGES = NewField(
    "ShardingPlan",
    "pipeline_stages",
    "int = 1",
    'SpecField("{name}", "{name}", GROUP_PLAN, "scalar", "opt_scalar", '
    'doc="How many pipeline stages the plan was made for.")',
    last_of_group("GROUP_PLAN"),
    decision="this apply runs one stage",
)


def kind_names(root: Path) -> set[str]:
    """Every name defined at the top level of the copy's kinds module, or a key of a dict
    literal there: a new kind's name must be none of them."""
    tree = ast.parse((root / KINDS_MODULE).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Dict):
            names |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
    return names


def add_kind(root: Path, wanted: str = "int_nonzero") -> tuple[str, str]:
    """README's "A new kind", as it says: the freeze function among the others, its record
    in ``KINDS``, its pool in the strategies, then a field of the spec that uses it after
    the last injections row. Returns (kind name, field name)."""
    taken = kind_names(root)
    kind, n = wanted, 1
    while kind in taken or f"freeze_{kind}" in taken:
        n += 1
        kind = f"{wanted}_{n}"
    path = root / KINDS_MODULE
    text = path.read_text()
    function = (
        f"def freeze_{kind}(value: Any, path: str) -> int:\n"
        '    """A non-zero int, written as it is."""\n'
        "    if type(value) is not int or value == 0:\n"
        '        raise FreezeError(path, f"expected a non-zero int, got {described(value)}")\n'
        "    return value\n\n\n"
    )
    anchor = re.search(r"^def freeze_", text, re.M)
    assert anchor, f"test setup: no freeze function in {KINDS_MODULE}"
    text = text[: anchor.start()] + function + text[anchor.start() :]
    opening = re.search(r"^KINDS: dict\[[^\n]*\] = \{\n", text, re.M)
    assert opening, f"test setup: no KINDS literal in {KINDS_MODULE}"
    record = (
        f'    "{kind}": {{"reads_back": ("int",), "shows": "integer", '
        '"schema": {"type": "integer"}, "held_as": "int"},\n'
    )
    path.write_text(text[: opening.end()] + record + text[opening.end() :])
    pools = root / STRATEGIES
    text = pools.read_text()
    anchor_pool = "POOLS: dict[str, Callable[[Any], Any]] = {\n"
    assert text.count(anchor_pool) == 1, f"test setup: no POOLS literal in {STRATEGIES}"
    pools.write_text(
        text.replace(anchor_pool, anchor_pool + f'    "{kind}": lambda r: r.randrange(1, 5),\n')
    )
    new = NewField(
        "ModuleShardingSpec",
        "warmup_steps",
        "int | None = None",
        'SpecField("{name}", "{name}", GROUP_INJECTIONS, "%s", "int", '  # noqa: UP031
        'written="truthy", doc="Steps before the injection takes effect.")' % kind,
        last_of_group("GROUP_INJECTIONS"),
    )
    return kind, new.add(root)


# Beyond the issue's list: the other groups and a field set after construction.
SCRATCH_EXEMPT = NewField(
    "ModuleShardingSpec",
    "_scratch",
    "Any = None",
    'SpecField("{name}", "", GROUP_EXEMPT)',
    last_of_group("GROUP_EXEMPT"),
    decision="exempt runtime state: never crosses the artifact",
)
FUSED_AFTER_CONSTRUCTION = NewField(
    "ModuleShardingSpec",
    "_fused_params",
    "tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)",
    'SpecField("{name}", "fused_params", GROUP_PARAM_PLAN, "name_list", "tuple_empty", '
    'post_init=True, doc="Parameters a planner fused after construction.")',
    lambda rows: rows[1],
)
NESTED_PLAN_FLAG = NewField(
    "ShardingPlan",
    "pp_degree",
    "int | None = None",
    'SpecField("{name}", "parallel_dims.{name}", GROUP_PLAN, "scalar", "opt_scalar", '
    'doc="The pipeline-parallel degree the plan was made for.")',
    lambda rows: rows[0],
)

ORDINARY = (FLAG_AFTER_PARAM_PLAN, COUNT_AFTER_INJECTIONS, LABEL_FIRST, PIPELINE_STAGES)
EVERY_FIELD = (*ORDINARY, SCRATCH_EXEMPT, FUSED_AFTER_CONSTRUCTION, NESTED_PLAN_FLAG)

__all__ = [
    "EVERY_FIELD",
    "ORDINARY",
    "NewField",
    "Row",
    "add_apply_decision",
    "add_kind",
    "field_names",
    "rows_in",
]
