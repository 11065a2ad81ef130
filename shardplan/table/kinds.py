"""The kinds as typed values: what each conversion means (``KINDS``), the kind names rows
use (``KIND_NAMES``), and the one resolver that turns a row into its ``Crossing``
(docs/contract.md §4, §5).

Standard library only: the generator imports this module, and neither it nor the staleness
guard may pay for torch. A record's functions live in ``FUNCTIONS``, named by the record:
``freeze_<record>(value, path)`` (live -> JSON) and ``rebuild_<record>(value, path)``
(JSON -> live; ``(value, path, targets)`` for a record that builds Targets); a derived key's record (freeze computes it) has ``check_<record>`` instead,
which strict rebuild runs. The generator, the reference and the table lock all read the
crossings ``resolve`` gives; nothing asks a kind name again. ``problems`` and
``law_problem`` say, for the generator, what the records, names and rows fail to hold.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shardplan.table.rows import SpecField

# The module holding every record's functions (it imports torch; this one never does).
FUNCTIONS = "shardplan.convert.kinds"


class Written(StrEnum):
    """When freeze writes a row's key."""

    NOT_NONE = "not None"  # an empty value is meaningful, and None reads back as None
    TRUTHY = "truthy"  # a falsy value is not written
    ALWAYS = "always"  # None is written as null
    # The field's default is left out and read back from the absent key; None, where it is
    # no default, is written as null.
    NOT_DEFAULT = "not default"


@dataclass(frozen=True)
class Shortcut:
    """What gives a kind function's result for the common value, so generated code calls the
    function (and builds its error path) only off it: ``call(value)``, the result or a falsy
    value where the function must decide; or, ``exactly``, a value of exactly one of these
    types is the result itself."""

    call: str = ""
    exactly: tuple[type, ...] = ()
    # The loop of the kinds template that writes ``call`` out in place, so the rebuild calls
    # no function for the common value: "placement_table" (a dict of str names to dicts of
    # str axes to texts ``lookup`` gives the placement of; None for a text it has not seen).
    inline: str = ""
    lookup: str = ""


@dataclass(frozen=True)
class WriteShortcut:
    """write_plan's shortcut: ``live(value)`` gives the live value itself where it may be
    written as it stands (its placements through ``written_text``), else a falsy value;
    ``check(param_plan, keys)`` says, for the whole plan at once, whether every live value
    under those entry keys may be written so (else write_plan takes freeze_plan's path)."""

    live: str
    check: str


@dataclass(frozen=True)
class Consume:
    """How read_plan's one pass takes a value of the document it decoded and alone holds
    (JSON types, str keys): ``call(value)`` takes everything the rebuild function accepts,
    the document's own containers where it can, and raises NotConsumed for the rest (the
    read then starts again on the pair's path, which names the defect). ``counted``: it
    converts the value in place, which becomes the live value, and gives the members of
    the objects in it; else it gives the live value, which holds no object."""

    call: str
    counted: bool = False
    # The loop of the kinds template that writes ``call`` out in place, so the pass calls no
    # function for the common value: "placement_table" (each text becomes ``lookup(text)``,
    # or ``parse(text)`` for a text ``lookup`` has not seen: NotConsumed for no placement).
    inline: str = ""
    lookup: str = ""
    parse: str = ""


@dataclass(frozen=True)
class Gather:
    """A derived record gathered in the rebuild's one walk: for the entry row under ``key``,
    ``call(fqn, live_value, gathered)`` appends what the row's rebuilt value contributes,
    and strict rebuild runs ``check(value, path, gathered, param_plan)`` on the key's value
    instead of the record's check_ function (the same refusal, without a second walk)."""

    key: str
    call: str
    check: str
    # Where the row's value is consumed by an inline loop, the loop gathers as ``call``
    # does, in the same walk: a name holding any placement not of this type is appended.
    unless: str = ""


