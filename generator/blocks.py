"""Each row's freeze block and reads, decided here from its crossing (``kinds.j2`` prints
them); a generated module imports the names its code calls."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any

from .errors import GeneratorError
from .kinds import KindFacts
from .table import DERIVED, Table, Tables

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing, Gather

# Names generated code may call that shardplan.artifact.shapes defines, not the kinds module.
SHAPES_NAMES = frozenset({"UNSET"})
_BUILTINS = frozenset(dir(builtins))

# Where a spec-table group's block reads and writes: the entry, and the paths' functions.
_SPEC_PLACES = {
    "param_plan": ("entry", "entry_path", "fqn"),
    "injections": ("rule", "rule_path", "index"),
}


# Every part kinds.j2 prints of a block. A block holds each ("" where its row has none), so a
# part the template misspells is StrictUndefined's error, never an empty string.
PARTS = frozenset(
    "comment source target condition written otherwise read consumes annotation default check "
    "absent_test null count_absent refuse_null refuse_falsy refuse_default default_test types "
    "call counted inline lookup parse slow gather gather_unless".split()
)


def _block(**parts: Any) -> SimpleNamespace:
    """A row's block: ``parts``, and "" for every other part of PARTS."""
    if unknown := parts.keys() - PARTS:
        raise GeneratorError(f"a block has parts kinds.j2 never prints: {sorted(unknown)}")
    return SimpleNamespace(**(dict.fromkeys(PARTS, "") | parts))


def _own(name: str) -> str:
    """The generated code's own name: two underscores first, a form no field or key may take."""
    return "__" + name.lstrip("_")


class Words(dict[str, str]):
    """The names meta.py's CodegenMeta body uses beside its fields, read as ``w.field``: a
    word a row's name takes gains underscores until it is free (a class body mangles names
    beginning with two underscores, the form the other modules use)."""

    def __init__(self, taken: frozenset[str]) -> None:
        super().__init__()
        self.taken = taken

    def __missing__(self, word: str) -> str:
        while word in self.taken:
            word += "_"
        return word

    def imported(self, name: str) -> str:
        """An import of ``name`` as the generated code spells it."""
        return name if self[name] == name else f"{name} as {self[name]}"


def _is_default(name: str, crossing: Crossing, negated: bool = False) -> str:
    """The test that ``name`` is the absent value exactly (equal, and of its type), as freeze
    leaves it unwritten; ``negated``, that it is not."""
    absent, default = crossing.absent, crossing.absent_value()
    if default is None or isinstance(default, bool):
        return f"{name} is {'not ' * negated}{absent}"
    kind = _own(type(default).__name__)
    if negated:
        return f"{name} != {absent} or __type({name}) is not {kind}"
    return f"{name} == {absent} and __type({name}) is {kind}"


def _type_test(types: tuple[type, ...]) -> str:
    names = [_own(t.__name__) for t in types]
    if len(types) == 1:
        return f"__type(__value) is {names[0]}"
    return f"__type(__value) in ({', '.join(names)})"


def _freeze_shortcut(crossing: Crossing) -> tuple[str, tuple[type, ...]]:
    """``(call, exactly)``: the shortcut generated freeze takes on the row; where freeze reads
    its value back (``admit``), only the types the rebuild record gives back as they are."""
    shortcut = crossing.freeze_record.freeze_shortcut
    if shortcut is None:
        return "", ()
    if crossing.reads_back:
        return shortcut.call, shortcut.exactly
    back = crossing.rebuild_record.rebuild_shortcut
    return "", tuple(t for t in shortcut.exactly if back and t in back.exactly)


@dataclass(frozen=True)
class Run:
    """What every row's blocks are decided from, beside the row's crossing."""

    written: Any  # the kinds module's Written: when freeze writes a key
    field_path: Callable[[str, str], str]  # the format module's: an error path's next step
    entries: str  # the entries' group (GROUP_PARAM_PLAN)
    gathers: dict[str, Gather]  # the derived records the entries' walk gathers, by entry key


