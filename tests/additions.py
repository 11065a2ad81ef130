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
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.docblocks import section_blocks

SPEC_MODULE = "shardplan/table/spec.py"
SPEC_TABLE = "shardplan/table/spec_fields.py"
PLAN_TABLE = "shardplan/table/plan_fields.py"
KINDS_MODULE = "shardplan/convert/kinds.py"  # the kinds' functions
KIND_RECORDS = "shardplan/table/kinds.py"  # their records and names, typed
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


def set_row_argument(
    root: Path, table_file: str, variable: str, name: str, position: int, text: str
) -> None:
    """Replace the ``position``-th argument of row ``name`` of ``variable`` in the copy's
    ``table_file`` by the source ``text``: the place is found by parsing the table, so a
    user's row with the same text elsewhere is never touched."""
    path = root / table_file
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Tuple):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if not any(isinstance(t, ast.Name) and t.id == variable for t in targets):
                continue
            for call in node.value.elts:
                assert isinstance(call, ast.Call), f"test setup: {variable} holds no call"
                first = call.args[0]
                if isinstance(first, ast.Constant) and first.value == name:
                    argument = call.args[position]
                    lines = source.splitlines(keepends=True)
                    offset = [0]
                    for line in lines:
                        offset.append(offset[-1] + len(line.encode()))
                    data = source.encode()
                    start = offset[argument.lineno - 1] + argument.col_offset
                    end = offset[argument.end_lineno - 1] + argument.end_col_offset  # type: ignore[operator]
                    path.write_bytes(data[:start] + text.encode() + data[end:])
                    return
    raise AssertionError(f"test setup: no row {name!r} in {variable} of {table_file}")


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
    'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "flag", "flag", '
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
    'SpecField("{name}", "{name}", GROUP_PARAM_PLAN, "str", "str", '
    'doc="A name the planner gives the module, for people reading the artifact.")',
    None,
)


def kind_names(root: Path) -> set[str]:
    """Every name defined at the top level of the copy's kinds modules, or a key of a dict
    literal there: a new kind's name must be none of them."""
    names: set[str] = set()
    for node in (
        n for m in (KINDS_MODULE, KIND_RECORDS) for n in ast.walk(ast.parse((root / m).read_text()))
    ):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Dict):
            names |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
    return names


def _fragments(root: Path, heading: str) -> list[tuple[str, str, str]]:
    """(file, literal, code) of each ``fragment of FILE [in LITERAL]`` block under README's
    ``## heading``: ``LITERAL`` names the dict the entry goes into, where the marker says."""
    found = []
    for block in section_blocks(root / "README.md", heading):
        if block.marker.startswith("fragment of "):
            file, _, literal = block.marker.removeprefix("fragment of ").partition(" in ")
            found.append((file.strip(), literal.strip(), block.code))
    return found


def _indented(code: str) -> str:
    """A fragment as lines of a table or dict literal: four spaces in, a comma after."""
    code = code.strip().removesuffix(",")
    return "".join(f"    {line}\n" for line in (code + ",").splitlines())


def _after_line(path: Path, pattern: str) -> int:
    """The 1-based number of the first line of ``path`` matching ``pattern``."""
    lines = path.read_text().splitlines()
    found = [n for n, line in enumerate(lines, start=1) if re.search(pattern, line)]
    assert found, f"test setup: no line of {path} matches {pattern!r}"
    return found[0]


