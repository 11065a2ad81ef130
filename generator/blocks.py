"""Each row's freeze block and rebuild assignment, decided here; ``kinds.j2`` prints them.

One small record per row and step says everything its code does: what it reads, where it
writes, when, the expression (shortcut first, the kind's function and its error path
after), the read-back check, the refusals, and the names it calls and binds. The imports
of a generated module are the union of its blocks' calls, and a row name clashes where a
block binds it as a local of a module that already uses the name: nothing rendered is
parsed back.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from generator.errors import GeneratorError
from generator.kinds import STEPS, KindFacts
from generator.table import DERIVED, Table, Tables

# Names a block may use that shardplan.artifact.shapes defines, not the kinds module: UNSET,
# a plan-level key the document does not hold. Imported where a block uses it.
SHAPES_NAMES = frozenset({"UNSET"})
_BUILTINS = frozenset(dir(builtins))


# What the generated modules bind around the rows' blocks (imports, functions, parameters,
# locals), by module, and how: the templates' own names. A row name a block binds there may
# name nothing else. tests/test_generator_names.py reads the generated modules and fails
# for a name they bind that is neither here nor a block's.
def _uses(how: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), how)


AROUND_BLOCKS = {
    "freeze.py": {
        **_uses("imports it from __future__", "annotations"),
        **_uses("imports it from typing", "Any"),
        **_uses("imports it from generated.meta", "CodegenMeta NESTED_KEYS OWNED_KEYS document_of"),
        **_uses(
            "imports it from shardplan.artifact.plan_meta",
            "check_modules frozen_other_keys module_path rules_in_order",
        ),
        **_uses("imports it from shardplan.table.format", "MATCH_KEY"),
        **_uses("imports it from shardplan.table.spec", "ShardingPlan"),
        **_uses("imports it from shardplan.staleness", "check_generated"),
        **_uses("binds it as a module-level name", "TABLE_SHA256"),
        **_uses(
            "defines it",
            "_frozen_entries _frozen_plan _frozen_rules freeze_for_writing freeze_injections "
            "freeze_param_plan freeze_plan",
        ),
        **_uses("takes it as a parameter", "live plan"),
        **_uses("binds it as a local", "entry extra fqn injections nested param_plan rule spec"),
    },
    "rebuild.py": {
        **_uses("imports it from __future__", "annotations"),
        **_uses("imports it from typing", "Any"),
        **_uses("imports it from generated.meta", "CodegenMeta NESTED_KEYS OWNED_KEYS check_meta"),
        **_uses(
            "imports it from shardplan.artifact.plan_meta",
            "check_entry entry_path index_rules other_keys_of rule_path",
        ),
        **_uses("imports it from shardplan.table.spec", "ModuleShardingSpec ShardingPlan"),
        **_uses("imports it from shardplan.staleness", "check_generated"),
        **_uses(
            "binds it as a module-level name", "TABLE_SHA256 INJECTION_KEYS PARAM_PLAN_KEYS NO_RULE"
        ),
        **_uses("defines it", "_rebuild_modules _rebuild_live_plan_from_meta"),
        **_uses("takes it as a parameter", "meta strict"),
        **_uses(
            "binds it as a local of _rebuild_modules()", "entry fqn index modules rule rules spec"
        ),
    },
}
# Where a spec-table group's block reads and writes: the entry dict and the path's base.
_SPEC_PLACES = {
    "param_plan": ("entry", "module_path(fqn)", "entry_path(fqn)"),
    "injections": ("rule", "module_path(fqn)", "rule_path(index)"),
}


@dataclass(frozen=True)
class FreezeBlock:
    """One row's freeze block: ``value = <source>``, then ``<target> = <written>`` when
    ``condition`` holds (always where it is ""), else ``otherwise``."""

    comment: str
    source: str  # the expression the value is read from; "" for a derived key
    target: str  # where the frozen value goes: an entry's key, or a local
    condition: str  # "", "value" (truthy) or "value is not None"
    written: str  # the expression written: the shortcut, then the kind's function
    otherwise: str  # the statement of the else branch, or ""
    calls: tuple[str, ...]  # the names it calls (kinds module, shapes, builtins)
    binds: tuple[str, ...]  # the locals it binds besides ``value``
    live_check: str = ""  # write_plan writes the live value: the plan-wide check of those


@dataclass(frozen=True)
class RebuildBlock:
    """One row's rebuild assignment: ``read`` binds ``value``; strict refusals; then
    ``<target> = value`` for the shortcut's ``types``, ``default`` where ``absent_test``
    holds, else ``call``. A derived key runs ``check`` instead of assigning."""

    comment: str
    read: str
    refuse_null: str  # the statement strict runs for a null, or ""
    refuse_falsy: str  # the statement strict runs for a falsy value, or ""
    types: str  # the type test of an ("is", ...) shortcut, or ""
    target: str
    absent_test: str
    default: str
    call: str  # the expression for any other value
    check: str  # a derived key: the statement strict runs on a present value
    calls: tuple[str, ...]
    binds: tuple[str, ...]


def _type_test(types: tuple[str, ...]) -> str:
    if len(types) == 1:
        return f"type(value) is {types[0]}"
    return f"type(value) in ({', '.join(types)})"


def _calls(*expressions: str, known: frozenset[str]) -> tuple[str, ...]:
    """The names of ``known`` (kind functions, shapes, builtins) the expressions use, in
    first-use order: the expressions are the generator's own, so a word scan is exact."""
    found: dict[str, None] = {}
    for expression in expressions:
        word, quote = "", ""
        for char in f"{expression} ":
            if quote:  # inside a literal: a key or a path, never a name
                quote = "" if char == quote else quote
            elif char.isalnum() or char == "_":
                word += char
                continue
            elif char in "'\"":
                quote = char
            if word in known:
                found.setdefault(word, None)
            word = ""
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
        if not base:
            return repr(key)
        return f"{base} + {self.field_path('', key)!r}"

    def _frozen(self, table: Table, row: Any, where: str) -> str:
        kinds, function = self.kinds, self.kinds.function("freeze", row.freeze)
        frozen = f"{function}(value, {where})"
        if not kinds.reads_back(row.freeze, row.rebuild):
            frozen = f"admit({kinds.function('rebuild', row.rebuild)}, {frozen}, {where})"
        shortcut = kinds.freeze_shortcut(row.freeze, row.rebuild)
        if shortcut[:1] == ("call",):
            frozen = f"{shortcut[1]}(value) or {frozen}"
        elif shortcut[:1] == ("is",):
            frozen = f"value if {_type_test(shortcut[1:])} else {frozen}"
        # An entry's value for write_plan (live): the live value, where it can be written as
        # it stands, before any of freeze's copies.
        live = self._live(row)[0]
        if live:
            frozen = f"(live and {live}(value)) or {frozen}"
        return frozen

    def _live(self, row: Any) -> tuple[str, str]:
        """The row's write shortcut (an entry's key only), or ``("", "")``."""
        if row.group != self.param_plan_group:
            return ("", "")
        return self.kinds.write_shortcut(row.freeze, row.rebuild)

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        presence = table.presence(row)
        if table.roles[row.group] == DERIVED:
            written = f"{self.kinds.function('freeze', row.freeze)}(param_plan)"
            return FreezeBlock(
                comment=f"{row.key}: {row.freeze}, derived from the entries",
                source="",
                target=row.key,
                condition="",
                written=written,
                otherwise="",
                calls=_calls(written, known=self.known),
                binds=(row.key,),
            )
        if row.group in table.top_level_groups:  # the plan level: a local, or its object
            local = not row.within
            target = row.name if local else f"{row.within}[{row.leaf!r}]"
            source, where = f"plan.{row.name}", repr(row.name)
        else:
            out, base, _ = _SPEC_PLACES[row.group]
            local, target = False, f"{out}[{row.key!r}]"
            source, where = f"spec.{row.name}", self._where(base, row.name)
        condition = {"always": "", "truthy": "value"}.get(presence.written, "value is not None")
        otherwise = ""
        if presence.refuses_none:
            otherwise = f"refuse_none({presence.absent}, {where})"
        elif local and condition:
            otherwise = f"{target} = UNSET"
        written = self._frozen(table, row, where)
        if presence.writes_null:  # None is written as null, which reads back as None
            written = f"None if value is None else {written}"
        comment = f"{row.name}: {row.freeze}, written " + (
            presence.written if presence.written == "always" else f"when {presence.written}"
        )
        if not self.kinds.reads_back(row.freeze, row.rebuild):
            comment += f", once {row.rebuild} reads it back"
        live_check = self._live(row)[1]
        return FreezeBlock(
            comment=comment,
            source=source,
            target=target,
            condition=condition,
            written=written,
            otherwise=otherwise,
            calls=_calls(condition, written, otherwise, live_check, known=self.known),
            binds=(row.name,) if local else (),
            live_check=live_check,
        )

    def rebuild(self, table: Table, row: Any) -> RebuildBlock:
        """The row's rebuild assignment (or, derived, its strict check)."""
        kinds, presence = self.kinds, table.presence(row)
        function = kinds.function("rebuild", row.rebuild)
        default = presence.absent
        if table.roles[row.group] == DERIVED:
            read = f"value = meta.{row.key}"
            check = f"{function}(value, {row.key!r}, meta.param_plan)"
            return RebuildBlock(
                comment=f"{row.key}: {row.rebuild}, derived from the entries; strict rebuild "
                "refuses a stale one",
                read=read,
                refuse_null="",
                refuse_falsy="",
                types="",
                target="",
                absent_test="value is None or value is UNSET",
                default=default,
                call="",
                check=check,
                calls=_calls(check, "UNSET", known=self.known),
                binds=(),
            )
        plan_level = row.group in table.top_level_groups
        missing = "UNSET" if plan_level else "None"
        comment = f"{row.name}: {row.rebuild}, {default} when absent"
        binds: tuple[str, ...] = (row.name,)
        if plan_level and not row.within:
            # A top-level key's older names were read as it when the document was loaded.
            read, where = f"value = meta.{row.leaf}", repr(row.key)
        else:
            source, base = (row.within, "") if plan_level else _SPEC_PLACES[row.group][::2]
            leaves = row.alias_leaves if plan_level else row.aliases
            key = row.leaf if plan_level else row.key
            if leaves:
                comment += f"; older artifacts name it {', '.join(leaves)}"
                at = repr(row.within) if plan_level else base
                tail = ", UNSET" if plan_level else ""
                read = f"value, where = read_renamed({source}, {key!r}, {leaves!r}, {at}{tail})"
                where, binds = "where", (row.name, "where")
            else:
                tail = ", UNSET" if plan_level else ""
                read = f"value = {source}.get({key!r}{tail})"
                where = repr(row.key) if plan_level else self._where(base, key)
        refuse_null = ""
        if plan_level and not presence.writes_null:
            refuse_null = f"refuse_null({default}, {where})"
        refuse_falsy = f"refuse_falsy(value, {where})" if presence.written == "truthy" else ""
        absent_test = (
            "value is None" if missing == "None" else f"value is None or value is {missing}"
        )
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
            types=types,
            target=row.name,
            absent_test=absent_test,
            default=default,
            call=call,
            check="",
            calls=_calls(
                read, refuse_null, refuse_falsy, types, absent_test, call, known=self.known
            ),
            binds=binds,
        )


