"""Each row's freeze block and rebuild assignment, decided here from its crossing
(``kinds.j2`` prints them; a generated module imports the union of its blocks' calls)."""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import GeneratorError
from .kinds import KindFacts
from .table import DERIVED, Table, Tables

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing, Gather

# Names a block may use that shardplan.artifact.shapes defines, not the kinds module: UNSET,
# a plan-level key the document does not hold. Imported where a block uses it.
SHAPES_NAMES = frozenset({"UNSET"})
_BUILTINS = frozenset(dir(builtins))
# The builtins each module's template calls itself, beside those its blocks call.
_TEMPLATE_BUILTINS = {"freeze": {"len"}, "rebuild": {"Exception", "dict", "len", "str", "type"}}


# Where a spec-table group's block reads and writes: the entry, and the paths' functions.
_SPEC_PLACES = {
    "param_plan": ("entry", "entry_path", "fqn"),
    "injections": ("rule", "rule_path", "index"),
}


def _own(name: str) -> str:
    """The generated code's own name for ``name`` where a row's name may live beside it:
    two underscores first, a form the generator refuses for every field and key."""
    return "__" + name.lstrip("_")


@dataclass(frozen=True)
class Words:
    """The names meta.py's CodegenMeta body uses beside its fields (one per top-level key),
    each spelled so that no key can be it: a word a key takes gains underscores until it is
    free. (A class body mangles names beginning with two underscores, so the form the other
    modules use for their own names is not open here.)"""

    taken: frozenset[str]

    def spell(self, word: str) -> str:
        """``word`` as the generated code spells it."""
        while word in self.taken:
            word += "_"
        return word

    def __getattr__(self, word: str) -> str:
        if word.startswith("__"):  # Python's own lookups (copy, pickle) find nothing here
            raise AttributeError(word)
        return self.spell(word)

    def imported(self, name: str) -> str:
        """An import of ``name`` as the generated code spells it."""
        spelled = self.spell(name)
        return name if spelled == name else f"{name} as {spelled}"


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
class ReadBlock:
    """One row's read, in the rebuild of a CodegenMeta or, where ``consumes``, in read_plan's
    one pass over a document it alone holds (an entry or rule row; strict always). ``read``
    binds ``value``; an absent key (``absent_test``) gives ``default`` (an entry's counted,
    ``count_absent``), a null None where ``null``; else the value is taken as it is where
    ``types`` hold, else ``call`` gives the live value (the pass adds ``counted``, the members
    of the objects in it); then the strict refusals and the derived key's ``gather``. A
    derived key runs ``check`` instead of assigning. In the pass, a null under any other key
    fails: an entry's the type test, the consume function or ``counted`` it meets, a rule's
    in index_rules; an older name fails the pass's key check, and the pair's path reads it."""

    comment: str = ""
    read: str = ""
    consumes: bool = False
    refuse_null: str = ""  # the statement strict runs for a null, or ""
    refuse_falsy: str = ""  # the statement strict runs for a falsy value, or ""
    refuse_default: str = ""  # the statement strict runs for the default, or ""
    default_test: str = ""  # the test of the rebuilt value that it is the default
    null: str = ""  # "value is None" where null reads as None apart from the absent key
    types: str = ""  # the type test of values taken as they are, or ""
    target: str = ""
    annotation: str = ""  # the field's own annotation: its local's declared type
    absent_test: str = ""
    count_absent: str = ""  # the statement an absent key runs too in the pass, or ""
    default: str = ""
    call: str = ""  # the expression for any other value
    counted: str = ""  # the pass: the members of the objects the value holds, or ""
    # The kinds template's loop written for the call ("": none), with its lookup function
    # and, in the pass, its parse function, as spelled; the kind's own call (``slow``) for a
    # value the rebuild's loop does not take.
    inline: str = ""
    lookup: str = ""
    parse: str = ""
    slow: str = ""
    check: str = ""  # a derived key: the statement strict runs on a present value
    gather: str = ""  # the statement strict runs on a truthy rebuilt value: a derived key's part
    # Where the inline loop gathers that part itself (no ``gather``): the placement type a
    # name must hold only to add nothing, and ``gather``'s statement, for the kind's call.
    gather_unless: str = ""
    slow_gather: str = ""
    calls: tuple[str, ...] = ()


