"""The kinds as the generator reads them: the project's typed records, kind names and
resolver (the ``kinds`` module of [tool.specgen], imported: it is standard library only),
checked against the functions its ``FUNCTIONS`` module defines (read from that module's
source: importing it imports torch), and the laws each row's crossing keeps for its field
(docs/contract.md §6), which only the generator checks."""

from __future__ import annotations

import ast
import dataclasses
import itertools
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
DECLARED += ("Written", "field_types", "parse_literal", "default_literal", "record_type")
DECLARED += ("members", "admits", "shown_type")
# A record's optional parts: the step whose function each stands for ("": none), and its
# fields that name the functions it calls.
_PARTS = {
    "freeze_shortcut": ("freeze", ("call",)),
    "rebuild_shortcut": ("rebuild", ("call", "lookup")),
    "write_shortcut": ("freeze", ("live", "check")),
    "consume": ("", ("call", "lookup", "parse")),
    "gather": ("", ("call", "check", "unless")),
}
# The loops templates/kinds.j2 writes in place of a part's call, and what a part asking for
# one (inline=) must set.
INLINE_LOOPS = ("placement_table",)
_INLINE_NEEDS = {"rebuild_shortcut": ("lookup",), "consume": ("lookup", "parse", "counted")}
_SCALAR_TYPES = (bool, int, float, str)


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's records, names and resolver, and the names its functions define."""

    module: str  # the functions module, e.g. "shardplan.convert.kinds": generated code's import
    source_file: Path
    records: dict[str, Record]
    names: dict[str, KindName]
    defined: frozenset[str]  # every top-level name the functions module defines or imports
    resolve: Callable[[Any, Any, Any], Crossing]  # with the laws it breaks (resolve below)
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
        resolve=partial(resolve, module),
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
    found = [
        problem
        for name, record in kinds.KINDS.items()
        for problem in _record_problems(f"KINDS[{name!r}]", name, record, functions, defined)
    ]
    has = {
        "freeze": functions["freeze"] & set(kinds.KINDS),
        "rebuild": (functions["rebuild"] | functions["check"]) & set(kinds.KINDS),
    }
    for name, kind in kinds.KIND_NAMES.items():
        at = f"KIND_NAMES[{name!r}]"
        if kind.freeze is None and kind.rebuild is None:
            found.append(
                f"{at} serves no step: give it freeze=Writes(...) and/or rebuild=Reads(...)"
            )
        for step, meaning in (("freeze", kind.freeze), ("rebuild", kind.rebuild)):
            if meaning and (used := meaning.record) not in has[step]:
                found.append(f"{at}: {step} record {used!r} has no {step}_{used} in KINDS")
        absent = kind.rebuild.absent if kind.rebuild else ""
        if absent and (bad := kinds.parse_literal(absent)[1]):
            found.append(f"{at}: the absent value {bad}")
    named = {
        s.record for kind in kinds.KIND_NAMES.values() for s in (kind.freeze, kind.rebuild) if s
    }
    return found + [
        f"KINDS[{record!r}] has no kind name: name it in KIND_NAMES, the words rows use"
        for record in sorted(set(kinds.KINDS) - named)
    ]


def _record_problems(
    at: str, name: str, record: Record, functions: dict[str, set[str]], defined: set[str]
) -> list[str]:
    """What one record says that its functions do not hold: a step it or its parts stand
    for, a function they call, or a loop of the kinds template they ask for."""
    found = []
    if not any(name in prefixed for prefixed in functions.values()):
        found.append(f"{at} has no function: write freeze_{name} and/or rebuild_{name}")
    if record.reads_back and name not in functions["freeze"]:
        found.append(f"{at}: reads_back, but there is no freeze_{name}")
    found += [
        f"{at}: reads_back names {reader!r}, which has no rebuild function"
        for reader in record.reads_back
        if reader not in functions["rebuild"] | functions["check"]
    ]
    for part, (step, calls) in _PARTS.items():
        if not (how := getattr(record, part)):
            continue
        if step and name not in functions[step]:
            found.append(f"{at}: {part}, but there is no {step}_{name}")
        found += [
            f"{at}: {part} {field}={call!r} is no function the module defines"
            for field, call in ((field, getattr(how, field)) for field in calls)
            if call and call not in defined
        ]
        needs = _INLINE_NEEDS.get(part, ())
        inline = how.inline if needs else ""  # only these parts may ask for a loop
        if inline and (inline not in INLINE_LOOPS or not all(getattr(how, n) for n in needs)):
            loops = _listed([repr(loop) for loop in INLINE_LOOPS])
            found.append(
                f"{at}: {part} inline={inline!r}: the kinds template writes {loops} in "
                f"place, which needs {_listed(list(needs))} set"
            )
    return found


# ------------------------------------------------------- the laws (docs/contract.md §6)


def resolve(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any] | None, hint: Any = Any
) -> Crossing:
    """``kinds.resolve``'s crossing of the row, with how it breaks the laws for its dataclass
    ``field`` (None: a derived row, which fills none): ``broken_law`` the defaults laws',
    ``broken_type`` the type law's, each said as what comes back instead; "" where it holds."""
    crossing: Crossing = kinds.resolve(row, field, hint)
    if field is None:
        return crossing
    law, kind = _broken_law(kinds, crossing, field), _broken_type(kinds, crossing, field)
    return dataclasses.replace(crossing, broken_law=law, broken_type=kind)


