"""Each row's freeze block and rebuild assignment, decided here (``kinds.j2`` prints them;
a generated module imports the union of its blocks' calls), and the check that no row's
name breaks the code rendered around it (``check_names``)."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import GeneratorError
from .kinds import KindFacts
from .table import DERIVED, Table, Tables

# Names a block may use that shardplan.artifact.shapes defines, not the kinds module: UNSET,
# a plan-level key the document does not hold. Imported where a block uses it.
SHAPES_NAMES = frozenset({"UNSET"})
_BUILTINS = frozenset(dir(builtins))


# Where a spec-table group's block reads and writes: the entry dict and the path's base.
_SPEC_PLACES = {
    "param_plan": ("entry", "module_path(fqn)", "entry_path(fqn)"),
    "injections": ("rule", "module_path(fqn)", "rule_path(index)"),
}


@dataclass(frozen=True)
class FreezeBlock:
    """One row's freeze block: ``value = <source>``, then ``<target> = <written>`` when
    ``condition`` holds (always where it is ""), else ``otherwise``."""

    comment: str = ""
    source: str = ""  # the expression the value is read from; "" for a derived key
    target: str = ""  # where the frozen value goes: an entry's key, or a local
    condition: str = ""  # "", "value" (truthy) or "value is not None"
    written: str = ""  # the expression written: the shortcut, then the kind's function
    otherwise: str = ""  # the statement of the else branch, or ""
    calls: tuple[str, ...] = ()  # the names it calls (kinds module, shapes, builtins)


@dataclass(frozen=True)
class RebuildBlock:
    """One row's rebuild assignment: ``read`` binds ``value``; strict refusals; then
    ``<target> = value`` for the shortcut's ``types``, ``default`` where ``absent_test``
    holds, else ``call``. A derived key runs ``check`` instead of assigning."""

    comment: str = ""
    read: str = ""
    refuse_null: str = ""  # the statement strict runs for a null, or ""
    refuse_falsy: str = ""  # the statement strict runs for a falsy value, or ""
    refuse_default: str = ""  # the statement strict runs for the default, or ""
    default_test: str = ""  # the test of the rebuilt value that it is the default
    null: str = ""  # "value is None" where null reads as None apart from the absent key
    types: str = ""  # the type test of an ("is", ...) shortcut, or ""
    target: str = ""
    absent_test: str = ""
    default: str = ""
    call: str = ""  # the expression for any other value
    check: str = ""  # a derived key: the statement strict runs on a present value
    calls: tuple[str, ...] = ()


def _is_default(name: str, absent: str) -> str:
    """The test that ``name`` is the default ``absent`` exactly (equal, and of its type), as
    freeze's "not default" condition leaves it unwritten."""
    default = ast.literal_eval(absent)
    if default is None or isinstance(default, bool):
        return f"{name} is {absent}"
    return f"{name} == {absent} and type({name}) is {type(default).__name__}"


def _not_default(name: str, absent: str) -> str:
    """The negation of ``_is_default``: freeze's condition for a key written when not the
    default."""
    default = ast.literal_eval(absent)
    if default is None or isinstance(default, bool):
        return f"{name} is not {absent}"
    return f"{name} != {absent} or type({name}) is not {type(default).__name__}"


def _type_test(types: tuple[str, ...]) -> str:
    if len(types) == 1:
        return f"type(value) is {types[0]}"
    return f"type(value) in ({', '.join(types)})"


# A word of an expression, or a literal (a key or a path, never a name) skipped whole.
_WORD = re.compile(r"""'[^']*'|"[^"]*"|(\w+)""")


def _calls(*expressions: str, known: frozenset[str]) -> tuple[str, ...]:
    """The names of ``known`` (kind functions, shapes, builtins) the expressions use, in
    first-use order: the expressions are the generator's own, so a word scan is exact."""
    found: dict[str, None] = {}
    for expression in expressions:
        for word in _WORD.finditer(expression):
            if word[1] in known:
                found.setdefault(word[1], None)
    return tuple(found)