class Row:
    """One keyed row, compiled once from its crossing into the blocks every pass prints, each
    the parts kinds.j2 lays out by name ("" for one the row has none of): freeze's, the
    rebuild's and (an entry or a rule row's) the one in read_plan's pass; and an entry's
    write shortcut."""

    def __init__(self, run: Run, table: Table, row: Any) -> None:
        self.run, self.row, self.crossing = run, row, table.crossing_of(row)
        self.plan_level = row.group in table.top_level_groups
        self.derived = table.roles[row.group] == DERIVED
        self.entry = row.group == run.entries
        # A top-level key freeze may leave out: CodegenMeta holds UNSET where it is absent.
        top_level = self.plan_level and not row.within and not self.derived
        self.optional = top_level and self.crossing.written is not run.written.ALWAYS
        self.shortcut = self._entry_shortcut()
        self.freeze = self._freeze()
        self.rebuild = self._read(consumes=False)
        spec = row.group in _SPEC_PLACES and not self.derived
        self.consume = self._read(consumes=True) if spec else None

    def _where(self, base: str, key: str) -> str:
        """The error path of a value, as an expression: ``base + ".key"``, or a literal."""
        return f"{base} + {self.run.field_path('', key)!r}" if base else repr(key)

    def _entry_shortcut(self) -> tuple[str, str, str, str] | None:
        """An entry's row with a write shortcut: ``(parameter, freeze's shortcut, write_plan's
        function, its plan-wide check)`` (the parameter named after the record); else None."""
        crossing = self.crossing
        write = crossing.freeze_record.write_shortcut
        if not self.entry or write is None or not crossing.reads_back:
            return None
        call = _freeze_shortcut(crossing)[0]
        if not call:
            raise GeneratorError(
                f"kind {self.row.freeze!r} has a write shortcut ({write.live}) but no freeze "
                "shortcut function it could stand for: give its record a Shortcut(call=...)"
            )
        return (f"{crossing.freeze}_shortcut", call, write.live, write.check)

    def _frozen(self, where: str) -> str:
        crossing = self.crossing
        frozen = f"{_own(crossing.function('freeze'))}(__value, {where})"
        if not crossing.reads_back:
            # A rebuild that builds Targets reads the planner's own back as trusted code.
            trusted = ", __READ_BACK" if crossing.rebuild_record.targets else ""
            frozen = f"__admit({_own(crossing.function('rebuild'))}, {frozen}, {where}{trusted})"
        call, exactly = _freeze_shortcut(crossing)
        if call:
            frozen = f"{self.shortcut[0] if self.shortcut else _own(call)}(__value) or {frozen}"
        elif exactly:
            frozen = f"__value if {_type_test(exactly)} else {frozen}"
        return frozen

    def _freeze(self) -> SimpleNamespace:
        row, crossing = self.row, self.crossing
        if self.derived:
            return _block(
                comment=f"{row.key}: {crossing.freeze}, derived from the entries",
                target=f"__document[{row.key!r}]",
                written=f"{_own(crossing.function('freeze'))}(__param_plan)",
            )
        if self.plan_level:  # the document, or its object
            target = f"{row.within or '__document'}[{row.leaf!r}]"
            source, where = f"__plan.{row.name}", repr(row.name)
        else:
            target = f"{_own(_SPEC_PLACES[row.group][0])}[{row.key!r}]"
            source = f"__spec.{row.name}"
            where = self._where("__module_path(__fqn)", row.name)
        written, when = self.run.written, f"when {crossing.written}"
        condition = "__value is not None"
        if crossing.written is written.ALWAYS:
            condition, when = "", "always"
        elif crossing.written is written.TRUTHY:
            condition = "__value"
        elif crossing.written is written.NOT_DEFAULT:
            condition = _is_default("__value", crossing, negated=True)
            when = f"when not {crossing.absent}"
        otherwise = ""
        if crossing.refuses_none:
            otherwise = f"__refuse_none({where}, absent={crossing.absent})"
        frozen = self._frozen(where)
        if crossing.writes_null:  # None is written as null, which reads back as None
            frozen = f"None if __value is None else {frozen}"
        comment = f"{row.name}: {crossing.freeze}, written {when}"
        if not crossing.reads_back:
            comment += f", once {crossing.rebuild} reads it back"
        return _block(
            comment=comment,
            source=source,
            target=target,
            condition=condition,
            written=frozen,
            otherwise=otherwise,
        )

    def _read(self, consumes: bool) -> SimpleNamespace:
        """The row's rebuild assignment, or where ``consumes`` its block in read_plan's one pass
        over a document it alone holds (strict always); a derived key's, its strict check."""
        row, crossing = self.row, self.crossing
        if not self.derived:
            read, where, older = self._source(consumes)
            return _block(
                comment=f"{row.name}: {crossing.rebuild}, {crossing.absent} when absent{older}",
                read=read,
                consumes=consumes,
                target=row.name,
                annotation=crossing.annotation,
                default=crossing.absent,
                **self._absent(consumes),
                **self._refusals(where),
                **self._taking(where, consumes),
            )
        # Against what the entries' walk gathered, or from the entries by the check function.
        gathering = crossing.rebuild_record.gather
        if gathering is not None and gathering.key in self.run.gathers:  # gathered in the walk
            check = f"{_own(gathering.check)}(__value, {row.key!r}, __gathered, "
        else:
            check = f"{_own(crossing.function('check'))}(__value, {row.key!r}, "
        return _block(
            comment=f"{row.key}: {crossing.rebuild}, derived from the entries; strict "
            "rebuild refuses a stale one",
            read=f"__value = __meta.{row.key}",
            absent_test="__value is None or __value is __UNSET",
            default=crossing.absent,
            check=check + "__meta.param_plan)",
        )

    def _source(self, consumes: bool) -> tuple[str, str, str]:
        """``(read, where, older)``: the statement binding the row's value, its error path, and
        the comment's note of its older names (the pass reads an entry's own name only)."""
        row = self.row
        if self.plan_level and not row.within:
            # A top-level key's older names were read as it when the document was loaded.
            return f"__value = __meta.{row.leaf}", repr(row.key), ""
        if self.plan_level:
            source, base, key, leaves = row.within, "", row.leaf, row.alias_leaves
        else:
            out, path, at = _SPEC_PLACES[row.group]
            source, base, key = _own(out), f"{_own(path)}({_own(at)})", row.key
            leaves = () if consumes else row.aliases
        unset = self.plan_level or self.crossing.null_is_none or consumes and self.entry
        tail = ", __UNSET" if unset else ""
        if not leaves:
            where = repr(row.key) if self.plan_level else self._where(base, key)
            return f"__value = {source}.get({key!r}{tail})", where, ""
        at = repr(row.within) if self.plan_level else base
        read = f"__value, __where = __read_renamed({source}, {key!r}, {leaves!r}, {at}{tail})"
        return read, "__where", f"; older artifacts name it {', '.join(leaves)}"

    def _absent(self, consumes: bool) -> dict[str, str]:
        """The test that the key is absent, the test of a null read as None apart from it,
        and (an entry's, in the pass) the statement counting an absent key."""
        if consumes and self.entry:
            # The pass counts an entry's keys, absent or taken (a null only where freeze writes
            # one): the keys taken must be all the entry's.
            null = "__value is None" if self.crossing.writes_null else ""
            return dict(absent_test="__value is __UNSET", null=null, count_absent="__absent += 1")
        if self.crossing.null_is_none:  # null is None, an absent key the default
            return {"absent_test": "__value is __UNSET", "null": "__value is None"}
        unset = " or __value is __UNSET" if self.plan_level else ""
        return {"absent_test": "__value is None" + unset}

    def _refusals(self, where: str) -> dict[str, str]:
        """What strict runs for a value freeze never writes: a null at the plan level, a
        falsy value, the default."""
        crossing, found = self.crossing, {}
        if self.plan_level and not crossing.writes_null:
            found["refuse_null"] = f"__refuse_null({where}, absent={crossing.absent})"
        if crossing.written is self.run.written.TRUTHY:
            found["refuse_falsy"] = f"__refuse_falsy(__value, {where})"
        if crossing.written is self.run.written.NOT_DEFAULT and crossing.absent_parsed is not None:
            found["refuse_default"] = f"__refuse_default(__value, {where})"
            found["default_test"] = _is_default(self.row.name, crossing)
        return found

    def _taking(self, where: str, consumes: bool) -> dict[str, str]:
        """How a present value becomes the live one: the kinds template's loop, or the call
        (beside the type test of the values taken as they are; in the pass, the members of the
        objects counted); and an entry's part of a derived key, gathered."""
        record = self.crossing.rebuild_record
        found = self.run.gathers.get(self.row.key) if self.entry else None
        gather = f"{_own(found.call)}(__fqn, {self.row.name}, __gathered)" if found else ""
        taken = {"gather": gather}
        consume = record.consume if consumes else None
        shortcut = record.rebuild_shortcut
        # A rebuild that builds Targets is passed what its caller allowed (allow_targets).
        trusted = ", __targets" if record.targets else ""
        call = f"{_own(self.crossing.function('rebuild'))}(__value, {where}{trusted})"
        in_rebuild = not (consumes or self.plan_level or self.crossing.null_is_none)
        if consume and consume.inline:
            taken |= {"inline": consume.inline, "parse": _own(consume.parse)}
            taken["lookup"] = _own(consume.lookup)
        elif in_rebuild and shortcut and shortcut.inline:
            taken |= {"inline": shortcut.inline, "lookup": _own(shortcut.lookup), "slow": call}
        elif consume and consume.counted:
            taken |= {"call": "__value", "counted": f"{_own(consume.call)}(__value)"}
        elif consume:
            taken["call"] = f"{_own(consume.call)}(__value)"
        else:
            if shortcut and shortcut.call:
                call = f"{_own(shortcut.call)}(__value) or {call}"
            if shortcut and shortcut.exactly:
                taken["types"] = _type_test(shortcut.exactly)
            taken |= {"call": call, "counted": "__counted(__value)" if consumes else ""}
        if "inline" in taken and found and found.unless:  # the rebuild's slow path, the kind's
            taken["gather_unless"] = _own(found.unless)
        return taken


