"""The kinds as the generator reads them: the project's typed records, kind names and
resolver (the ``kinds`` module of [tool.specgen], imported: it is standard library only),
checked against the functions its ``FUNCTIONS`` module defines (read from that module's
source: importing it imports torch)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import GeneratorError

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing, KindName, Record

# The prefixes of a record's functions: freeze, rebuild, and a derived key's strict check.
PREFIXES = ("freeze", "rebuild", "check")
DECLARED: tuple[str, ...] = ("FUNCTIONS", "KINDS", "KIND_NAMES", "KindError", "resolve")
DECLARED += ("INLINE_LOOPS", "Written", "field_types", "literal_problem", "record_type")
DECLARED += ("shown_type",)


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's records, names and resolver, and the names its functions define."""

    module: str  # the functions module, e.g. "shardplan.convert.kinds": generated code's import
    source_file: Path
    records: dict[str, Record]
    names: dict[str, KindName]
    defined: frozenset[str]  # every top-level name the functions module defines or imports
    resolve: Callable[[Any, Any, Any], Crossing]
    error: type[Exception]  # what resolve raises, its message naming the fix
    law_problem: Callable[[Any, Any, Any], str]  # a broken law (defaults, type), and the fix
    field_types: Callable[[type], dict[str, Any]]  # a dataclass's annotations, resolved
    written: Any  # the Written enum: when freeze writes a key


def bound_names(tree: ast.Module, shown: str) -> dict[str, str]:
    """The names a module binds at its top level (under ``if TYPE_CHECKING:`` too), each
    with how, for messages: what it imports, defines or assigns."""
    bound: dict[str, str] = {}
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            statements += [*node.body, *node.orelse]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = f"{shown} imports it"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = f"{shown} defines it"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {t.id: f"{shown} assigns it" for t in targets if isinstance(t, ast.Name)}
    return bound


def read_kinds(root: Path, module: ModuleType) -> KindFacts:
    """Check the kinds module's records and names against its functions' source."""
    if missing := [name for name in DECLARED if not hasattr(module, name)]:
        raise GeneratorError(f"the kinds module {module.__name__} has no {missing[0]}: restore it")
    functions_file = root / (str(module.FUNCTIONS).replace(".", "/") + ".py")
    shown = functions_file.relative_to(root).as_posix()
    try:
        tree = ast.parse(functions_file.read_text(encoding="utf-8"), filename=shown)
    except OSError as exc:
        raise GeneratorError(f"cannot read the kinds' functions {shown}: {exc.strerror}") from None
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot parse the kinds' functions {shown}: {exc}") from None
    defined = set(bound_names(tree, shown))
    # A kind's functions are the ones that module defines (an imported helper is not a kind).
    own = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    functions = {
        p: {n.removeprefix(f"{p}_") for n in own if n.startswith(f"{p}_")} for p in PREFIXES
    }
    where = module.__name__.replace(".", "/") + ".py"
    problems = [f"{where}: {p}" for p in kind_problems(module, functions, defined)]
    problems += [
        f"{shown}: function {prefix}_{name} has no record in KINDS ({where}): state the kind's "
        "meaning there, or rename the function"
        for prefix in PREFIXES
        for name in sorted(functions[prefix] - set(module.KINDS))
    ]
    if problems:
        raise GeneratorError("\n".join(problems))
    return KindFacts(
        module=str(module.FUNCTIONS),
        source_file=functions_file,
        records=module.KINDS,
        names=module.KIND_NAMES,
        defined=frozenset(defined),
        resolve=module.resolve,
        error=module.KindError,
        law_problem=partial(law_problem, module),
        field_types=module.field_types,
        written=module.Written,
    )


# ------------------------------------------------------- the generator's checks