@dataclass(frozen=True, kw_only=True)
class Record:
    """What one conversion means: ``shows`` and ``schema`` are how generated/fields.md names
    the JSON type rebuild accepts and its JSON Schema (null is added where the row writes
    null), ``held_as`` the annotation of a CodegenMeta field holding a top-level key of it;
    ``reads_back`` the records whose rebuild reads back everything its freeze writes
    (tests/test_closure.py checks each pair; a row pairing its freeze with another rebuild
    has its value read back at freeze by ``admit``). The shortcuts, one a step, and the
    writer's are optional (tests/test_kinds_declared.py checks they give what the
    functions give); so are ``consume`` (read_plan's one pass) and, for a derived record,
    ``gather``."""

    shows: str
    schema: dict[str, Any]
    held_as: str
    reads_back: tuple[str, ...] = ()
    freeze_shortcut: Shortcut | None = None
    rebuild_shortcut: Shortcut | None = None
    write_shortcut: WriteShortcut | None = None
    consume: Consume | None = None
    gather: Gather | None = None
    # Its rebuild builds Targets: ``rebuild_<record>(value, path, targets)``, where
    # ``targets`` is what the rebuild's caller allowed (shardplan.convert.trust.Admission),
    # passed down from the rebuild's ``allow_targets`` parameter.
    targets: bool = False


@dataclass(frozen=True)
class Writes:
    """A kind name's freeze: the record whose function it calls, and when the key is written."""

    record: str
    written: Written

    def __post_init__(self) -> None:
        Written(self.written)  # a string that is no condition fails at import, naming the line


@dataclass(frozen=True)
class Reads:
    """A kind name's rebuild: the record whose function it calls, and what an absent key
    gives (a Python literal; "" where the dataclass field's default decides)."""

    record: str
    absent: str = ""


@dataclass(frozen=True)
class KindName:
    """A word rows use: its meaning for each step it serves."""

    freeze: Writes | None = None
    rebuild: Reads | None = None


# The loops templates/kinds.j2 writes in place of a rebuild shortcut's call ("": none).
INLINE_LOOPS = ("", "placement_table")

# A record without a freeze_<name> function is read only (name_tuple, int_or_true).
KINDS: dict[str, Record] = {
    "placements": Record(
        shows="object: name -> named placement",
        schema={"type": "object", "additionalProperties": {"$ref": "#/$defs/named_placement"}},
        held_as="dict[str, dict[str, dict[str, str]]]",
        reads_back=("placements",),
        freeze_shortcut=Shortcut(call="common_frozen_table"),
        rebuild_shortcut=Shortcut(
            call="common_parsed_table", inline="placement_table", lookup="cached_placement"
        ),
        write_shortcut=WriteShortcut("writable_table", "live_tables_writable"),
        consume=Consume(
            "consume_placements",
            counted=True,
            inline="placement_table",
            lookup="cached_placement",
            parse="consume_placement",
        ),
    ),
    "names": Record(
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        reads_back=("names", "name_tuple"),
        freeze_shortcut=Shortcut(call="common_frozen_strings"),
        rebuild_shortcut=Shortcut(call="common_strings"),
        consume=Consume("consume_strings"),
    ),
    "name_tuple": Record(
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        rebuild_shortcut=Shortcut(call="common_string_tuple"),
        consume=Consume("consume_string_tuple"),
    ),
    "scalar": Record(
        shows="string, number or boolean",
        schema={"type": ["string", "number", "boolean"]},
        held_as="str | int | float | bool",
        reads_back=("scalar",),
        freeze_shortcut=Shortcut(exactly=(str, bool)),
        rebuild_shortcut=Shortcut(exactly=(str, bool, int, float)),
    ),
    "bool": Record(
        shows="boolean",
        schema={"type": "boolean"},
        held_as="bool",
        reads_back=("bool",),
        freeze_shortcut=Shortcut(exactly=(bool,)),
        rebuild_shortcut=Shortcut(exactly=(bool,)),
    ),
    "int": Record(
        shows="integer",
        schema={"type": "integer"},
        held_as="int",
        reads_back=("scalar", "int_or_true"),
        rebuild_shortcut=Shortcut(exactly=(int,)),
    ),
    "int_or_true": Record(
        shows="non-zero integer or true",
        schema={"type": ["integer", "boolean"]},
        held_as="int | bool",
    ),
    "injected": Record(
        shows="Target object, registry name, named placement or contract",
        schema={
            "anyOf": [
                {"type": "string"},
                {"$ref": "#/$defs/target"},
                {"$ref": "#/$defs/named_placement", "not": {"required": ["_target_"]}},
                {"$ref": "#/$defs/contract", "not": {"required": ["_target_"]}},
            ]
        },
        held_as="Any",
        reads_back=("injected",),
        freeze_shortcut=Shortcut(exactly=(str,)),
        rebuild_shortcut=Shortcut(exactly=(str,)),
        targets=True,
    ),
    "json_object": Record(
        shows="object",
        schema={"type": "object"},
        held_as="dict[str, Any]",
        reads_back=("json_object",),
    ),
    "handler_map": Record(
        shows="object: FQN -> handler name",
        schema={"type": "object", "additionalProperties": {"type": "string"}},
        held_as="dict[str, str]",
        reads_back=("handler_map",),
    ),
    "pairs": Record(
        shows="array of [FQN, FQN] pairs",
        schema={
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
        },
        held_as="list[list[str]]",
        reads_back=("pairs",),
    ),
    # Derived: freeze computes it from the frozen entries; strict rebuild checks it.
    "sharded_params": Record(
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        reads_back=("sharded_params",),
        gather=Gather(
            key="params",
            call="gather_sharded",
            check="compare_sharded_params",
            unless="Replicate",
        ),
    ),
}

