"""The kinds as the generator reads them: the ``kinds`` module of [tool.specgen] (imported:
it is standard library only), checked against the source of its ``FUNCTIONS`` module (whose
import imports torch), and the laws each row keeps for its field (docs/contract.md §6)."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import GeneratorError

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing, KindName, Record

PREFIXES = ("freeze", "rebuild", "check")  # a record's functions' (check_: a derived key's)
DECLARED: tuple[str, ...] = ("FUNCTIONS", "KINDS", "KIND_NAMES", "KindError", "resolve")
DECLARED += ("Written", "field_types", "parse_literal", "default_literal", "record_type")
DECLARED += ("members", "admits")
# A record's optional parts: the step whose function each stands for ("": none), its fields
# naming the functions it calls, and what it sets to ask for INLINE_LOOP (inline=) if it may.
_PARTS = {
    "freeze_shortcut": ("freeze", ("call",), ()),
    "rebuild_shortcut": ("rebuild", ("call", "lookup"), ("lookup",)),
    "write_shortcut": ("freeze", ("live", "check"), ()),
    "consume": ("", ("call", "lookup", "parse"), ("lookup", "parse", "counted")),
    "gather": ("", ("call", "check", "unless"), ()),
}
INLINE_LOOP = "placement_table"  # the loop templates/kinds.j2 writes in place of a call
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
    """The names a module binds at its top level (under ``if`` too), each with how it does."""
    bound: dict[str, str] = {}
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            statements += [*node.body, *node.orelse]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name.split(".")[0]: f"{shown} imports it" for a in node.names}
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


def kind_problems(
    kinds: ModuleType, functions: dict[str, set[str]], defined: set[str]
) -> list[str]:
    """What the records and kind names of ``kinds`` say that its functions (each prefix's
    record names; ``defined``: every name their module binds) do not hold, one line each."""
    found = [
        problem
        for name, record in kinds.KINDS.items()
        for problem in _record_problems(f"KINDS[{name!r}]", name, record, functions, defined)
    ]
    readers = functions["rebuild"] | functions["check"]
    has = {"freeze": functions["freeze"] & set(kinds.KINDS), "rebuild": readers & set(kinds.KINDS)}
    for name, kind in kinds.KIND_NAMES.items():
        at = f"KIND_NAMES[{name!r}]"
        if kind.freeze is None and kind.rebuild is None:
            found.append(f"{at} serves no step: give it freeze=Writes(...) or rebuild=Reads(...)")
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
    for part, (step, calls, needs) in _PARTS.items():
        if not (how := getattr(record, part)):
            continue
        if step and name not in functions[step]:
            found.append(f"{at}: {part}, but there is no {step}_{name}")
        found += [
            f"{at}: {part} {field}={call!r} is no function the module defines"
            for field, call in ((field, getattr(how, field)) for field in calls)
            if call and call not in defined
        ]
        inline = how.inline if needs else ""  # only these parts may ask for a loop
        if inline and (inline != INLINE_LOOP or not all(getattr(how, n) for n in needs)):
            found.append(
                f"{at}: {part} inline={inline!r}: templates/kinds.j2 writes {INLINE_LOOP!r} "
                f"in place, with {_listed(list(needs))} set"
            )
    return found


def resolve(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any] | None, hint: Any = Any
) -> Crossing:
    """``kinds.resolve``'s crossing of the row, with the laws it breaks for its dataclass
    ``field`` (None: a derived row), each said as what comes back instead ("": it holds)."""
    crossing: Crossing = kinds.resolve(row, field, hint)
    if field is None:
        return crossing
    law, kind = _broken_law(kinds, crossing, field), _broken_type(kinds, crossing, field)
    return dataclasses.replace(crossing, broken_law=law, broken_type=kind)


def shown_type(hint: Any) -> str:
    """A resolved type as its annotation reads (``int | None``, ``Mapping[str, ...]``)."""
    if hint is type(None) or hint is None:
        return "None"
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(shown_type(m) for m in typing.get_args(hint))
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    # A name only a type checker imports stands in as a class of module "typing-only".
    return re.sub(r"typing\.|collections\.abc\.|typing-only\.", "", repr(hint))


def _default(field: dataclasses.Field[Any]) -> Any:
    return field.default_factory() if callable(field.default_factory) else field.default


def _broken_law(kinds: ModuleType, crossing: Crossing, field: dataclasses.Field[Any]) -> str:
    """The defaults laws (docs/contract.md §6): an absent key rebuilds the default (a), and a
    value freeze leaves unwritten (b) or a default it writes (c) as itself, of its type."""
    default = _default(field)
    if default is not dataclasses.MISSING:
        if (literal := kinds.default_literal(field)) is None:
            return "the default has no Python literal, so no absent key can rebuild it"
        if crossing.absent != literal:
            return f"an artifact without the key rebuilds {crossing.absent} instead"
        gives = kinds.record_type(crossing.rebuild)
        written = default is not None and crossing.writes(default)  # a null reads back as None
        if written and not kinds.admits(gives, type(default)):
            return f"freeze writes it, and rebuild gives {shown_type(gives)} instead"
    if crossing.written is kinds.Written.TRUTHY and crossing.absent_parsed:
        return f"a falsy value is never written, so it rebuilds as {crossing.absent} instead"
    return ""


def _broken_type(kinds: ModuleType, crossing: Crossing, field: dataclasses.Field[Any]) -> str:
    """The type law: what rebuild gives (its record's type, the absent value, None where a null
    reads as None) and the default fit the annotation, and its scalar types are all given."""
    hint, shown = crossing.hint, shown_type
    if hint is Any:
        return ""
    gives = kinds.record_type(crossing.rebuild)
    given = (gives, type(crossing.absent_parsed), *[type(None)] * crossing.null_is_none)
    wrong = [shown(m) for t in given for m in kinds.members(t) if not kinds.admits(hint, m)]
    if wrong := list(dict.fromkeys(wrong)):
        verb = "is no instance" if len(wrong) == 1 else "are no instances"
        return f"{_listed(wrong)} {verb} of it"
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
    """The kind names keeping every law for the field and refusing no None, of the crossing's
    records where ``same``, else of any whose rebuild reads back (a derived one fills none)."""
    names = kinds.KIND_NAMES.items()
    reads = [(name, kind.rebuild.record) for name, kind in names if kind.rebuild]
    writes = [(name, kind.freeze.record) for name, kind in names if kind.freeze]
    fits = []
    for (rebuild, read), (freeze, write) in itertools.product(reads, writes):
        ours = (write, read) == (crossing.freeze, crossing.rebuild)
        closed = read in kinds.KINDS[write].reads_back and not kinds.KINDS[read].gather
        if not (ours if same else closed):
            continue
        try:  # the kind names' presets alone
            pair = dataclasses.replace(row, freeze=freeze, rebuild=rebuild, written="", absent="")
            offered = resolve(kinds, pair, field, crossing.hint)
        except kinds.KindError:
            continue
        if not (offered.refuses_none or offered.broken_law or offered.broken_type):
            fits.append(f"{freeze!r} with {rebuild!r}")
    return fits


def law_problem(
    kinds: ModuleType, row: Any, field: dataclasses.Field[Any], crossing: Crossing
) -> str:
    """The row's broken law (``crossing.broken_law`` or ``broken_type``) as generate says it,
    with the kind names that keep all three laws (of the same records first)."""
    fits = _fits(kinds, row, field, crossing, same=True)
    if not fits and crossing.hint is not Any:  # a typed field: the kinds of its type
        fits = _fits(kinds, row, field, crossing, same=False)
    own = " (and without the row's own written=/absent=)" if row.written or row.absent else ""
    fix = f"Kind names that keep it{own}: " + "; ".join(fits) + "."
    if not fits:
        records = f" of records {crossing.freeze!r} and {crossing.rebuild!r}"
        of = records if crossing.hint is Any else ""
        fix = f'No kind name{of} keeps it: add one (README, "Adding a kind") or change the field.'

    written = "always" if crossing.written is kinds.Written.ALWAYS else f"when {crossing.written}"
    if crossing.broken_law:
        default = _default(field)  # none: law (b) alone, of any value freeze leaves unwritten
        what = "a value" if default is dataclasses.MISSING else f"the field's default {default!r}"
        return (
            f"{what} does not come back (freeze {row.freeze!r}, written {written}; rebuild "
            f"{row.rebuild!r}): {crossing.broken_law}.\n  {fix}"
        )
    gives = shown_type(kinds.record_type(crossing.rebuild))
    return (
        f"the field is annotated {shown_type(crossing.hint)}, and rebuild {row.rebuild!r} "
        f"gives {gives}: {crossing.broken_type}.\n  " + fix.replace("keep it", "fit")
    )