@dataclass(frozen=True)
class ReadmeSteps:
    """One of README's worked examples ("Adding a spec field", "Adding a plan-level field",
    "Adding a kind"), followed as it is written: each of its fragments goes into the file it
    names, where the prose says (``after``: the row whose field and row it follows). Where
    the copy already has README's names (a user who followed the steps literally), the
    same steps are followed under the next free names."""

    heading: str
    cls: str
    after: str  # the field (and row) the new field and row follow, as README's prose says
    annotation: str = ""  # the field's type and default where the prose gives it, not a fragment

    def add(self, root: Path) -> str:
        """Follow the steps in ``root``; return the new field's name."""
        fragments = _fragments(root, self.heading)
        table_file, variable = TABLES[self.cls]
        row = next(code for file, _, code in fragments if file == table_file)
        wanted = re.match(r'SpecField\("(\w+)"', row.strip())
        assert wanted, f"test setup: README's {self.heading} row names no field"
        renames = {wanted[1]: fresh_name(root, self.cls, wanted[1])}
        kinds = [
            re.match(r'"(\w+)": \{', code.strip())
            for f, literal, code in fragments
            if f == KIND_RECORDS and literal == "KINDS"
        ]
        for kind in filter(None, kinds):
            taken = kind_names(root)
            renames[kind[1]] = next(
                name
                for name in (kind[1], *(f"{kind[1]}_{n}" for n in range(2, 99)))
                if name not in taken and f"freeze_{name}" not in taken
            )

        def renamed(code: str) -> str:
            for old, new in renames.items():
                code = re.sub(rf"(?<![A-Za-z0-9]){old}\b", new, code)  # freeze_<kind> too
            return code

        name = renames[wanted[1]]
        for file, literal, code in fragments:
            code = renamed(code)
            path = root / file
            if literal and file.endswith(".md"):  # a row of the table whose header starts so
                header = _after_line(path, rf"^\| {literal} \|")
                _insert_lines(path, header + 1, code.strip() + "\n")
            elif literal:  # an entry of the dict literal the marker names
                _insert_lines(path, _after_line(path, rf"^{literal}: dict\["), _indented(code))
            elif file == SPEC_MODULE:  # the dataclass field, after the one the prose names
                fields = dict(_class_fields(root, self.cls))
                _insert_lines(path, fields[self.after], f"    {code.strip()}\n")
            elif file == table_file:  # the row, after the one the prose names
                rows = rows_in(root, table_file, variable)
                follow = next(r for r in rows if r.name == self.after)
                _insert_lines(path, follow.last_line, _indented(code))
            elif file == DECISIONS:
                table = DECISION_TABLES[self.cls]
                _insert_lines(
                    path, _after_line(path, rf"^{table}_DECISIONS: dict"), _indented(code)
                )
            elif file == KINDS_MODULE and code.lstrip().startswith("def "):  # among the functions
                first = _after_line(path, r"^def freeze_\w+\(") - 1
                _insert_lines(path, first, code.strip() + "\n\n\n")
            else:
                raise AssertionError(f"test setup: README's {self.heading} edits {file}")
        if not any(file == DECISIONS for file, _, _ in fragments):  # said in prose only
            add_apply_decision(root, DECISION_TABLES[self.cls], name, "a setting no apply reads")
        if self.annotation:  # the field the prose describes without a fragment
            _insert_lines(
                root / SPEC_MODULE,
                dict(_class_fields(root, self.cls))[self.after],
                f"    {name}: {self.annotation}\n",
            )
        return name


README_SPEC_FIELD = ReadmeSteps("Adding a spec field", "ModuleShardingSpec", "region_dispatch")
README_PLAN_FIELD = ReadmeSteps("Adding a plan-level field", "ShardingPlan", "loss_parallel")
# README's kind example: its prose gives the field ("warmup_steps: int | None = None after
# _ep_size") and its decision; the fragments give the rest.
README_KIND = ReadmeSteps("Adding a kind", "ModuleShardingSpec", "_ep_size", "int | None = None")


# Typed fields (issue 51): every typed kind name, in both tables and every group, with a
# default other than None and in its "| None" form (None, and another default beside it).
# The annotation decides the type, so the class is the kinds the type law lets each
# annotation take: generate and mypy --strict must both pass with all of them.
_TYPED_KINDS = (
    ("int", "int", ("3", "0")),
    ("float", "float", ("0.5", "2")),
    ("str", "str", ("'auto'", "''")),
    ("flag", "bool", ("True", "False")),
)