# The kind names rows use, each stated once (the seed's names, which upstream tables keep).
# Two names with the same meaning are the same code, and the lock compares meanings, not
# names. A row's own written=/absent= win over its names'.
KIND_NAMES: dict[str, KindName] = {
    "placement_map": KindName(Writes("placements", Written.NOT_NONE), Reads("placements")),
    "named_placements": KindName(Writes("placements", Written.NOT_NONE), Reads("placements")),
    "name_list": KindName(Writes("names", Written.TRUTHY), Reads("names")),
    "attr_list": KindName(Writes("names", Written.NOT_NONE), Reads("names")),
    "opt_name_list": KindName(freeze=Writes("names", Written.ALWAYS)),
    "tuple_empty": KindName(rebuild=Reads("name_tuple", "()")),
    "opt_name_tuple": KindName(rebuild=Reads("name_tuple", "None")),
    "scalar": KindName(freeze=Writes("scalar", Written.NOT_NONE)),
    "plain": KindName(freeze=Writes("scalar", Written.NOT_NONE)),
    "opt_scalar": KindName(rebuild=Reads("scalar", "None")),
    "scalar_unless_default": KindName(freeze=Writes("scalar", Written.NOT_DEFAULT)),
    "scalar_or_default": KindName(rebuild=Reads("scalar")),
    "bool": KindName(freeze=Writes("bool", Written.ALWAYS)),
    "bool_default_true": KindName(rebuild=Reads("bool", "True")),
    "bool_default_false": KindName(rebuild=Reads("bool", "False")),
    "int_truthy": KindName(Writes("int", Written.TRUTHY), Reads("int")),
    "int_or_true": KindName(rebuild=Reads("int_or_true")),
    "value_to_dict": KindName(freeze=Writes("injected", Written.NOT_NONE)),
    "injection_target": KindName(rebuild=Reads("injected")),
    "dict_copy": KindName(Writes("json_object", Written.TRUTHY), Reads("json_object")),
    "handler_map": KindName(Writes("handler_map", Written.ALWAYS), Reads("handler_map")),
    "pair_list": KindName(Writes("pairs", Written.ALWAYS), Reads("pairs")),
    "sharded_params": KindName(Writes("sharded_params", Written.ALWAYS), Reads("sharded_params")),
}