class BlockMaker:
    """Decides every block of one run from the kinds and the format module."""

    def __init__(self, kinds: KindFacts, form: ModuleType) -> None:
        self.kinds = kinds
        self.field_path = form.field_path
        self.param_plan_group = form.GROUP_PARAM_PLAN
        self.known = kinds.defined | SHAPES_NAMES | _BUILTINS

    def _where(self, base: str, key: str) -> str:
        """The error path of a value, as an expression: ``base + ".key"``, or a literal."""
        return f"{base} + {self.field_path('', key)!r}" if base else repr(key)

    def _frozen(self, row: Any, where: str) -> str:
        kinds, function = self.kinds, self.kinds.function("freeze", row.freeze)
        frozen = f"{function}(value, {where})"
        if not kinds.reads_back(row.freeze, row.rebuild):
            frozen = f"admit({kinds.function('rebuild', row.rebuild)}, {frozen}, {where})"
        shortcut = kinds.freeze_shortcut(row.freeze, row.rebuild)
        if shortcut[:1] == ("call",):
            call = self.entry_shortcut(row)[0] or shortcut[1]
            frozen = f"{call}(value) or {frozen}"
        elif shortcut[:1] == ("is",):
            frozen = f"value if {_type_test(shortcut[1:])} else {frozen}"
        return frozen

    def entry_shortcut(self, row: Any) -> tuple[str, str, str, str]:
        """An entry's row with a write shortcut: ``(parameter, freeze's shortcut, write_plan's
        function, its plan-wide check)`` (the parameter named after freeze's); else four ""."""
        if row.group != self.param_plan_group:
            return ("", "", "", "")
        live, check = self.kinds.write_shortcut(row.freeze, row.rebuild)
        shortcut = self.kinds.freeze_shortcut(row.freeze, row.rebuild)
        if not live:
            return ("", "", "", "")
        if shortcut[:1] != ("call",):
            raise GeneratorError(
                f"kind {row.freeze!r} has a write shortcut ({live}) but no freeze shortcut "
                "function it could stand for: give its record a ('call', ...) shortcut"
            )
        return (shortcut[1].removeprefix("common_"), shortcut[1], live, check)

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        presence = table.presence(row)
        if table.roles[row.group] == DERIVED:
            written = f"{self.kinds.function('freeze', row.freeze)}(param_plan)"
            return FreezeBlock(
                comment=f"{row.key}: {table.record(row, 'freeze')}, derived from the entries",
                target=f"document[{row.key!r}]",
                written=written,
                calls=_calls(written, known=self.known),
            )
        if row.group in table.top_level_groups:  # the plan level: the document, or its object
            target = f"{row.within or 'document'}[{row.leaf!r}]"
            source, where = f"plan.{row.name}", repr(row.name)
        else:
            out, base, _ = _SPEC_PLACES[row.group]
            target = f"{out}[{row.key!r}]"
            source, where = f"spec.{row.name}", self._where(base, row.name)
        condition = {"always": "", "truthy": "value"}.get(presence.written, "value is not None")
        if presence.written == "not default":
            condition = _not_default("value", presence.absent)
        otherwise = f"refuse_none({presence.absent}, {where})" if presence.refuses_none else ""
        written = self._frozen(row, where)
        if presence.writes_null:  # None is written as null, which reads back as None
            written = f"None if value is None else {written}"
        written_when = {"always": "always", "not default": f"when not {presence.absent}"}
        comment = f"{row.name}: {table.record(row, 'freeze')}, written " + written_when.get(
            presence.written, f"when {presence.written}"
        )
        if not self.kinds.reads_back(row.freeze, row.rebuild):
            comment += f", once {table.record(row, 'rebuild')} reads it back"
        return FreezeBlock(
            comment=comment,
            source=source,
            target=target,
            condition=condition,
            written=written,
            otherwise=otherwise,
            calls=_calls(condition, written, otherwise, known=self.known),
        )

    def rebuild(self, table: Table, row: Any) -> RebuildBlock:
        """The row's rebuild assignment (or, derived, its strict check)."""
        kinds, presence = self.kinds, table.presence(row)
        function = kinds.function("rebuild", row.rebuild)
        default = presence.absent
        if table.roles[row.group] == DERIVED:
            check = f"{function}(value, {row.key!r}, meta.param_plan)"
            return RebuildBlock(
                comment=f"{row.key}: {table.record(row, 'rebuild')}, derived from the entries; strict rebuild "
                "refuses a stale one",
                read=f"value = meta.{row.key}",
                absent_test="value is None or value is UNSET",
                default=default,
                check=check,
                calls=_calls(check, "UNSET", known=self.known),
            )
        plan_level = row.group in table.top_level_groups
        comment = f"{row.name}: {table.record(row, 'rebuild')}, {default} when absent"
        if plan_level and not row.within:
            # A top-level key's older names were read as it when the document was loaded.
            read, where = f"value = meta.{row.leaf}", repr(row.key)
        else:
            source, base = (row.within, "") if plan_level else _SPEC_PLACES[row.group][::2]
            leaves = row.alias_leaves if plan_level else row.aliases
            key = row.leaf if plan_level else row.key
            tail = ", UNSET" if plan_level or presence.null_is_none else ""
            if leaves:
                comment += f"; older artifacts name it {', '.join(leaves)}"
                at = repr(row.within) if plan_level else base
                read = f"value, where = read_renamed({source}, {key!r}, {leaves!r}, {at}{tail})"
                where = "where"
            else:
                read = f"value = {source}.get({key!r}{tail})"
                where = repr(row.key) if plan_level else self._where(base, key)
        refuse_null = ""
        if plan_level and not presence.writes_null:
            refuse_null = f"refuse_null({default}, {where})"
        refuse_falsy = f"refuse_falsy(value, {where})" if presence.written == "truthy" else ""
        absent_test = "value is None" + (" or value is UNSET" if plan_level else "")
        null = refuse_default = default_test = ""
        if presence.null_is_none:  # null is None, an absent key the default
            null, absent_test = "value is None", "value is UNSET"
        if presence.written == "not default" and default != "None":
            refuse_default = f"refuse_default(value, {where})"
            default_test = _is_default(row.name, default)
        call = f"{function}(value, {where})"
        shortcut = kinds.shortcut("rebuild", row.rebuild)
        types = _type_test(shortcut[1:]) if shortcut[:1] == ("is",) else ""
        if shortcut[:1] == ("call",):
            call = f"{shortcut[1]}(value) or {call}"
        return RebuildBlock(
            comment=comment,
            read=read,
            refuse_null=refuse_null,
            refuse_falsy=refuse_falsy,
            refuse_default=refuse_default,
            default_test=default_test,
            null=null,
            types=types,
            target=row.name,
            absent_test=absent_test,
            default=default,
            call=call,
            calls=_calls(
                read,
                refuse_null,
                refuse_falsy,
                refuse_default,
                refuse_default and "UNSET",
                types,
                absent_test,
                call,
                known=self.known,
            ),
        )


