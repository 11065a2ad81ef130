"""The kinds as typed values: what each conversion means (``KINDS``), the kind names rows
use (``KIND_NAMES``), and the one resolver that turns a row into its ``Crossing``
(docs/contract.md §4, §5).

Standard library only: the generator imports this module, and neither it nor the staleness
guard may pay for torch. A record's functions live in ``FUNCTIONS``, named by the record:
``freeze_<record>(value, path)`` (live -> JSON) and ``rebuild_<record>(value, path)``
(JSON -> live; ``(value, path, targets)`` for a record that builds Targets); a derived key's record (freeze computes it) has ``check_<record>`` instead,
which strict rebuild runs. The generator, the reference and the table lock all read the
crossings ``resolve`` gives; nothing asks a kind name again. What the records, names and
rows fail to hold, the generator says (generator/kinds.py: kind_problems, law_problem).
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
    (tests/convert/test_closure.py checks each pair; a row pairing its freeze with another rebuild
    has its value read back at freeze by ``admit``). The shortcuts, one a step, and the
    writer's are optional (tests/table/test_kinds_declared.py checks they give what the
    functions give); so are ``consume`` (read_plan's one pass) and, for a derived record,
    ``gather``. ``gives`` is the live type its rebuild function returns, a type expression
    over the plan classes' module (the third law holds it against a field's annotation)."""

    shows: str
    schema: dict[str, Any]
    held_as: str
    gives: str = "Any"
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
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        gives="list[str]",
        reads_back=("names", "name_tuple"),
        freeze_shortcut=Shortcut(call="common_frozen_strings"),
        rebuild_shortcut=Shortcut(call="common_strings"),
        consume=Consume("consume_strings"),
    ),
    "name_tuple": Record(
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        gives="tuple[str, ...]",
        rebuild_shortcut=Shortcut(call="common_string_tuple"),
        consume=Consume("consume_string_tuple"),
    ),
    "scalar": Record(
        shows="string, number or boolean",
        schema={"type": ["string", "number", "boolean"]},
        held_as="str | int | float | bool",
        gives="str | int | float | bool",
        reads_back=("scalar",),
        freeze_shortcut=Shortcut(exactly=(str, bool)),
        rebuild_shortcut=Shortcut(exactly=(str, bool, int, float)),
    ),
    "bool": Record(
        shows="boolean",
        schema={"type": "boolean"},
        held_as="bool",
        gives="bool",
        reads_back=("bool",),
        freeze_shortcut=Shortcut(exactly=(bool,)),
        rebuild_shortcut=Shortcut(exactly=(bool,)),
    ),
    "int": Record(
        shows="integer",
        schema={"type": "integer"},
        held_as="int",
        gives="int",
        reads_back=("scalar", "int_or_true"),
        rebuild_shortcut=Shortcut(exactly=(int,)),
    ),
    "int_or_true": Record(
        shows="non-zero integer or true",
        schema={"type": ["integer", "boolean"]},
        held_as="int | bool",
        gives="int | bool",
    ),
    # The ordinary typed values a planner adds: each freezes and rebuilds exactly its type
    # (an int is no bool; a float field takes an int as it is, as PEP 484 lets it). No
    # freeze shortcut for numbers: an int too long for text and NaN take the check.
    "typed_int": Record(
        shows="integer",
        schema={"type": "integer"},
        held_as="int",
        gives="int",
        reads_back=("typed_int",),
        rebuild_shortcut=Shortcut(exactly=(int,)),
    ),
    "typed_float": Record(
        shows="number",
        schema={"type": "number"},
        held_as="float",
        gives="float",
        reads_back=("typed_float",),
        rebuild_shortcut=Shortcut(exactly=(float, int)),
    ),
    "typed_str": Record(
        shows="string",
        schema={"type": "string"},
        held_as="str",
        gives="str",
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
        gives="dict[str, Any]",
        reads_back=("json_object",),
    ),
    "handler_map": Record(
        shows="object: FQN -> handler name",
        schema={"type": "object", "additionalProperties": {"type": "string"}},
        held_as="dict[str, str]",
        gives="dict[str, str]",
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
        shows="array of strings",
        schema={"type": "array", "items": {"type": "string"}},
        held_as="list[str]",
        gives="list[str]",
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
    # Typed fields: written when not the default, an absent key read as it; None, where the
    # annotation admits it and it is no default, written as null.
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
    """One keyed row, resolved once: the record each step calls, when freeze writes the key,
    what an absent key rebuilds to, and the annotation of the field it fills ("" for a
    derived key, which fills none)."""

    freeze: str
    rebuild: str
    written: Written
    absent: str  # the Python literal an absent (or, lenient, null) key gives, as printed
    annotation: str
    freeze_record: Record
    rebuild_record: Record
    # How the crossing breaks the defaults laws for its field (docs/contract.md §6), said as
    # what comes back instead; "" where both hold (derive_law).
    broken_law: str = ""
    # The field's annotation, resolved (field_types): the type its values are. Whether it
    # admits None (a null reads as None only where it does), and how the crossing breaks
    # the third law (what the rebuild gives that the annotation does not admit; "" where it
    # holds).
    hint: Any = Any
    admits_none: bool = True
    broken_type: str = ""
    # ``absent``'s value, parsed once by resolve: every check compares it, never the text.
    absent_parsed: Any = None

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
            return self.absent_parsed is None
        return self.null_is_none

    @property
    def null_is_none(self) -> bool:
        """A null reads back as None and an absent key as the default, which is not None
        (written when not the default), where the field admits None: rebuild tells the two
        apart. (Where it does not, None is no value to write: freeze refuses it by type.)"""
        not_none = self.absent_parsed is not None
        return self.written is Written.NOT_DEFAULT and not_none and self.admits_none

    @property
    def refuses_none(self) -> bool:
        """Freeze refuses None: it is not written, and the absent key rebuilds to something
        else (``is_boundary: None`` would come back ``True``)."""
        return self.written is Written.NOT_NONE and self.absent_parsed is not None

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
        absent = self.absent_parsed
        return type(value) is type(absent) and value == absent

    def absent_value(self) -> Any:
        """The absent value itself: a fresh object each call (a scalar is shared: it cannot
        change)."""
        value = self.absent_parsed
        return value if type(value) in _SCALARS else copy.deepcopy(value)


_SCALARS = (type(None), bool, int, float, str)


# ------------------------------------------------------------ the third law: types
#
# A field's annotation says what its values are; the rebuild kind says what it gives. The
# annotation is resolved once a class (field_types), the names only a type checker imports
# (torch's Placement, Target) standing for themselves; what a record gives is resolved the
# same way. ``admits`` is the little of PEP 484 the law needs: unions, Any, a class and its
# subclasses, except that a bool is no int (JSON tells them apart, and so do we), an int
# stands for a float (PEP 484's numeric tower), and a container's parameters.

_STAND_INS: dict[str, type] = {}
_CALLABLE: Any = collections.abc.Callable
_SCALAR_TYPES = (bool, int, float, str)


def _stand_in(name: str) -> type:
    """The one class standing for a name only a type checker imports (Placement, Target)."""
    return _STAND_INS.setdefault(name, type(name, (), {"__module__": "typing-only"}))


def _with_stand_ins(evaluate: Any) -> Any:
    """``evaluate(names)``, again with a stand-in for each name it finds undefined."""
    names: dict[str, Any] = {}
    while True:
        try:
            return evaluate(names)
        except NameError as exc:
            if exc.name is None or exc.name in names:
                raise
            names[exc.name] = _stand_in(exc.name)


def field_types(cls: type) -> dict[str, Any]:
    """Every field's annotation of the dataclass ``cls``, resolved (its module's aliases,
    Scalar, Injected, PlacementMap, followed), by field name."""
    return _with_stand_ins(lambda names: typing.get_type_hints(cls, localns=names))  # type: ignore[no-any-return]


@functools.cache
def record_type(record: str) -> Any:
    """What the rebuild function of ``record`` gives (its ``gives``), resolved."""
    space = {"Any": Any}
    return _with_stand_ins(lambda names: eval(KINDS[record].gives, space, names))  # noqa: S307


def _members(hint: Any) -> tuple[Any, ...]:
    """The members of a union, else the type itself."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(m for arg in typing.get_args(hint) for m in _members(arg))
    return (hint,)


def admits(annotation: Any, given: Any) -> bool:
    """Whether every value of type ``given`` is an instance of ``annotation`` (see above)."""
    return all(any(_admits_one(a, g) for a in _members(annotation)) for g in _members(given))


def _admits_one(annotation: Any, given: Any) -> bool:
    if annotation is Any or given is Any:
        return True
    outer, inner = typing.get_origin(annotation) or annotation, typing.get_origin(given) or given
    if outer is float and inner is int:
        return True
    if not (isinstance(outer, type) and isinstance(inner, type)) or not issubclass(inner, outer):
        return False
    if outer is int and inner is bool:
        return False
    if outer is _CALLABLE:  # its parameters are no container's
        return True
    wanted, found = typing.get_args(annotation), typing.get_args(given)
    if not wanted or not found:
        return True
    if wanted[-1] is Ellipsis:  # tuple[X, ...]
        return all(admits(wanted[0], f) for f in found if f is not Ellipsis)
    if found[-1] is Ellipsis or len(wanted) != len(found):
        return False
    return all(admits(w, f) for w, f in zip(wanted, found, strict=True))


def shown_type(hint: Any) -> str:
    """A resolved type as its annotation reads (``int | None``, ``Mapping[str, ...]``)."""
    if hint is type(None) or hint is None:
        return "None"
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(shown_type(m) for m in _members(hint))
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return repr(hint).replace("typing.", "").replace("collections.abc.", "").replace(
        "typing-only.", ""
    )


def _broken_type(hint: Any, rebuild: str, absent: Any, null_is_none: bool, field: Any) -> str:
    """How a crossing breaks the third law (docs/contract.md §6), said as what the rebuild
    gives that the annotation ``hint`` does not admit; "" where it holds. The rebuild gives
    its record's type, the absent value and (null read as None) None; each must be an
    instance of the annotation, and so must the dataclass default. The annotation's own
    scalar types must be what the rebuild gives (an int kind cannot carry a float field's
    2.5)."""
    if hint is Any:
        return ""
    gives = record_type(rebuild)
    absent_type = type(absent)
    default_types: list[Any] = []
    if field is not None and _states_default(field):
        default = _default_value(field)
        default_types.append(type(default))
    given = (gives, absent_type, *([type(None)] if null_is_none else []))
    wrong = [shown_type(m) for t in given for m in _members(t) if not admits(hint, m)]
    if wrong:
        wrong = list(dict.fromkeys(wrong))
        return f"{_listed(wrong)} {'is no instance' if len(wrong) == 1 else 'are no instances'} of it"
    missing = [t for t in _members(hint) if t in _SCALAR_TYPES and not admits(gives, t)]
    if missing:
        return f"it never gives {_listed([shown_type(t) for t in missing])}, which the field admits"
    for kind in default_types:
        if not admits(hint, kind):
            return f"the default, {shown_type(kind)}, is no instance of the annotation"
    return ""


def _listed(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


class KindError(ValueError):
    """A row whose crossing cannot be resolved; ``str()`` says why and the fix."""


_FACTORY_LITERALS: dict[Any, str] = {dict: "{}", list: "[]", tuple: "()"}


def _states_default(field: dataclasses.Field[Any]) -> bool:
    """Whether the dataclass field has a default (a value or a factory)."""
    return not (
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )


def _broken_law(
    written: Written,
    absent: str,
    parsed: Any,
    field: dataclasses.Field[Any] | None,
    rebuild: str = "",
) -> str:
    """How a presence breaks the defaults laws (docs/contract.md §6) for the dataclass
    ``field`` (None: the row names none), said as what comes back instead; "" when both
    hold (``absent``: the literal, ``parsed``: its value). (a) An absent key rebuilds the
    field's default. (b) A value freeze leaves
    unwritten rebuilds as itself: None where written when not None (where None is no
    default, freeze refuses it instead), the default where written when not the default,
    and a falsy value, as the one falsy default, where written when truthy."""
    stated = field is not None and _states_default(field)
    default = default_literal(field) if field is not None and stated else None
    if stated and default is None:
        return "the default has no Python literal, so no absent key can rebuild it"
    if default is not None and absent != default:
        return f"an artifact without the key rebuilds {absent} instead"
    if written is Written.TRUTHY and parsed:
        return (
            "a falsy value is never written (written when truthy), so 0, False or an "
            f"empty value would rebuild as {absent} instead"
        )
    value = _default_value(field) if default is not None and field is not None else None
    # (c) A default freeze writes comes back as itself, of its own type.
    if default is not None and value is not None and rebuild and _writes(written, parsed, value):
        gives = record_type(rebuild)
        if not admits(gives, type(value)):
            return (
                f"freeze writes it, and rebuild gives a {type(value).__name__} back as "
                f"{shown_type(gives)} instead"
            )
    return ""


def _writes(written: Written, absent: Any, value: Any) -> bool:
    """Whether freeze writes ``value`` under a row of this presence and absent value
    (Crossing.writes)."""
    if written is Written.ALWAYS:
        return True
    if written is Written.NOT_DEFAULT:
        return not (type(value) is type(absent) and value == absent)
    return bool(value) if written is Written.TRUTHY else value is not None


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


def _default_value(field: dataclasses.Field[Any]) -> Any:
    """The dataclass field's default (a factory's, made once)."""
    return field.default_factory() if callable(field.default_factory) else field.default


def parse_literal(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for a Python literal written as Python writes it (what a row or a
    kind name states as text, parsed once here); else ``(None, why)``."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None, f"{text!r} is not a Python literal"
    if repr(value) != text:
        return None, f"{text!r} is not written as Python writes it"
    return value, None


def literal_problem(text: str) -> str | None:
    """Why ``text`` is not a Python literal written as Python writes it, or None."""
    return parse_literal(text)[1]


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


def resolve(row: SpecField, field: dataclasses.Field[Any] | None, hint: Any = Any) -> Crossing:
    """The row's crossing: its kind names' records, and its presence, the row's own
    ``written``/``absent`` first, then its kind names', then (absent) the default of the
    dataclass ``field`` (None: a derived row, which names no field), held against the
    field's resolved annotation ``hint`` (field_types; Any: no type law). KindError says
    why it cannot be resolved."""
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
    parsed, problem = parse_literal(absent)
    if problem:
        raise KindError(f"absent={problem}")
    admits_none = field is None or admits(hint, type(None))
    null_is_none = written is Written.NOT_DEFAULT and parsed is not None and admits_none
    return Crossing(
        freeze=freeze.record,
        rebuild=rebuild.record,
        written=written,
        absent=absent,
        annotation=str(field.type) if field else "",
        freeze_record=KINDS[freeze.record],
        rebuild_record=KINDS[rebuild.record],
        broken_law=_broken_law(written, absent, parsed, field, rebuild.record),
        hint=hint,
        admits_none=admits_none,
        absent_parsed=parsed,
        broken_type=_broken_type(hint, rebuild.record, parsed, null_is_none, field)
        if field is not None
        else "",
    )


def crossings(rows: tuple[SpecField, ...], cls: type) -> dict[str, Crossing]:
    """Every row's crossing that names kinds, by row name, its field taken from ``cls``
    (the runtime's tables are the generator's, which refuses any it cannot resolve)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = field_types(cls)
    return {
        row.name: resolve(row, fields.get(row.name), hints.get(row.name, Any))
        for row in rows
        if row.freeze
    }