# The issue's example of a kind that disagrees with its annotation: generate offers the
# kinds that fit, and each offered pair is among the additions (mypy --strict runs on them).
DISAGREEING = ("bool | None", "scalar", "opt_scalar")


def offered_pairs(annotation: str, freeze: str, rebuild: str) -> list[tuple[str, str]]:
    """The (freeze, rebuild) kind names generate offers for a field ``annotation = None``
    whose row names ``freeze`` and ``rebuild`` (none where the row fits)."""
    import dataclasses as dc

    from generator.kinds import law_problem, resolve
    from shardplan.table import kinds
    from shardplan.table.kinds import field_types
    from shardplan.table.rows import SpecField

    probe = dc.make_dataclass("Probe", [("x", eval(annotation), dc.field(default=None))])
    field, hint = dc.fields(probe)[0], field_types(probe)["x"]
    row = SpecField("x", "x", "param_plan", freeze, rebuild)
    crossing = resolve(kinds, row, field, hint)
    if not (crossing.broken_law or crossing.broken_type):
        return []
    return re.findall(r"'(\w+)' with '(\w+)'", law_problem(kinds, row, field, crossing))


def typed_fields() -> list[NewField]:
    """For each typed kind, ``T = default`` in each table, and ``T | None = None`` and
    ``T | None = default`` in the tables' other groups; and one field a pair of kinds
    generate offers for DISAGREEING."""
    annotation, *kinds = DISAGREEING
    found = [
        NewField(
            "ModuleShardingSpec",
            f"recompute_{n}",
            f"{annotation} = None",
            f'SpecField("{{name}}", "{{name}}", GROUP_PARAM_PLAN, "{freeze}", "{rebuild}", '
            f'doc="Whether the module recomputes its activations ({freeze}, {rebuild}).")',
            last_of_group("GROUP_PARAM_PLAN"),
        )
        for n, (freeze, rebuild) in enumerate(offered_pairs(annotation, *kinds))
    ]
    for k, (kind, annotation, defaults) in enumerate(_TYPED_KINDS):
        # A default other than None in each table, and the "| None" forms beside them;
        # alternate kinds take the other group of each table.
        spec, other_spec = (_GROUPS[k % 2], _GROUPS[1 - k % 2])
        plan, other_plan = (_GROUPS[2 + k % 2], _GROUPS[3 - k % 2])
        for n, (form, (cls, group, key)) in enumerate(
            (
                (f"{annotation} = {defaults[0]}", spec),
                (f"{annotation} = {defaults[1]}", plan),
                (f"{annotation} | None = None", other_spec),
                (f"{annotation} | None = {defaults[0]}", other_plan),
            )
        ):
            name = f"{_ADJECTIVES[(4 * k + n) % len(_ADJECTIVES)]}_{kind}_{n}"
            found.append(
                NewField(
                    cls,
                    name,
                    form,
                    f'SpecField("{{name}}", "{key}", {group}, "{kind}", "{kind}", '
                    f'doc="A typed setting ({form.replace(" | ", " or ")}).")',
                    _position(group, _POSITIONS[(k + n) % len(_POSITIONS)]),
                )
            )
    return found


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
    'SpecField("{name}", "parallel_dims.{name}", GROUP_PLAN, "int", "int", '
    'doc="The pipeline-parallel degree the plan was made for.")',
    lambda rows: rows[0],
)

ORDINARY = (FLAG_AFTER_PARAM_PLAN, COUNT_AFTER_INJECTIONS, LABEL_FIRST)
EVERY_FIELD = (*ORDINARY, SCRATCH_EXEMPT, FUSED_AFTER_CONSTRUCTION, NESTED_PLAN_FLAG)
README_STEPS = (README_SPEC_FIELD, README_PLAN_FIELD, README_KIND)