def _is_default(name: str, crossing: Crossing, negated: bool = False) -> str:
    """The test that ``name`` is the crossing's absent value exactly (equal, and of its
    type), as freeze's "not default" condition leaves it unwritten; ``negated``, that it is
    not."""
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
    """``(call, exactly)``: the shortcut generated freeze takes on the row, two empties for
    none; where freeze reads its value back (``admit``), only the types the rebuild record
    gives back as they are."""
    shortcut = crossing.freeze_record.freeze_shortcut
    if shortcut is None:
        return "", ()
    if crossing.reads_back:
        return shortcut.call, shortcut.exactly
    back = crossing.rebuild_record.rebuild_shortcut
    return "", tuple(t for t in shortcut.exactly if back and t in back.exactly)


# A word of an expression, or a literal (a key or a path, never a name) skipped whole.
_WORD = re.compile(r"""'[^']*'|"[^"]*"|(\w+)""")


def _calls(*expressions: str, known: dict[str, str]) -> tuple[str, ...]:
    """The names (as imported) of ``known`` (spelling -> name: kind functions, shapes,
    builtins) the expressions use, in first-use order: the expressions are the generator's
    own, so a word scan is exact."""
    found: dict[str, None] = {}
    for expression in expressions:
        for word in _WORD.finditer(expression):
            if word[1] in known:
                found.setdefault(known[word[1]], None)
    return tuple(found)