def _default(field: dataclasses.Field[Any]) -> Any:
    """The dataclass field's default (a factory's, made once); MISSING for none."""
    return field.default_factory() if callable(field.default_factory) else field.default


def _broken_law(kinds: ModuleType, crossing: Crossing, field: dataclasses.Field[Any]) -> str:
    """(a) An absent key rebuilds the field's default. (b) A value freeze leaves unwritten
    rebuilds as itself (None and the default do, by ``written``; a falsy value, written when
    truthy, only as the one falsy default). (c) A default freeze writes comes back as
    itself, of its own type."""
    default = _default(field)
    literal = None if default is dataclasses.MISSING else kinds.default_literal(field)
    if default is not dataclasses.MISSING and literal is None:
        return "the default has no Python literal, so no absent key can rebuild it"
    if literal is not None and crossing.absent != literal:
        return f"an artifact without the key rebuilds {crossing.absent} instead"
    if crossing.written is kinds.Written.TRUTHY and crossing.absent_parsed:
        return (
            "a falsy value is never written (written when truthy), so 0, False or an "
            f"empty value would rebuild as {crossing.absent} instead"
        )
    gives = kinds.record_type(crossing.rebuild)
    if literal and default is not None and crossing.writes(default):
        if not kinds.admits(gives, type(default)):
            return (
                f"freeze writes it, and rebuild gives a {type(default).__name__} back as "
                f"{kinds.shown_type(gives)} instead"
            )
    return ""


def _broken_type(kinds: ModuleType, crossing: Crossing, field: dataclasses.Field[Any]) -> str:
    """The type law: what the rebuild gives (its record's type, the absent value and, where
    a null reads as None, None) and the default are instances of the annotation, and the
    annotation's own scalar types are given (an int kind cannot carry a float field's 2.5)."""
    hint, shown = crossing.hint, kinds.shown_type
    if hint is Any:
        return ""
    gives = kinds.record_type(crossing.rebuild)
    given = (gives, type(crossing.absent_parsed), *[type(None)] * crossing.null_is_none)
    wrong = [shown(m) for t in given for m in kinds.members(t) if not kinds.admits(hint, m)]
    if wrong:
        wrong = list(dict.fromkeys(wrong))
        return (
            f"{_listed(wrong)} {'is no instance' if len(wrong) == 1 else 'are no instances'} of it"
        )
    missing = [t for t in kinds.members(hint) if t in _SCALAR_TYPES and not kinds.admits(gives, t)]
    if missing:
        return f"it never gives {_listed([shown(t) for t in missing])}, which the field admits"
    default = _default(field)
    if default is not dataclasses.MISSING and not kinds.admits(hint, type(default)):
        return f"the default, {shown(type(default))}, is no instance of the annotation"
    return ""


def _listed(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _fits(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any], crossing: Crossing, same: bool
) -> list[str]:
    """The pairs of kind names that keep every law for the field and carry every value
    (none refuses None at freeze), as ``'freeze' with 'rebuild'``: of the crossing's records
    where ``same``, else every pair whose rebuild reads back what its freeze writes."""
    bare = dataclasses.replace(row, written="", absent="")  # the kind names' presets alone
    fits = []
    names = kinds.KIND_NAMES.items()
    for (rebuild, kind), (freeze, other) in itertools.product(names, names):
        if kind.rebuild is None or other.freeze is None:
            continue
        records = (other.freeze.record, kind.rebuild.record)
        if same and records != (crossing.freeze, crossing.rebuild):
            continue
        reads = records[1] in kinds.KINDS[records[0]].reads_back
        if not same and (not reads or kinds.KINDS[records[1]].gather):  # derived: no field's
            continue
        try:
            pair = dataclasses.replace(bare, freeze=freeze, rebuild=rebuild)
            offered = resolve(kinds, pair, field, crossing.hint)
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
    fits = _fits(kinds, row, field, crossing, same=True)
    if not fits and crossing.hint is not Any:  # a typed field: the kinds of its type
        fits = _fits(kinds, row, field, crossing, same=False)
    own = " (and without the row's own written=/absent=)" if row.written or row.absent else ""
    fix = f"Kind names that keep it{own}: " + "; ".join(fits) + "."
    if not fits:
        records = f" of records {crossing.freeze!r} and {crossing.rebuild!r}"
        fix = (
            f"No kind name{records if crossing.hint is Any else ''} keeps it: add one "
            '(README, "Adding a kind"), or give the field a default its kinds keep.'
        )
    if crossing.broken_law:
        written = (
            "always" if crossing.written is kinds.Written.ALWAYS else f"when {crossing.written}"
        )
        return (
            f"the field's default {_default(field)!r} does not come back (freeze {row.freeze!r}, "
            f"written {written}; rebuild {row.rebuild!r}): {crossing.broken_law}.\n  {fix}"
        )
    return (
        f"the field is annotated {kinds.shown_type(crossing.hint)}, and rebuild {row.rebuild!r} "
        f"gives {kinds.shown_type(kinds.record_type(crossing.rebuild))}: {crossing.broken_type}.\n  "
        + fix.replace("keep it", "fit")
    )