__all__ = [
    "EVERY_FIELD",
    "ORDINARY",
    "NewField",
    "Row",
    "add_apply_decision",
    "README_STEPS",
    "ReadmeSteps",
    "field_names",
    "rows_in",
    "set_row_argument",
]


# ------------------------------------------------ the class of ordinary additions (issue 42)
#
# Not examples but the class: for every kind name a row may use, rows in every group (an
# entry's key, a rule's key, a top-level key and one nested in parallel_dims), with each
# default its pair of kinds keeps (None, a falsy value, a truthy one and another, where the
# laws of docs/contract.md §6 allow them), at the first, a middle and the last position of
# the group, named with ordinary words. Derived from the kinds module and the pools of
# tests/strategies.py as they are, so a kind added as README says joins the class.

_ADJECTIVES = ("early", "spare", "outer", "quiet", "steady", "shared", "rough", "final",
               "extra", "loose", "upper", "lower", "warm", "cold", "short", "long")  # fmt: skip
_NOUNS = ("budget", "window", "margin", "stride", "ratio", "label", "limit", "tally",
          "notes", "hint", "mode", "scale", "stage", "share", "pace", "depth")  # fmt: skip
# (class, group constant, key template): where a row of each group goes.
_GROUPS = (
    ("ModuleShardingSpec", "GROUP_PARAM_PLAN", "{name}"),
    ("ModuleShardingSpec", "GROUP_INJECTIONS", "{name}"),
    ("ShardingPlan", "GROUP_PLAN", "{name}"),
    ("ShardingPlan", "GROUP_PLAN", "parallel_dims.{name}"),
)
_POSITIONS = ("first", "middle", "last")
_DERIVED_RECORDS = {"sharded_params"}  # computed from the entries: no field's row names it