class BlockMaker:
    """Decides every block of one run from the kinds and the format module."""

    def __init__(self, kinds: KindFacts, form: ModuleType) -> None:
        self.kinds = kinds
        self.written = kinds.written  # the kinds module's Written: when freeze writes a key
        self.field_path = form.field_path
        self.param_plan_group = form.GROUP_PARAM_PLAN
        # Each name a block may call, by its spelling: the imports name the word itself.
        self.known = {_own(n): n for n in kinds.defined | SHAPES_NAMES | _BUILTINS}

    def _calls(self, *expressions: str) -> tuple[str, ...]:
        return _calls(*expressions, known=self.known)

    def _where(self, base: str, key: str) -> str:
        """The error path of a value, as an expression: ``base + ".key"``, or a literal."""
        return f"{base} + {self.field_path('', key)!r}" if base else repr(key)

    def _frozen(self, row: Any, crossing: Crossing, where: str) -> str:
        frozen = f"{_own(crossing.function('freeze'))}(__value, {where})"
        if not crossing.reads_back:
            # A rebuild that builds Targets reads the planner's own back as trusted code.
            trusted = ", __READ_BACK" if crossing.rebuild_record.targets else ""
            frozen = f"__admit({_own(crossing.function('rebuild'))}, {frozen}, {where}{trusted})"
        call, exactly = _freeze_shortcut(crossing)
        if call:
            shortcut = self.entry_shortcut(row, crossing)
            call = shortcut[0] if shortcut else _own(call)
            frozen = f"{call}(__value) or {frozen}"
        elif exactly:
            frozen = f"__value if {_type_test(exactly)} else {frozen}"
        return frozen

    def _rebuild_call(self, crossing: Crossing, where: str) -> str:
        """The call of the row's rebuild function; one that builds Targets is passed what
        the rebuild's caller allowed (``targets``, made from its ``allow_targets``)."""
        trusted = ", __targets" if crossing.rebuild_record.targets else ""
        return f"{_own(crossing.function('rebuild'))}(__value, {where}{trusted})"

    def entry_shortcut(self, row: Any, crossing: Crossing) -> tuple[str, str, str, str] | None:
        """An entry's row with a write shortcut: ``(parameter, freeze's shortcut, write_plan's
        function, its plan-wide check)`` (the parameter named after the record); else None."""
        write = crossing.freeze_record.write_shortcut
        if row.group != self.param_plan_group or write is None or not crossing.reads_back:
            return None
        call = _freeze_shortcut(crossing)[0]
        if not call:
            raise GeneratorError(
                f"kind {row.freeze!r} has a write shortcut ({write.live}) but no freeze shortcut "
                "function it could stand for: give its record a Shortcut(call=...)"
            )
        return (f"{crossing.freeze}_shortcut", call, write.live, write.check)

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        crossing = table.crossing_of(row)
        if table.roles[row.group] == DERIVED:
            written = f"{_own(crossing.function('freeze'))}(__param_plan)"
            return FreezeBlock(
                comment=f"{row.key}: {crossing.freeze}, derived from the entries",
                target=f"__document[{row.key!r}]",
                written=written,
                calls=self._calls(written),
            )
        if row.group in table.top_level_groups:  # the plan level: the document, or its object
            target = f"{row.within or '__document'}[{row.leaf!r}]"
            source, where = f"__plan.{row.name}", repr(row.name)
        else:
            out, _, _ = _SPEC_PLACES[row.group]
            target = f"{_own(out)}[{row.key!r}]"
            source = f"__spec.{row.name}"
            where = self._where("__module_path(__fqn)", row.name)
        written, when = self.written, f"when {crossing.written}"
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
        frozen = self._frozen(row, crossing, where)
        if crossing.writes_null:  # None is written as null, which reads back as None
            frozen = f"None if __value is None else {frozen}"
        comment = f"{row.name}: {crossing.freeze}, written {when}"
        if not crossing.reads_back:
            comment += f", once {crossing.rebuild} reads it back"
        return FreezeBlock(
            comment=comment,
            source=source,
            target=target,
            condition=condition,
            written=frozen,
            otherwise=otherwise,
            calls=self._calls(condition, frozen, otherwise),
        )

    def gathered_by(self, row: Any, gathers: dict[str, Gather]) -> Gather | None:
        """The derived record an entry row's rebuilt value adds to, or None."""
        return gathers.get(row.key) if row.group == self.param_plan_group else None

    def gather(self, row: Any, gathers: dict[str, Gather]) -> str:
        """The statement that adds an entry row's rebuilt value to a derived key, or ""."""
        gather = self.gathered_by(row, gathers)
        if gather is None:
            return ""
        return f"{_own(gather.call)}(__fqn, {row.name}, __gathered)"

    def _derived(self, row: Any, crossing: Crossing, gathers: dict[str, Gather]) -> ReadBlock:
        """A derived key's strict check: against what the entries' walk gathered, or from
        the entries by the record's check function."""
        gathering = crossing.rebuild_record.gather
        if gathering is not None and gathering.key in gathers:  # gathered in the walk
            check = f"{_own(gathering.check)}(__value, {row.key!r}, __gathered, "
        else:
            check = f"{_own(crossing.function('check'))}(__value, {row.key!r}, "
        check += "__meta.param_plan)"
        return ReadBlock(
            comment=f"{row.key}: {crossing.rebuild}, derived from the entries; strict "
            "rebuild refuses a stale one",
            read=f"__value = __meta.{row.key}",
            absent_test="__value is None or __value is __UNSET",
            default=crossing.absent,
            check=check,
            calls=self._calls(check, "__UNSET"),
        )

    def _read(self, table: Table, row: Any, consumes: bool) -> tuple[str, str, str]:
        """``(read, where, older)``: the statement binding the row's value, its error path,
        and the comment's note of the key's older names. The pass reads an entry's key with
        UNSET for absent, its own name only."""
        crossing = table.crossing_of(row)
        plan_level = row.group in table.top_level_groups
        if plan_level and not row.within:
            # A top-level key's older names were read as it when the document was loaded.
            return f"__value = __meta.{row.leaf}", repr(row.key), ""
        if plan_level:
            source, base, key, leaves = row.within, "", row.leaf, row.alias_leaves
        else:
            out, path, at = _SPEC_PLACES[row.group]
            source, base, key = _own(out), f"{_own(path)}({_own(at)})", row.key
            leaves = () if consumes else row.aliases
        entry = row.group == self.param_plan_group
        tail = ", __UNSET" if plan_level or crossing.null_is_none or consumes and entry else ""
        if not leaves:
            where = repr(row.key) if plan_level else self._where(base, key)
            return f"__value = {source}.get({key!r}{tail})", where, ""
        at = repr(row.within) if plan_level else base
        read = f"__value, __where = __read_renamed({source}, {key!r}, {leaves!r}, {at}{tail})"
        return read, "__where", f"; older artifacts name it {', '.join(leaves)}"

    def _call(self, crossing: Crossing, where: str, consumes: bool) -> tuple[str, str, str]:
        """``(call, types, counted)``: the live value of a present value, the type test of
        the values taken as they are, and (the pass) the members of the objects counted."""
        consume = crossing.rebuild_record.consume if consumes else None
        if consume is not None:
            if consume.counted:
                return "__value", "", f"{_own(consume.call)}(__value)"
            return f"{_own(consume.call)}(__value)", "", ""
        call = self._rebuild_call(crossing, where)
        shortcut = crossing.rebuild_record.rebuild_shortcut
        if shortcut and shortcut.call:
            call = f"{_own(shortcut.call)}(__value) or {call}"
        types = _type_test(shortcut.exactly) if shortcut and shortcut.exactly else ""
        return call, types, "__counted(__value)" if consumes else ""

    def _inline(self, table: Table, row: Any, consumes: bool) -> tuple[str, str, str]:
        """``(inline, lookup, parse)``: the kinds template's loop the row's read writes, its
        lookup and (the pass) parse functions, as spelled; three "" for none."""
        crossing = table.crossing_of(row)
        if consumes:
            consume = crossing.rebuild_record.consume
            if consume is None or not consume.inline:
                return "", "", ""
            return consume.inline, _own(consume.lookup), _own(consume.parse)
        shortcut = crossing.rebuild_record.rebuild_shortcut
        if not shortcut or not shortcut.inline or crossing.null_is_none:
            return "", "", ""
        if row.group in table.top_level_groups:
            return "", "", ""
        return shortcut.inline, _own(shortcut.lookup), ""

    def _absent(
        self, row: Any, crossing: Crossing, plan_level: bool, consumes: bool
    ) -> tuple[str, str, str]:
        """``(absent_test, null, count_absent)``: the test that the key is absent, the test
        of a null read as None apart from it ("": none), and (an entry's, in the pass) the
        statement counting an absent key."""
        if consumes and row.group == self.param_plan_group:
            # An entry's keys are checked by counting: each row read counts the key absent
            # or takes it, a null only where freeze writes one (the rest refuse None), and
            # the keys taken must be all the entry's.
            null = "__value is None" if crossing.writes_null else ""
            return "__value is __UNSET", null, "__absent += 1"
        if crossing.null_is_none:  # null is None, an absent key the default
            return "__value is __UNSET", "__value is None", ""
        return "__value is None" + (" or __value is __UNSET" if plan_level else ""), "", ""

    def read(
        self, table: Table, row: Any, gathers: dict[str, Gather], consumes: bool = False
    ) -> ReadBlock:
        """The row's read: its rebuild assignment (a derived key's strict check), or where
        ``consumes`` its block in read_plan's one pass."""
        crossing = table.crossing_of(row)
        if table.roles[row.group] == DERIVED:
            return self._derived(row, crossing, gathers)
        plan_level = row.group in table.top_level_groups
        read, where, older = self._read(table, row, consumes)
        absent_test, null, count_absent = self._absent(row, crossing, plan_level, consumes)
        refuse_null = refuse_falsy = refuse_default = default_test = ""
        if plan_level and not crossing.writes_null:
            refuse_null = f"__refuse_null({where}, absent={crossing.absent})"
        if crossing.written is self.written.TRUTHY:
            refuse_falsy = f"__refuse_falsy(__value, {where})"
        if crossing.written is self.written.NOT_DEFAULT and crossing.absent_parsed is not None:
            refuse_default = f"__refuse_default(__value, {where})"
            default_test = _is_default(row.name, crossing)
        call, types, counted = self._call(crossing, where, consumes)
        inline, lookup, parse = self._inline(table, row, consumes)
        slow = "" if consumes else self._rebuild_call(crossing, where)
        gather, slow_gather, unless = self.gather(row, gathers), "", ""
        found = self.gathered_by(row, gathers)
        if found and inline and found.unless:  # the loop gathers; the kind's call, then the walk
            gather, slow_gather, unless = "", "" if consumes else gather, _own(found.unless)
        shown = (f"{lookup}({slow})", parse) if inline else (call, counted)
        return ReadBlock(
            comment=f"{row.name}: {crossing.rebuild}, {crossing.absent} when absent{older}",
            read=read,
            consumes=consumes,
            refuse_null=refuse_null,
            refuse_falsy=refuse_falsy,
            refuse_default=refuse_default,
            default_test=default_test,
            null=null,
            types=types,
            target=row.name,
            annotation=crossing.annotation,
            absent_test=absent_test,
            count_absent=count_absent,
            default=crossing.absent,
            call=call,
            counted=counted,
            inline=inline,
            lookup=lookup,
            parse=parse,
            slow=slow,
            gather=gather,
            gather_unless=unless,
            slow_gather=slow_gather,
            calls=self._calls(read, refuse_null, refuse_falsy, refuse_default, types, absent_test)
            + self._calls(gather, slow_gather, unless, *shown)
            + (("UNSET",) if refuse_default else ()),
        )