def kind_problems(
    kinds: ModuleType, functions: dict[str, set[str]], defined: set[str]
) -> list[str]:
    """What the records and kind names of the ``kinds`` module say that its functions
    (``functions``: each prefix's record names, of freeze_, rebuild_ and check_; ``defined``:
    every name that module binds) do not hold, one line each; the generator refuses them all."""
    found = []
    for name, meaning in kinds.KINDS.items():
        found += _record_problems(kinds, f"KINDS[{name!r}]", name, meaning, functions, defined)
    readable = (functions["rebuild"] | functions["check"]) & set(kinds.KINDS)
    for name, kind in kinds.KIND_NAMES.items():
        at = f"KIND_NAMES[{name!r}]"
        if kind.freeze is None and kind.rebuild is None:
            found.append(
                f"{at} serves no step: give it freeze=Writes(...) and/or rebuild=Reads(...)"
            )
        if kind.freeze and kind.freeze.record not in functions["freeze"] & set(kinds.KINDS):
            used = kind.freeze.record
            found.append(f"{at}: freeze record {used!r} has no freeze_{used} in KINDS")
        if kind.rebuild and kind.rebuild.record not in readable:
            used = kind.rebuild.record
            found.append(f"{at}: rebuild record {used!r} has no rebuild_{used} in KINDS")
        if (
            kind.rebuild
            and kind.rebuild.absent
            and (bad := kinds.literal_problem(kind.rebuild.absent))
        ):
            found.append(f"{at}: the absent value {bad}")
    named = {
        s.record for kind in kinds.KIND_NAMES.values() for s in (kind.freeze, kind.rebuild) if s
    }
    return found + [
        f"KINDS[{record!r}] has no kind name: name it in KIND_NAMES, the words rows use"
        for record in sorted(set(kinds.KINDS) - named)
    ]


def _record_problems(
    kinds: ModuleType,
    at: str,
    name: str,
    record: Record,
    functions: dict[str, set[str]],
    defined: set[str],
) -> list[str]:
    found = []
    if not any(name in prefixed for prefixed in functions.values()):
        found.append(f"{at} has no function: write freeze_{name} and/or rebuild_{name}")
    if record.reads_back and name not in functions["freeze"]:
        found.append(f"{at}: reads_back is said of a freeze; there is no freeze_{name}")
    for reader in record.reads_back:
        if reader not in functions["rebuild"] | functions["check"]:
            found.append(f"{at}: reads_back names {reader!r}, which has no rebuild function")
    for step, shortcut in (
        ("freeze", record.freeze_shortcut),
        ("rebuild", record.rebuild_shortcut),
    ):
        if shortcut is not None and name not in functions[step]:
            found.append(f"{at}: {step}_shortcut, but there is no {step}_{name}")
    if record.write_shortcut is not None and name not in functions["freeze"]:
        found.append(f"{at}: write_shortcut, but there is no freeze_{name}")
    undefined = [call for call in _record_calls(record) if call and call not in defined]
    return (
        found
        + _inline_problems(kinds, at, record)
        + [f"{at}: shortcut {c!r} is no function the module defines" for c in undefined]
    )


def _record_calls(record: Record) -> list[str]:
    """Every function a record's shortcuts, consume and gather name ("" for none)."""
    calls = [s.call for s in (record.freeze_shortcut, record.rebuild_shortcut) if s and s.call]
    calls += [s.call for s in (record.consume, record.gather) if s]
    calls += [record.rebuild_shortcut.lookup] if record.rebuild_shortcut else []
    calls += [record.gather.check, record.gather.unless] if record.gather else []
    calls += [record.consume.lookup, record.consume.parse] if record.consume else []
    if record.write_shortcut is not None:
        calls += [record.write_shortcut.live, record.write_shortcut.check]
    return calls