@dataclass(frozen=True)
class Blocks:
    """Every row's block of both steps, decided once a run; templates print them."""

    by_row: dict[tuple[str, str, str], FreezeBlock | RebuildBlock]  # (step, table, row)

    def freeze(self, table: Table, row: Any) -> FreezeBlock:
        """The row's freeze block."""
        return self.by_row["freeze", table.name, row.name]  # type: ignore[return-value]

    def rebuild(self, table: Table, row: Any) -> RebuildBlock:
        """The row's rebuild assignment."""
        return self.by_row["rebuild", table.name, row.name]  # type: ignore[return-value]

    def live_checks(self, table: Table) -> dict[str, tuple[str, ...]]:
        """The entry keys write_plan writes live, by the check their values take together
        (a write shortcut's), in table order."""
        checks: dict[str, tuple[str, ...]] = {}
        for row in table.keyed:
            block = self.by_row.get(("freeze", table.name, row.name))
            if isinstance(block, FreezeBlock) and block.live_check:
                checks[block.live_check] = (*checks.get(block.live_check, ()), row.key)
        return checks

    def row_names(self) -> set[str]:
        """Every keyed row's name."""
        return {name for _, _, name in self.by_row}

    def calls(self, step: str) -> set[str]:
        """Every name the blocks of ``step`` call."""
        return {
            name for (s, _, _), block in self.by_row.items() if s == step for name in block.calls
        }

    def imports(self, step: str, defined: frozenset[str]) -> dict[str, list[str]]:
        """What the generated module of ``step`` imports for its blocks: the kinds
        module's functions and the shapes' names, each sorted."""
        calls = self.calls(step)
        return {
            "functions": sorted(calls & (defined - SHAPES_NAMES)),
            "shapes": sorted(calls & SHAPES_NAMES),
        }


