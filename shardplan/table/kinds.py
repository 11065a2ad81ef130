"""The kinds as typed values (docs/contract.md §4, §5): what each conversion means
(``KINDS``), the kind names rows use (``KIND_NAMES``), and ``resolve``, which turns a row into
its ``Crossing`` once. Standard library only: the generator and the staleness guard import it.
"""

from __future__ import annotations

import ast
import collections.abc
import copy
import dataclasses
import difflib
import functools
import types
import typing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shardplan.table.rows import SpecField

FUNCTIONS = "shardplan.convert.kinds"  # every record's functions (it imports torch)


class Written(StrEnum):
    """When freeze writes a row's key."""

    NOT_NONE = "not None"  # an empty value is meaningful, and None reads back as None
    TRUTHY = "truthy"  # a falsy value is not written
    ALWAYS = "always"  # None is written as null
    NOT_DEFAULT = "not default"  # the default is left out: the absent key reads it back


@dataclass(frozen=True)
class Shortcut:
    """What gives a kind function's result for the common value (tests/convert/test_shortcuts.py):
    ``call(value)``, the result or falsy; a value of exactly one of the types ``exactly``,
    itself. ``inline``: the loop of templates/kinds.j2 writing ``call``, calling ``lookup``."""

    call: str = ""
    exactly: tuple[type, ...] = ()
    inline: str = ""
    lookup: str = ""


@dataclass(frozen=True)
class WriteShortcut:
    """write_plan's: ``live(value)`` is the live value where it may be written as it stands,
    else falsy; ``check(param_plan, keys)`` whether every value under those entry keys is."""

    live: str
    check: str


@dataclass(frozen=True)
class Consume:
    """How read_plan's one pass takes a value of the document it alone holds: ``call(value)``
    converts the containers it can in place, else raises NotConsumed; ``counted``: it gives
    its objects' members. ``inline``, ``lookup`` as Shortcut's; ``parse(text)``: a new text."""

    call: str
    counted: bool = False
    inline: str = ""
    lookup: str = ""
    parse: str = ""


@dataclass(frozen=True)
class Gather:
    """A derived record gathered in the rebuild's one walk: ``call(fqn, live_value, gathered)``
    adds what the entry row under ``key`` gives (inline: each name holding a placement not of
    type ``unless``); strict rebuild runs ``check(value, path, gathered, param_plan)``."""

    key: str
    call: str
    check: str
    unless: str = ""


@dataclass(frozen=True, kw_only=True)
class Record:
    """What one conversion means: the JSON type rebuild accepts as generated/fields.md
    ``shows`` it and as JSON Schema; ``held_as``, a CodegenMeta field's annotation for it;
    ``gives``, the live type rebuild returns where not that; ``reads_back``, the records whose
    rebuild reads back all its freeze writes; ``targets``: its rebuild builds Targets."""

    shows: str
    schema: dict[str, Any]
    held_as: str
    gives: str = ""
    reads_back: tuple[str, ...] = ()
    freeze_shortcut: Shortcut | None = None
    rebuild_shortcut: Shortcut | None = None
    write_shortcut: WriteShortcut | None = None
    consume: Consume | None = None
    gather: Gather | None = None
    targets: bool = False


@dataclass(frozen=True)
class Writes:
    """A kind name's freeze: the record whose function it calls, and when the key is written."""

    record: str
    written: Written

    def __post_init__(self) -> None:
        object.__setattr__(self, "written", Written(self.written))  # no condition: fails here


@dataclass(frozen=True)
class Reads:
    """A kind name's rebuild: its record, and the literal an absent key gives ("": the default)."""

    record: str
    absent: str = ""


@dataclass(frozen=True)
class KindName:
    """A word rows use: its meaning for each step it serves."""

    freeze: Writes | None = None
    rebuild: Reads | None = None