@dataclass(frozen=True)
class Crossing:
    """One keyed row, resolved once: the record each step calls, when freeze writes the key,
    what an absent key rebuilds to, and the annotation of the field it fills ("" for a
    derived key, which fills none)."""

    freeze: str
    rebuild: str
    written: Written
    absent: str  # the Python literal an absent (or, lenient, null) key gives
    annotation: str
    freeze_record: Record
    rebuild_record: Record
    # How the crossing breaks the defaults laws for its field (docs/contract.md §6), said as
    # what comes back instead; "" where both hold (derive_law).
    broken_law: str = ""

    def function(self, step: str) -> str:
        """The name of the function ``step`` calls: ``freeze_<record>``, ``rebuild_<record>``,
        or (a derived key's rebuild) ``check_<record>``."""
        return f"{step}_{self.freeze if step == 'freeze' else self.rebuild}"

    @property
    def reads_back(self) -> bool:
        """Whether the rebuild record reads back all the freeze record writes (else freeze
        reads each value back with ``admit``)."""
        return self.rebuild in self.freeze_record.reads_back

    @property
    def writes_null(self) -> bool:
        """Freeze writes null for None: the key is written always and None is its absence,
        or written when not the default and None is not the default."""
        if self.written is Written.ALWAYS:
            return self.absent == "None"
        return self.null_is_none

    @property
    def null_is_none(self) -> bool:
        """A null reads back as None and an absent key as the default, which is not None
        (written when not the default): rebuild tells the two apart."""
        return self.written is Written.NOT_DEFAULT and self.absent != "None"

    @property
    def refuses_none(self) -> bool:
        """Freeze refuses None: it is not written, and the absent key rebuilds to something
        else (``is_boundary: None`` would come back ``True``)."""
        return self.written is Written.NOT_NONE and self.absent != "None"

    @property
    def written_at_absent(self) -> bool:
        """Freeze writes the key even at its absent value (written always, or written when
        not None with an absent value that is not None): an artifact without the key,
        rebuilt and frozen again, gains it."""
        return self.writes(self.absent_value())

    def writes(self, value: Any) -> bool:
        """Whether freeze writes ``value``."""
        if self.written is Written.ALWAYS:
            return True
        if self.written is Written.NOT_DEFAULT:
            return not self.is_absent_value(value)
        return bool(value) if self.written is Written.TRUTHY else value is not None

    def is_absent_value(self, value: Any) -> bool:
        """Whether ``value`` is the absent value exactly: equal to it, and of its type
        (``True`` is no default ``1``)."""
        absent = self._absent_parsed
        return type(value) is type(absent) and value == absent

    @functools.cached_property
    def _absent_parsed(self) -> Any:
        # Parsed once (a draw asks per value); only compared, never handed out.
        return ast.literal_eval(self.absent)

    def absent_value(self) -> Any:
        """The absent value itself: a fresh object each call (a scalar is shared: it cannot
        change)."""
        value = self._absent_parsed
        return value if type(value) in _SCALARS else ast.literal_eval(self.absent)


_SCALARS = (type(None), bool, int, float, str)


class KindError(ValueError):
    """A row whose crossing cannot be resolved; ``str()`` says why and the fix."""


_FACTORY_LITERALS: dict[Any, str] = {dict: "{}", list: "[]", tuple: "()"}


def _states_default(field: dataclasses.Field[Any]) -> bool:
    """Whether the dataclass field has a default (a value or a factory)."""
    return not (
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )


def _broken_law(written: Written, absent: str, field: dataclasses.Field[Any] | None) -> str:
    """How a presence breaks the defaults laws (docs/contract.md §6) for the dataclass
    ``field`` (None: the row names none), said as what comes back instead; "" when both
    hold. (a) An absent key rebuilds the field's default. (b) A value freeze leaves
    unwritten rebuilds as itself: None where written when not None (where None is no
    default, freeze refuses it instead), the default where written when not the default,
    and a falsy value, as the one falsy default, where written when truthy."""
    stated = field is not None and _states_default(field)
    default = default_literal(field) if field is not None and stated else None
    if stated and default is None:
        return "the default has no Python literal, so no absent key can rebuild it"
    if default is not None and absent != default:
        return f"an artifact without the key rebuilds {absent} instead"
    if written is Written.TRUTHY and ast.literal_eval(absent):
        return (
            "a falsy value is never written (written when truthy), so 0, False or an "
            f"empty value would rebuild as {absent} instead"
        )
    return ""


def default_literal(field: dataclasses.Field[Any]) -> str | None:
    """A dataclass field's default as a Python literal; None where it has none a literal
    states exactly (no default, or an object with no literal form)."""
    if field.default is not dataclasses.MISSING:
        text = repr(field.default)
        try:
            back = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
        return text if type(back) is type(field.default) and back == field.default else None
    return _FACTORY_LITERALS.get(field.default_factory)