@dataclass(frozen=True)
class Blocks:
    """Every row's block of both steps, decided once a run; templates print them."""

    freezes: dict[tuple[str, str], FreezeBlock]  # by (table, row)
    rebuilds: dict[tuple[str, str], ReadBlock]
    consumes: dict[tuple[str, str], ReadBlock]  # the spec table's rows, by (table, row)
    gathers: bool  # whether the entries' walk gathers a derived key (__gathered)
    # The entries' shortcut parameters: name -> (freeze's function, write_plan's), and the
    # entry keys write_plan writes live, by the plan-wide check of their values.
    entry_shortcuts: dict[str, tuple[str, str]]
    live_checks: dict[str, tuple[str, ...]]
    # The top-level keys freeze may leave out (written when not None or truthy): CodegenMeta
    # holds UNSET for such a key the document does not have.
    optional_keys: frozenset[str]
    words: Words

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        return self.freezes[table.name, row.name]

    def rebuild(self, table: Table, row: Any) -> ReadBlock:
        """The row's rebuild assignment."""
        return self.rebuilds[table.name, row.name]

    def consume(self, table: Table, row: Any) -> ReadBlock:
        """An entry or rule row's block in read_plan's one pass."""
        return self.consumes[table.name, row.name]

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
        return {self.rebuild(table, row).inline for row in table.keyed} - {""}

    def imports(self, step: str, defined: frozenset[str]) -> dict[str, list[str]]:
        """The kinds functions and shapes names the module of ``step`` imports, and the
        builtins its blocks call (bound under their own names), sorted."""
        blocks: list[Any] = list((self.freezes if step == "freeze" else self.rebuilds).values())
        if step == "rebuild":
            blocks += self.consumes.values()
        calls = {name for block in blocks for name in block.calls}
        if step == "freeze":
            calls |= {name for pair in self.entry_shortcuts.values() for name in pair}
            calls |= set(self.live_checks)
            calls |= {"UNSET"} if self.optional_keys else set()
        return {
            "functions": sorted(calls & (defined - SHAPES_NAMES)),
            "shapes": sorted(calls & SHAPES_NAMES),
            "builtins": sorted(calls & _BUILTINS - defined | _TEMPLATE_BUILTINS[step]),
        }