@dataclass(frozen=True)
class Blocks:
    """Every row's block of both steps, decided once a run; templates print them."""

    by_row: dict[tuple[str, str, str], FreezeBlock | RebuildBlock]  # (step, table, row)
    # The entries' shortcut parameters: name -> (freeze's function, write_plan's), and the
    # entry keys write_plan writes live, by the plan-wide check of their values.
    entry_shortcuts: dict[str, tuple[str, str]]
    live_checks: dict[str, tuple[str, ...]]
    # The top-level keys freeze may leave out (written when not None or truthy): CodegenMeta
    # holds UNSET for such a key the document does not have.
    optional_keys: frozenset[str]

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        return self.by_row["freeze", table.name, row.name]  # type: ignore[return-value]

    def rebuild(self, table: Table, row: Any) -> RebuildBlock:
        """The row's rebuild assignment."""
        return self.by_row["rebuild", table.name, row.name]  # type: ignore[return-value]

    def imports(self, step: str, defined: frozenset[str]) -> dict[str, list[str]]:
        """The kinds functions and shapes names the module of ``step`` imports, sorted."""
        calls = {
            name for (s, _, _), block in self.by_row.items() if s == step for name in block.calls
        }
        if step == "freeze":
            calls |= {name for pair in self.entry_shortcuts.values() for name in pair}
            calls |= set(self.live_checks)
            calls |= {"UNSET"} if self.optional_keys else set()
        return {
            "functions": sorted(calls & (defined - SHAPES_NAMES)),
            "shapes": sorted(calls & SHAPES_NAMES),
        }