# The JSON shapes records share. A record without a freeze_<name> function is read only.
_STRINGS: Any = dict(
    shows="array of strings",
    schema={"type": "array", "items": {"type": "string"}},
    held_as="list[str]",
)
_INTEGER: Any = dict(shows="integer", schema={"type": "integer"}, held_as="int")
KINDS: dict[str, Record] = {
    "placements": Record(
        shows="object: name -> named placement",
        schema={"type": "object", "additionalProperties": {"$ref": "#/$defs/named_placement"}},
        held_as="dict[str, dict[str, dict[str, str]]]",
        gives="dict[str, dict[str, Placement]]",
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
        **_STRINGS,
        reads_back=("names", "name_tuple"),
        freeze_shortcut=Shortcut(call="common_frozen_strings"),
        rebuild_shortcut=Shortcut(call="common_strings"),
        consume=Consume("consume_strings"),
    ),
    "name_tuple": Record(
        **_STRINGS,
        gives="tuple[str, ...]",
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
        **_INTEGER,
        reads_back=("scalar", "int_or_true"),
        rebuild_shortcut=Shortcut(exactly=(int,)),
    ),
    "int_or_true": Record(
        shows="non-zero integer or true",
        schema={"type": ["integer", "boolean"]},
        held_as="int | bool",
    ),
    # The typed values a planner adds, each exactly its type (docs/contract.md §6). No freeze
    # shortcut for numbers: an int too long for text and NaN take the check.
    "typed_int": Record(
        **_INTEGER,
        reads_back=("typed_int",),
        rebuild_shortcut=Shortcut(exactly=(int,)),
    ),
    "typed_float": Record(
        shows="number",
        schema={"type": "number"},
        held_as="float",
        reads_back=("typed_float",),
        rebuild_shortcut=Shortcut(exactly=(float, int)),
    ),
    "typed_str": Record(
        shows="string",
        schema={"type": "string"},
        held_as="str",
        reads_back=("typed_str",),
        freeze_shortcut=Shortcut(exactly=(str,)),
        rebuild_shortcut=Shortcut(exactly=(str,)),
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
        gives="Target | str | dict[str, Placement] | dict[str, dict[str, Placement]]",
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
        gives="list[tuple[str, str]]",
        reads_back=("pairs",),
    ),
    # Derived: freeze computes it from the frozen entries; strict rebuild checks it.
    "sharded_params": Record(
        **_STRINGS,
        reads_back=("sharded_params",),
        gather=Gather(
            key="params",
            call="gather_sharded",
            check="compare_sharded_params",
            unless="Replicate",
        ),
    ),
}

# The kind names rows use (the seed's, which upstream tables keep): two with one meaning are
# the same code, and the lock compares meanings. A row's own written=/absent= win over them.
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
    # Typed fields: written when not the default (None, where it is no default, as null).
    "int": KindName(Writes("typed_int", Written.NOT_DEFAULT), Reads("typed_int")),
    "float": KindName(Writes("typed_float", Written.NOT_DEFAULT), Reads("typed_float")),
    "str": KindName(Writes("typed_str", Written.NOT_DEFAULT), Reads("typed_str")),
    "flag": KindName(Writes("bool", Written.NOT_DEFAULT), Reads("bool")),
    "value_to_dict": KindName(freeze=Writes("injected", Written.NOT_NONE)),
    "injection_target": KindName(rebuild=Reads("injected")),
    "dict_copy": KindName(Writes("json_object", Written.TRUTHY), Reads("json_object")),
    "handler_map": KindName(Writes("handler_map", Written.ALWAYS), Reads("handler_map")),
    "pair_list": KindName(Writes("pairs", Written.ALWAYS), Reads("pairs")),
    "sharded_params": KindName(Writes("sharded_params", Written.ALWAYS), Reads("sharded_params")),
}