def taken_names(tables: Tables) -> frozenset[str]:
    """The names rows put into generated code: each crossing field's local, each object's
    local (the nested keys' container) and each top-level key (a CodegenMeta field)."""
    taken = set()
    for table in tables:
        taken |= {row.name for row in table.crossing} | set(table.containers())
        taken |= {key for key, _ in table.top_level()}
    return frozenset(taken)


def make_blocks(kinds: KindFacts, form: ModuleType, tables: Tables) -> Blocks:
    """Decide every keyed row's block of both steps, and write_plan's shortcuts and checks."""
    words = Words(taken_names(tables))
    maker = BlockMaker(kinds, form)
    freezes: dict[tuple[str, str], FreezeBlock] = {}
    rebuilds: dict[tuple[str, str], ReadBlock] = {}
    shortcuts: dict[str, tuple[str, str]] = {}
    checks: dict[str, tuple[str, ...]] = {}
    consumes: dict[tuple[str, str], ReadBlock] = {}
    optional: set[str] = set()
    gathers = _gathers(tables, form.GROUP_PARAM_PLAN)
    for table in tables:
        for row in table.keyed:
            freezes[table.name, row.name] = maker.freeze(table, row)
            rebuilds[table.name, row.name] = maker.read(table, row, gathers)
            if row.group in _SPEC_PLACES and table.roles[row.group] != DERIVED:
                consumes[table.name, row.name] = maker.read(table, row, gathers, consumes=True)
            if found := maker.entry_shortcut(row, table.crossing_of(row)):
                parameter, copy, live, check = found
                if shortcuts.setdefault(parameter, (copy, live)) != (copy, live):
                    raise GeneratorError(
                        f"{table.label(row)}: write_plan's shortcut {live} and another's "
                        f"both stand for {copy}: give the kinds one write shortcut for it"
                    )
                checks[check] = (*checks.get(check, ()), row.key)
            top_level = row.group in table.top_level_groups and not row.within
            top_level = top_level and table.roles[row.group] != DERIVED
            if top_level and table.crossing_of(row).written is not kinds.written.ALWAYS:
                optional.add(row.leaf)
    return Blocks(
        freezes, rebuilds, consumes, bool(gathers), shortcuts, checks, frozenset(optional), words
    )


def _gathers(tables: Tables, entries: str) -> dict[str, Gather]:
    """The derived records gathered in the entries' walk, by the entry key they gather from
    (a key no entry row has is derived by the record's check_ function instead)."""
    keys = {row.key for table in tables for row in table.group(entries)}
    found = {
        gather.key: gather
        for table in tables
        for row in table.role(DERIVED)
        if (gather := table.crossing_of(row).rebuild_record.gather) and gather.key in keys
    }
    if len(set(found.values())) > 1:
        raise GeneratorError(
            "the kinds gather more than one derived record in the entries' walk "
            f"({', '.join(sorted(g.call for g in found.values()))}): one list holds what "
            "it gathers; give one record a gather"
        )
    return found