def literal_problem(text: str) -> str | None:
    """Why ``text`` is not a Python literal written as Python writes it, or None."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return f"{text!r} is not a Python literal"
    return None if repr(value) == text else f"{text!r} is not written as Python writes it"


def problems(functions: dict[str, set[str]], defined: set[str]) -> list[str]:
    """What the records and kind names say that the kinds' functions (``functions``: each
    prefix's record names, of freeze_, rebuild_ and check_; ``defined``: every name that
    module binds) do not hold, one line each; the generator refuses them all."""
    found = []
    for name, meaning in KINDS.items():
        found += _record_problems(f"KINDS[{name!r}]", name, meaning, functions, defined)
    readable = (functions["rebuild"] | functions["check"]) & set(KINDS)
    for name, kind in KIND_NAMES.items():
        at = f"KIND_NAMES[{name!r}]"
        if kind.freeze is None and kind.rebuild is None:
            found.append(
                f"{at} serves no step: give it freeze=Writes(...) and/or rebuild=Reads(...)"
            )
        if kind.freeze and kind.freeze.record not in functions["freeze"] & set(KINDS):
            used = kind.freeze.record
            found.append(f"{at}: freeze record {used!r} has no freeze_{used} in KINDS")
        if kind.rebuild and kind.rebuild.record not in readable:
            used = kind.rebuild.record
            found.append(f"{at}: rebuild record {used!r} has no rebuild_{used} in KINDS")
        if kind.rebuild and kind.rebuild.absent and (bad := literal_problem(kind.rebuild.absent)):
            found.append(f"{at}: the absent value {bad}")
    named = {s.record for kind in KIND_NAMES.values() for s in (kind.freeze, kind.rebuild) if s}
    return found + [
        f"KINDS[{record!r}] has no kind name: name it in KIND_NAMES, the words rows use"
        for record in sorted(set(KINDS) - named)
    ]


def _record_problems(
    at: str, name: str, record: Record, functions: dict[str, set[str]], defined: set[str]
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
    calls = [s.call for s in (record.freeze_shortcut, record.rebuild_shortcut) if s and s.call]
    calls += [s.call for s in (record.consume, record.gather) if s]
    calls += [record.rebuild_shortcut.lookup] if record.rebuild_shortcut else []
    inline = record.rebuild_shortcut.inline if record.rebuild_shortcut else ""
    if inline not in INLINE_LOOPS:
        found.append(
            f"{at}: rebuild_shortcut inline={inline!r} is no loop the kinds template writes "
            f"({', '.join(map(repr, INLINE_LOOPS))})"
        )
    elif inline and not (record.rebuild_shortcut and record.rebuild_shortcut.lookup):
        found.append(f"{at}: rebuild_shortcut inline={inline!r} needs the lookup= it calls")
    calls += [record.gather.check, record.gather.unless] if record.gather else []
    consume = record.consume
    if consume is not None:
        calls += [consume.lookup, consume.parse]
        if consume.inline not in INLINE_LOOPS:
            found.append(
                f"{at}: consume inline={consume.inline!r} is no loop the kinds template writes "
                f"({', '.join(map(repr, INLINE_LOOPS))})"
            )
        elif consume.inline and not (consume.lookup and consume.parse and consume.counted):
            found.append(
                f"{at}: consume inline={consume.inline!r} converts in place, counting: it "
                "needs counted=True and the lookup= and parse= it calls"
            )
    if record.write_shortcut is not None:
        if name not in functions["freeze"]:
            found.append(f"{at}: write_shortcut, but there is no freeze_{name}")
        calls += [record.write_shortcut.live, record.write_shortcut.check]
    undefined = [call for call in calls if call and call not in defined]
    return found + [f"{at}: shortcut {c!r} is no function the module defines" for c in undefined]


def _named(row: SpecField, step: str) -> KindName:
    """The kind name the row gives ``step``, refused where it serves no such step."""
    word = getattr(row, step)
    kind = KIND_NAMES.get(word)
    if kind is None or getattr(kind, step) is None:
        known = sorted(name for name, k in KIND_NAMES.items() if getattr(k, step) is not None)
        close = difflib.get_close_matches(word, known, n=1)
        raise KindError(
            f"unknown {step} kind {word!r}.\n  Known kinds: {', '.join(known)}."
            + (f" Did you mean {close[0]!r}?" if close else "")
        )
    return kind


def resolve(row: SpecField, field: dataclasses.Field[Any] | None) -> Crossing:
    """The row's crossing: its kind names' records, and its presence, the row's own
    ``written``/``absent`` first, then its kind names', then (absent) the default of the
    dataclass ``field`` (None: a derived row, which names no field). KindError says why
    it cannot be resolved."""
    freeze, rebuild = _named(row, "freeze").freeze, _named(row, "rebuild").rebuild
    assert freeze is not None and rebuild is not None  # _named refused a name without it
    no_literal = field is not None and _states_default(field) and default_literal(field) is None
    if no_literal and not (row.absent or rebuild.absent):
        raise KindError(
            "the field's default has no Python literal, so no absent key can rebuild it.\n"
            "  Give the field a literal default (a field(default_factory=dict, list or tuple) "
            "counts)"
        )
    try:
        written = Written(row.written) if row.written else freeze.written
    except ValueError:
        raise KindError(
            f"written={row.written!r} must be one of " + ", ".join(map(repr, map(str, Written)))
        ) from None
    absent = row.absent or rebuild.absent or (default_literal(field) if field else "None")
    if absent is None:
        raise KindError(
            "the field has no default a literal states, so what an absent key rebuilds "
            'to is unknown.\n  Set absent="..." on the row (a Python literal), or give '
            "the field a default"
        )
    if problem := literal_problem(absent):
        raise KindError(f"absent={problem}")
    return Crossing(
        freeze=freeze.record,
        rebuild=rebuild.record,
        written=written,
        absent=absent,
        annotation=str(field.type) if field else "",
        freeze_record=KINDS[freeze.record],
        rebuild_record=KINDS[rebuild.record],
        broken_law=_broken_law(written, absent, field),
    )


def law_problem(row: SpecField, field: dataclasses.Field[Any], crossing: Crossing) -> str:
    """Why the row's kinds lose its field's default or a value freeze leaves unwritten
    (``crossing.broken_law``), and the kind names of the same records that keep both laws
    and carry every value (none refuses None at freeze), as generate says it."""
    bare = dataclasses.replace(row, written="", absent="")  # the kind names' presets alone
    fits = []
    for rebuild, kind in KIND_NAMES.items():
        if not (kind.rebuild and kind.rebuild.record == crossing.rebuild):
            continue
        for freeze, other in KIND_NAMES.items():
            if not (other.freeze and other.freeze.record == crossing.freeze):
                continue
            try:
                offered = resolve(dataclasses.replace(bare, freeze=freeze, rebuild=rebuild), field)
            except KindError:
                continue
            if not (offered.refuses_none or offered.broken_law):
                fits.append(f"{freeze!r} with {rebuild!r}")
    own = " (and without the row's own written=/absent=)" if row.written or row.absent else ""
    fix = f"Kind names that keep it{own}: " + "; ".join(fits) + "."
    if not fits:
        fix = (
            f"No kind name of records {crossing.freeze!r} and {crossing.rebuild!r} keeps it: "
            'add one (README, "Adding a kind"), or give the field a default its kinds keep.'
        )
    default = field.default_factory() if callable(field.default_factory) else field.default
    written = "always" if crossing.written is Written.ALWAYS else f"when {crossing.written}"
    return (
        f"the field's default {default!r} does not come back (freeze {row.freeze!r}, written "
        f"{written}; rebuild {row.rebuild!r}): {crossing.broken_law}.\n  {fix}"
    )


def crossings(rows: tuple[SpecField, ...], cls: type) -> dict[str, Crossing]:
    """Every row's crossing that names kinds, by row name, its field taken from ``cls``
    (the runtime's tables are the generator's, which refuses any it cannot resolve)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return {row.name: resolve(row, fields.get(row.name)) for row in rows if row.freeze}