@dataclass(frozen=True)
class Crossing:
    """One keyed row, resolved once: its records, presence and field's annotation ("" and Any:
    derived). The generator adds the laws it breaks, as what comes back instead ("": none)."""

    freeze: str
    rebuild: str
    written: Written
    absent_parsed: Any  # what an absent (or, lenient, null) key gives: a value, never text
    annotation: str
    freeze_record: Record
    rebuild_record: Record
    reads_back: bool  # the rebuild reads back all the freeze writes (else freeze's ``admit``)
    null_is_none: bool  # a null reads back as None, an absent key as the other default
    writes_null: bool  # freeze writes None as null
    refuses_none: bool  # unwritten, None would come back another value (is_boundary: True)
    hint: Any = Any
    broken_law: str = ""
    broken_type: str = ""

    @property
    def absent(self) -> str:
        """The absent value as a Python literal, as generated code and the lock print it."""
        return repr(self.absent_parsed)

    def function(self, step: str) -> str:
        """``freeze_<record>``, ``rebuild_<record>`` or (derived) ``check_<record>``."""
        return f"{step}_{self.freeze if step == 'freeze' else self.rebuild}"

    @property
    def written_at_absent(self) -> bool:
        """Freeze writes the absent value: an artifact without the key gains it, frozen again."""
        return self.writes(self.absent_value())

    def writes(self, value: Any) -> bool:
        if self.written is Written.ALWAYS:
            return True
        if self.written is Written.NOT_DEFAULT:
            return not self.is_absent_value(value)
        return bool(value) if self.written is Written.TRUTHY else value is not None

    def is_absent_value(self, value: Any) -> bool:
        """``value`` is the absent value exactly: equal, and of its type (``True`` is no ``1``)."""
        return type(value) is type(self.absent_parsed) and value == self.absent_parsed

    def absent_value(self) -> Any:
        """The absent value, a fresh object each call (deepcopy shares a scalar)."""
        return copy.deepcopy(self.absent_parsed)


_STAND_INS: dict[str, type] = {}  # the names only a type checker imports (Placement, Target)
_CALLABLE: Any = collections.abc.Callable  # Any: its origin is no type to mypy


def _with_stand_ins(evaluate: Any) -> Any:
    """``evaluate(names)``, again with a class standing for each name it finds undefined."""
    names: dict[str, Any] = {}
    while True:
        try:
            return evaluate(names)
        except NameError as exc:
            if exc.name is None or exc.name in names:
                raise
            stand_in = type(exc.name, (), {"__module__": "typing-only"})
            names[exc.name] = _STAND_INS.setdefault(exc.name, stand_in)


def field_types(cls: type) -> dict[str, Any]:
    """The dataclass ``cls``'s annotations by field, resolved (Scalar, Injected followed)."""
    return _with_stand_ins(lambda names: typing.get_type_hints(cls, localns=names))  # type: ignore[no-any-return]


@functools.cache
def record_type(record: str) -> Any:
    """What the rebuild function of ``record`` gives (its ``gives``, else ``held_as``), resolved."""
    text, space = KINDS[record].gives or KINDS[record].held_as, {"Any": Any}
    return _with_stand_ins(lambda names: eval(text, space, names))  # noqa: S307


def members(hint: Any) -> tuple[Any, ...]:
    """The members of a union (Python flattens a union of unions), else the type itself."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return typing.get_args(hint) if union else (hint,)


def admits(annotation: Any, given: Any) -> bool:
    """Whether every value of type ``given`` is an instance of ``annotation``: unions, Any,
    subclasses (a bool is no int, as in JSON), an int for a float, a container's parameters."""
    if len(members(annotation)) > 1 or len(members(given)) > 1:
        return all(any(admits(a, g) for a in members(annotation)) for g in members(given))
    outer, inner = typing.get_origin(annotation) or annotation, typing.get_origin(given) or given
    if annotation is Any or given is Any or (outer is float and inner is int):
        return True
    if not (isinstance(outer, type) and isinstance(inner, type) and issubclass(inner, outer)):
        return False
    if outer is int and inner is bool:
        return False
    wanted, found = typing.get_args(annotation), typing.get_args(given)
    if outer is _CALLABLE or not wanted or not found:  # a Callable's parameters are no container's
        return True
    if wanted[-1] is Ellipsis:  # tuple[X, ...]
        return all(admits(wanted[0], f) for f in found if f is not Ellipsis)
    if found[-1] is Ellipsis or len(wanted) != len(found):
        return False
    return all(admits(w, f) for w, f in zip(wanted, found, strict=True))