def _inline_problems(kinds: ModuleType, at: str, record: Record) -> list[str]:
    """A rebuild shortcut's or consume's inline loop that the kinds template does not write,
    or that lacks the functions it calls."""
    found = []
    loops = ", ".join(map(repr, kinds.INLINE_LOOPS))
    inline = record.rebuild_shortcut.inline if record.rebuild_shortcut else ""
    if inline not in kinds.INLINE_LOOPS:
        found.append(
            f"{at}: rebuild_shortcut inline={inline!r} is no loop the kinds template writes "
            f"({loops})"
        )
    elif inline and not (record.rebuild_shortcut and record.rebuild_shortcut.lookup):
        found.append(f"{at}: rebuild_shortcut inline={inline!r} needs the lookup= it calls")
    consume = record.consume
    if consume is None:
        return found
    if consume.inline not in kinds.INLINE_LOOPS:
        found.append(
            f"{at}: consume inline={consume.inline!r} is no loop the kinds template writes "
            f"({loops})"
        )
    elif consume.inline and not (consume.lookup and consume.parse and consume.counted):
        found.append(
            f"{at}: consume inline={consume.inline!r} converts in place, counting: it "
            "needs counted=True and the lookup= and parse= it calls"
        )
    return found


def _fits(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any], hint: Any, same: Crossing | None
) -> list[str]:
    """The pairs of kind names that keep all three laws for the field and carry every
    value (none refuses None at freeze), as ``'freeze' with 'rebuild'``: of the records of
    ``same`` where it is given, else every pair whose rebuild reads back what its freeze
    writes."""
    bare = dataclasses.replace(row, written="", absent="")  # the kind names' presets alone
    fits = []
    for rebuild, kind in kinds.KIND_NAMES.items():
        if kind.rebuild is None or same and kind.rebuild.record != same.rebuild:
            continue
        for freeze, other in kinds.KIND_NAMES.items():
            if other.freeze is None or same and other.freeze.record != same.freeze:
                continue
            if not same and kind.rebuild.record not in kinds.KINDS[other.freeze.record].reads_back:
                continue
            if not same and kinds.KINDS[kind.rebuild.record].gather:  # derived: fills no field
                continue
            try:
                offered = kinds.resolve(
                    dataclasses.replace(bare, freeze=freeze, rebuild=rebuild), field, hint
                )
            except kinds.KindError:
                continue
            if not (offered.refuses_none or offered.broken_law or offered.broken_type):
                fits.append(f"{freeze!r} with {rebuild!r}")
    return fits


def law_problem(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any], crossing: Crossing
) -> str:
    """Why the row's kinds lose its field's default or a value freeze leaves unwritten
    (``crossing.broken_law``), or give a value its annotation does not admit
    (``crossing.broken_type``), and the kind names that keep all three laws (of the same
    records first) and carry every value, as generate says it."""
    fits = _fits(kinds, row, field, crossing.hint, crossing)
    if not fits and crossing.hint is not Any:  # a typed field: the kinds of its type
        fits = _fits(kinds, row, field, crossing.hint, None)
    own = " (and without the row's own written=/absent=)" if row.written or row.absent else ""
    fix = f"Kind names that keep it{own}: " + "; ".join(fits) + "."
    if not fits:
        records = f" of records {crossing.freeze!r} and {crossing.rebuild!r}"
        fix = (
            f"No kind name{records if crossing.hint is Any else ''} keeps it: add one "
            '(README, "Adding a kind"), or give the field a default its kinds keep.'
        )
    if crossing.broken_law:
        default = field.default_factory() if callable(field.default_factory) else field.default
        written = (
            "always" if crossing.written is kinds.Written.ALWAYS else f"when {crossing.written}"
        )
        return (
            f"the field's default {default!r} does not come back (freeze {row.freeze!r}, "
            f"written {written}; rebuild {row.rebuild!r}): {crossing.broken_law}.\n  {fix}"
        )
    return (
        f"the field is annotated {kinds.shown_type(crossing.hint)}, and rebuild {row.rebuild!r} "
        f"gives {kinds.shown_type(kinds.record_type(crossing.rebuild))}: {crossing.broken_type}.\n  "
        + fix.replace("keep it", "fit")
    )