@dataclass(frozen=True)
class Blocks:
    """Every row's blocks, decided once a run; templates print them."""

    rows: dict[tuple[str, str], Row]  # by (table, row)
    gathers: bool  # whether the entries' walk gathers a derived key (__gathered)
    # The entries' shortcut parameters: name -> (freeze's function, write_plan's), and the
    # entry keys write_plan writes live, by the plan-wide check of their values.
    entry_shortcuts: dict[str, tuple[str, str]]
    live_checks: dict[str, tuple[str, ...]]
    words: Words

    def row(self, table: Table, row: Any) -> Row:
        """The row's blocks."""
        return self.rows[table.name, row.name]

    def annotation_names(self, table: Table) -> list[str]:
        """The names the annotations of ``table``'s crossing rows use that its class's module
        binds (generated rebuild imports them for the type checker; it imports Any itself)."""
        names: set[str] = set()
        for row in table.crossing:
            tree = ast.parse(table.crossing_of(row).annotation, mode="eval")
            names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        return sorted(names - _BUILTINS - {"Any"})

    def inlined(self, table: Table) -> set[str]:
        """The inline loops the rebuild of ``table``'s rows writes."""
        return {self.row(table, row).rebuild.inline for row in table.keyed} - {""}


def module_imports(defined: frozenset[str], body: str) -> dict[str, list[str]]:
    """What a generated module imports, read from its code (``body``): the names it calls as
    its own (``__name``) that the kinds module or shapes define, in isort's order (constants,
    classes, functions), and the builtins it binds."""
    try:
        words = {node.id for node in ast.walk(ast.parse(body)) if isinstance(node, ast.Name)}
    except SyntaxError:  # black names what is wrong with the code
        words = set()
    used = {name for name in defined | SHAPES_NAMES | _BUILTINS if _own(name) in words}
    builtins = used & _BUILTINS - defined
    order = sorted(used - builtins, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    return {
        "functions": [name for name in order if name not in SHAPES_NAMES],
        "shapes": [name for name in order if name in SHAPES_NAMES],
        "builtins": sorted(builtins),
    }


def make_blocks(kinds: KindFacts, form: ModuleType, tables: Tables) -> Blocks:
    """Decide every keyed row's blocks, and write_plan's shortcuts and checks."""
    # The derived records the entries' walk gathers, by entry key (a key no entry row has is
    # derived by the record's check_ function instead).
    keys = {row.key for table in tables for row in table.group(form.GROUP_PARAM_PLAN)}
    gathers = {
        gather.key: gather
        for table in tables
        for row in table.role(DERIVED)
        if (gather := table.crossing_of(row).rebuild_record.gather) and gather.key in keys
    }
    if len(set(gathers.values())) > 1:
        raise GeneratorError(
            "the kinds gather more than one derived record in the entries' walk "
            f"({', '.join(sorted(g.call for g in gathers.values()))}): give one record a gather"
        )
    run = Run(kinds.written, form.field_path, form.GROUP_PARAM_PLAN, gathers)
    rows: dict[tuple[str, str], Row] = {}
    shortcuts: dict[str, tuple[str, str]] = {}
    checks: dict[str, tuple[str, ...]] = {}
    taken: set[str] = set()  # the names rows put into generated code
    for table in tables:
        taken |= {row.name for row in table.crossing} | set(table.containers())
        taken |= {key for key, _ in table.top_level()}
        for row in table.keyed:
            found = rows[table.name, row.name] = Row(run, table, row)
            if found.shortcut:
                parameter, copy, live, check = found.shortcut
                if shortcuts.setdefault(parameter, (copy, live)) != (copy, live):
                    raise GeneratorError(
                        f"{table.label(row)}: write_plan's shortcut {live} and another's "
                        f"both stand for {copy}: give the kinds one write shortcut for it"
                    )
                checks[check] = (*checks.get(check, ()), row.key)
    return Blocks(rows, bool(gathers), shortcuts, checks, Words(frozenset(taken)))