def _position(group: str, where: str) -> Callable[[list[Row]], Row | None]:
    """The row a new row of ``group`` follows to be its group's first, middle or last."""

    def pick(rows: list[Row]) -> Row | None:
        own = [n for n, row in enumerate(rows) if row.group == group]
        if where == "first":
            return rows[own[0] - 1] if own[0] else None
        return rows[own[len(own) // 2 - 1] if where == "middle" and len(own) > 1 else own[-1]]

    return pick


@functools.cache
def _kept_defaults(freeze: str, rebuild: str) -> list[Any]:
    """The defaults a row of these kinds keeps (both laws hold), drawn from the freeze kind's
    pool: None, a falsy value, a truthy one and another, those there are."""
    # Imported here, as in _kind_pairs: the kinds module imports torch, which the text edits
    # above never need.
    import dataclasses as dc
    import random

    from generator.kinds import resolve
    from shardplan.table import kinds
    from shardplan.table.kinds import KindError, default_literal
    from shardplan.table.rows import SpecField
    from tests.strategies import pool_of

    row = SpecField("x", "x", "param_plan", freeze, rebuild)
    rng, drawn = random.Random(f"{freeze}/{rebuild}"), [None]
    for _ in range(40):
        value = pool_of(row)(rng)
        if all(type(value) is not type(v) or value != v for v in drawn):
            drawn.append(value)
    kept = []
    for value in drawn:
        if isinstance(value, list | dict) and value:
            continue  # a mutable default other than empty has no literal
        made = (
            dc.field(default_factory=type(value))
            if isinstance(value, list | dict)
            else dc.field(default=value)
        )
        field = dc.fields(dc.make_dataclass("Probe", [("x", Any, made)]))[0]
        if default_literal(field) is None:
            continue
        try:
            crossing = resolve(kinds, row, field)  # with the laws it breaks
        except KindError:
            continue
        # Both laws hold, and a default freeze writes (a row written always, or written
        # when not None with another default) rebuilds as itself: the class holds every
        # write condition, so older artifacts frozen again gain the always-written keys
        # (tests/older_artifacts.py says which).
        if crossing.broken_law or not _written_default_comes_back(crossing, value):
            continue
        kept.append(value)
    falsy = [v for v in kept if v is not None and not v]
    truthy = [v for v in kept if v]
    return ([None] if None in kept else []) + falsy[:1] + truthy[:2]


def _written_default_comes_back(crossing: Any, value: Any) -> bool:
    """Whether the default, where freeze writes it, rebuilds as itself, of its own type: a
    tuple default a list rebuild reads back as a list would make every default plan
    rebuild unequal to itself (the normalisation docs/contract.md §6 allows a value, not a
    default), so the class leaves it out."""
    from shardplan.convert import kinds
    from shardplan.errors import FreezeError, MetaError

    if not crossing.writes(value) or (value is None and crossing.writes_null):
        return True
    try:
        frozen = getattr(kinds, crossing.function("freeze"))(value, "")
        trusted = (kinds.READ_BACK,) if crossing.rebuild_record.targets else ()
        back = getattr(kinds, crossing.function("rebuild"))(frozen, "", *trusted)
    except (FreezeError, MetaError):
        return False
    return type(back) is type(value) and back == value


def _kind_pairs() -> list[tuple[str, str]]:
    """Pairs of kind names covering every freeze and every rebuild name a crossing row may
    use, each rebuild reading back what its freeze writes, each with a default it keeps."""
    from shardplan.table.kinds import KIND_NAMES, KINDS

    def record_of(step: str, name: str) -> str:
        meaning = getattr(KIND_NAMES[name], step)
        return "" if meaning is None else str(meaning.record)

    def names(step: str) -> list[str]:
        return [
            name
            for name in KIND_NAMES
            if record_of(step, name) and record_of(step, name) not in _DERIVED_RECORDS
        ]

    def reads(freeze: str, rebuild: str) -> bool:
        record = record_of("freeze", freeze)
        return record_of("rebuild", rebuild) in (record, *KINDS[record].reads_back)

    pairs: list[tuple[str, str]] = []
    for freeze in names("freeze"):
        fits = [r for r in names("rebuild") if reads(freeze, r) and _kept_defaults(freeze, r)]
        # A rebuild of the freeze's own record first: another reader may accept more than
        # the freeze writes (scalar reads "s", int never writes it).
        own = [r for r in fits if record_of("rebuild", r) == record_of("freeze", freeze)]
        if fits:  # none where no rebuild name keeps a default this freeze writes
            pairs.append((freeze, max(own or fits, key=lambda r: len(_kept_defaults(freeze, r)))))
    for rebuild in names("rebuild"):
        if any(r == rebuild for _, r in pairs):
            continue
        fits = [f for f in names("freeze") if reads(f, rebuild) and _kept_defaults(f, rebuild)]
        if fits:  # none where no freeze name gives it a default it keeps
            pairs.append((max(fits, key=lambda f: len(_kept_defaults(f, rebuild))), rebuild))
    return pairs


def _annotation(default: Any) -> str:
    if isinstance(default, list | dict):
        return f"Any = field(default_factory={type(default).__name__})"
    return f"Any = {default!r}"


def every_kind_field() -> list[NewField]:
    """The class of additions: one NewField a (kind pair, group, default, position) the
    covering needs, named with ordinary words."""
    words = iter(f"{a}_{n}" for n in _NOUNS for a in _ADJECTIVES)
    found: list[NewField] = []
    for freeze, rebuild in _kind_pairs():
        defaults = _kept_defaults(freeze, rebuild)
        for i in range(max(len(_GROUPS), len(defaults))):
            cls, group, key = _GROUPS[i % len(_GROUPS)]
            default = defaults[i % len(defaults)]
            name = next(words)
            where = _POSITIONS[len(found) % len(_POSITIONS)]
            found.append(
                NewField(
                    cls,
                    name,
                    _annotation(default),
                    f'SpecField("{{name}}", "{key}", {group}, "{freeze}", "{rebuild}", '
                    f'doc="An ordinary setting ({freeze}, {rebuild}, {where}).")',
                    _position(group, where),
                )
            )
    return found