def make_blocks(kinds: KindFacts, form: ModuleType, tables: Tables) -> Blocks:
    """Decide every keyed row's block of both steps, and write_plan's shortcuts and checks."""
    maker = BlockMaker(kinds, form)
    by_row: dict[tuple[str, str, str], FreezeBlock | RebuildBlock] = {}
    shortcuts: dict[str, tuple[str, str]] = {}
    checks: dict[str, tuple[str, ...]] = {}
    optional: set[str] = set()
    for table in tables:
        for row in table.keyed:
            by_row["freeze", table.name, row.name] = maker.freeze(table, row)
            by_row["rebuild", table.name, row.name] = maker.rebuild(table, row)
            parameter, copy, live, check = maker.entry_shortcut(row)
            if parameter:
                if shortcuts.setdefault(parameter, (copy, live)) != (copy, live):
                    raise GeneratorError(
                        f"{_label(table, row)}: write_plan's shortcut {live} and another's "
                        f"both stand for {copy}: give the kinds one write shortcut for it"
                    )
                checks[check] = (*checks.get(check, ()), row.key)
            top_level = row.group in table.top_level_groups and not row.within
            top_level = top_level and table.roles[row.group] != DERIVED
            if top_level and table.presence(row).written != "always":
                optional.add(row.leaf)
    return Blocks(by_row, shortcuts, checks, frozenset(optional))


def _label(table: Table, row: Any) -> str:
    label = "table row" if table.name == "spec" else f"table {table.name!r} row"
    return f"{label} {table.number(row)} ({row.name})"


# ------------------------------------------------------------------- names


@dataclass(frozen=True)
class _Placeholder:
    """What a placeholder stands for: a row's name or key, or an object (``part``)."""

    identifier: str
    label: str  # the row, as messages name it
    part: str  # "field", "key" or "object"
    owner: tuple[str, str]  # one per row or object: a row's name and key may be equal


_FIX = {
    "field": "Rename the field (and its row).",
    "key": "Choose another key for the row.",
    "object": "Choose another object for the keys nested in it.",
}
_PART = {"field": "the field", "key": "the key", "object": "the object its key lives in"}


def _placeholders(tables: Tables) -> tuple[Tables, dict[str, _Placeholder]]:
    """The tables with every row's name, key and object renamed to a placeholder."""
    found: dict[str, _Placeholder] = {}
    probed = []
    for table in tables:
        renamed: dict[str, str] = {}
        rows = []
        for number, row in enumerate(table.rows, start=1):
            label = _label(table, row)
            name = f"specgen_{table.name}_{number}_name"
            found[name] = _Placeholder(row.name, label, "field", (table.name, row.name))
            renamed[row.name] = name
            key = row.key
            if key and row.group in table.top_level_groups:
                leaf = f"specgen_{table.name}_{number}_key"
                found[leaf] = _Placeholder(row.leaf, label, "key", (table.name, row.name))
                key = leaf
                if row.within:
                    within = f"specgen_{table.name}_object_{row.within}"
                    if within not in found:
                        owner = (table.name, f"object {row.within}")
                        found[within] = _Placeholder(row.within, label, "object", owner)
                    key = f"{within}{table.separator}{leaf}"
            rows.append(dataclasses.replace(row, name=name, key=key))
        probed.append(
            dataclasses.replace(
                table,
                rows=tuple(rows),
                presences={renamed[n]: p for n, p in table.presences.items()},
                records={renamed[n]: r for n, r in table.records.items()},
            )
        )
    return Tables(tuple(probed)), found


# How a module's own use of a name reads in a message, the strongest first.
_RANKS = ("imports", "defines", "module", "parameter", "local", "class", "builtin", "reads")