def make_blocks(kinds: KindFacts, form: ModuleType, tables: Tables) -> Blocks:
    """Decide every keyed row's block of both steps."""
    maker = BlockMaker(kinds, form)
    by_row: dict[tuple[str, str, str], FreezeBlock | RebuildBlock] = {}
    for table in tables:
        for row in table.keyed:
            by_row["freeze", table.name, row.name] = maker.freeze(table, row)
            by_row["rebuild", table.name, row.name] = maker.rebuild(table, row)
    return Blocks(by_row)


def _label(table: Table, row: Any) -> str:
    label = "table row" if table.name == "spec" else f"table {table.name!r} row"
    return f"{label} {table.number(row)} ({row.name})"


def check_name_clashes(blocks: Blocks, tables: Tables, output: str) -> None:
    """Refuse a row whose name a block binds as a local of a module that already uses the
    name for something else (a function a block calls, a parameter, an import), and an
    object holding nested keys whose local would shadow such a name."""
    problems = []
    for step, module in zip(STEPS, ("freeze.py", "rebuild.py"), strict=True):
        bound = {name for (s, _, _), b in blocks.by_row.items() if s == step for name in b.binds}
        used = dict(AROUND_BLOCKS[module])
        used |= {name: "calls it in a row's block" for name in blocks.calls(step)}
        used |= {name: "binds it in a row's block" for name in bound - blocks.row_names()}
        used["value"] = "binds it in every row's block"
        for table in tables:
            containers = table.containers()
            for row in table.keyed:
                block = blocks.by_row[step, table.name, row.name]
                for name in (row.name, row.within):
                    if name in used and (name in block.binds or name in containers):
                        problems.append(
                            f"{_label(table, row)}: name {name!r} clashes with the generated "
                            f"code: {output}/{module} names a Python variable after the "
                            f"field, and already {used[name]}.\n  Rename the field (and its "
                            "row)."
                        )
    if problems:
        raise GeneratorError("\n".join(dict.fromkeys(problems)))