class KindError(ValueError):
    """A row whose crossing cannot be resolved; ``str()`` says why and the fix."""


def parse_literal(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for a Python literal as Python writes it, else ``(None, why)``."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None, f"{text!r} is not a Python literal"
    if repr(value) != text:
        return None, f"{text!r} is not written as Python writes it"
    return value, None


def default_literal(field: dataclasses.Field[Any]) -> str | None:
    """A dataclass field's default as a Python literal; None where no literal states it exactly
    (no default, a factory other than dict, list or tuple, a repr that does not read back)."""
    if field.default_factory in (dict, list, tuple):
        return repr(field.default_factory())
    text = repr(field.default)
    back, problem = parse_literal(text)
    same = problem is None and type(back) is type(field.default) and back == field.default
    return text if same else None


def _named(row: SpecField, step: str) -> Any:
    """What the row's kind name means for ``step`` (a Writes or a Reads); KindError if none."""
    word = getattr(row, step)
    if meaning := getattr(KIND_NAMES.get(word), step, None):
        return meaning
    known = sorted(name for name, k in KIND_NAMES.items() if getattr(k, step) is not None)
    close = difflib.get_close_matches(word, known, n=1)
    raise KindError(
        f"unknown {step} kind {word!r}.\n  Known kinds: {', '.join(known)}."
        + (f" Did you mean {close[0]!r}?" if close else "")
    )


def resolve(row: SpecField, field: dataclasses.Field[Any] | None, hint: Any = Any) -> Crossing:
    """The row's crossing: its kind names' records and its presence (the row's own written=,
    absent=, else its names', else the default of ``field``; None: derived), else KindError."""
    freeze, rebuild = _named(row, "freeze"), _named(row, "rebuild")
    if row.written not in ("", *Written):
        raise KindError(
            f"written={row.written!r} must be one of {', '.join(repr(str(w)) for w in Written)}"
        )
    written = Written(row.written) if row.written else freeze.written
    text = row.absent or rebuild.absent or (default_literal(field) if field else "None")
    if text is None:
        none = field is not None and field.default is field.default_factory  # both MISSING
        raise KindError(
            'the field has no default: give it one, or the row absent="..." (a Python literal)'
            if none
            else "the field's default has no Python literal, so no absent key can rebuild it: "
            "give the field a literal one (default_factory=dict, list or tuple counts)"
        )
    absent, problem = parse_literal(text)
    if problem:
        raise KindError(f"absent={problem}")
    admits_none = field is None or admits(hint, type(None))
    null_is_none = written is Written.NOT_DEFAULT and absent is not None and admits_none
    return Crossing(
        freeze=freeze.record,
        rebuild=rebuild.record,
        written=written,
        absent_parsed=absent,
        annotation=str(field.type) if field else "",
        freeze_record=KINDS[freeze.record],
        rebuild_record=KINDS[rebuild.record],
        reads_back=rebuild.record in KINDS[freeze.record].reads_back,
        null_is_none=null_is_none,
        writes_null=absent is None if written is Written.ALWAYS else null_is_none,
        refuses_none=written is Written.NOT_NONE and absent is not None,
        hint=hint,
    )


def crossings(rows: tuple[SpecField, ...], cls: type) -> dict[str, Crossing]:
    """Every row's crossing that names kinds, by row name (the generator refused any other)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = field_types(cls)
    return {
        row.name: resolve(row, fields.get(row.name), hints.get(row.name, Any))
        for row in rows
        if row.freeze
    }