class _Uses(ast.NodeVisitor):
    """Every identifier a rendered module binds or reads, with how (its strongest use),
    and where each placeholder occurs: its scope, and whether as a class's field."""

    def __init__(self, placeholders: frozenset[str]) -> None:
        self.placeholders = placeholders
        self.uses: dict[str, tuple[int, str]] = {}
        self.at: dict[str, list[tuple[str, str]]] = {}  # placeholder -> (scope, what)
        self.scope, self.kind = "", "module"

    def use(self, name: str, rank: str, how: str) -> None:
        if name in self.placeholders:
            what = f"a field of {self.scope}" if self.kind == "class" else "a Python variable"
            self.at.setdefault(name, []).append((self.scope, what))
        elif _RANKS.index(rank) < self.uses.get(name, (len(_RANKS), ""))[0]:
            self.uses[name] = (_RANKS.index(rank), how)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.use(alias.asname or alias.name.split(".")[0], "imports", "imports it")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            name = alias.asname or alias.name
            source = "." * node.level + (node.module or "")
            self.use(name, "imports", f"imports it from {source}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.ClassDef) -> None:
        kind = "function" if isinstance(node, ast.FunctionDef) else "class"
        at_module = self.kind == "module"
        self.use(node.name, "defines" if at_module else "local", "defines it")
        for child in (*node.decorator_list, *getattr(node, "bases", ())):
            self.visit(child)
        outer = self.scope, self.kind
        self.scope = f"{node.name}()" if kind == "function" else node.name
        self.kind = kind
        if isinstance(node, ast.FunctionDef):
            self.visit(node.args)
            if node.returns is not None:
                self.visit(node.returns)
        for statement in node.body:
            self.visit(statement)
        self.scope, self.kind = outer

    visit_ClassDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> None:
        self.use(node.arg, "parameter", f"takes it as a parameter of {self.scope}")
        if node.annotation is not None:
            self.visit(node.annotation)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            rank, how = {
                "module": ("module", "binds it as a module-level name"),
                "class": ("class", f"binds it in the {self.scope} class body"),
            }.get(self.kind, ("local", f"binds it as a local of {self.scope}"))
        elif node.id in _BUILTINS:
            rank, how = "builtin", "uses it as Python's builtin"
        else:
            rank, how = "reads", f"reads it in {self.scope or 'the module'}"
        self.use(node.id, rank, how)


@functools.lru_cache(maxsize=8)
def _read(source: str, placeholders: frozenset[str]) -> _Uses | None:
    """The uses of a rendered module (None: not Python), kept for the process's next run."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    uses = _Uses(placeholders)
    uses.visit(tree)
    return uses


def check_names(tables: Tables, render: Callable[[Tables], dict[str, str]], output: str) -> None:
    """Refuse, every row at once, a row whose name, key or object the Python outputs
    (``render``) bind where the module already uses that identifier, another row uses it in
    the same scope, or it begins with two underscores (Python's own, mangled in a class)."""
    probed, placeholders = _placeholders(tables)
    problems: dict[tuple[str, str], str] = {}  # the first module's word on each identifier
    for module, source in render(probed).items():
        uses = _read(source, frozenset(placeholders))
        if uses is None:  # the real render fails black's parse, which names the place
            continue
        owners: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (scope, identifier)
        for name, places in uses.at.items():
            for scope, _ in places:
                owners.setdefault((scope, placeholders[name].identifier), set()).add(
                    placeholders[name].owner
                )
        for name, places in uses.at.items():
            stands = placeholders[name]
            real = stands.identifier
            shared = next((s for s, _ in reversed(places) if len(owners[s, real]) > 1), "")
            if real.startswith("__"):
                how = (
                    "Python keeps names beginning with two underscores for itself (__init__, "
                    "__dict__, __class__) and mangles the rest in a class body"
                )
            elif real in uses.uses:
                how = f"already {uses.uses[real][1]}"
            elif shared:
                how = f"already names the same in {shared} after another row"
            else:
                continue
            problems.setdefault(
                (stands.label, real),
                f"{stands.label}: name {real!r} clashes with the generated code: "
                f"{output}/{module} names {places[0][1]} after {_PART[stands.part]}, and "
                f"{how}.\n  {_FIX[stands.part]}",
            )
    if problems:
        raise GeneratorError("\n".join(problems.values()))
