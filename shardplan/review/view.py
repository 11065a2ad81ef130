"""An artifact as a reviewer reads it: the mesh axes, the plan-level fields, the keys no
row owns, then one line per module and field, placements in their text form
(``tp=S(0)``), sorted so that two versions diff line by line.

The artifact is read by ``load_meta`` and only looked at: nothing is rebuilt, nothing
imported, no torch. A placement is recognised by its text (``R``, ``S(0)``, ``P(sum)``,
the grammar of ``shardplan.convert.placement_text``), so every field that holds one,
whatever its row, shows as one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from shardplan.artifact.meta import load_meta
from shardplan.artifact.shapes import UNSET
from shardplan.convert.placement_text import PLACEMENT_PATTERN
from shardplan.errors import MetaError, json_type, key_path
from shardplan.review.fold import Segments, fold_keyed, name_text, natural_key, natural_sorted
from shardplan.staleness import generated_modules
from shardplan.table.format import MATCH_KEY

if TYPE_CHECKING:
    from generated.meta import NESTED_KEYS, OWNED_KEYS, CodegenMeta
else:
    (_generated,) = generated_modules("meta")
    NESTED_KEYS, OWNED_KEYS = _generated.NESTED_KEYS, _generated.OWNED_KEYS

_PLACEMENT = re.compile(PLACEMENT_PATTERN)
_PACK = msgspec.msgpack.Encoder().encode
_JSON = msgspec.json.Encoder().encode
# A value longer than this, in a line of its own (a plan-level field, another producer's
# key), is shown by its size and digest: it would be one unreadable line.
SHORT = 120
PLAN = "plan"  # the head of plan-level lines; a module cannot be named so in a line's place


@dataclass
class PlanView:
    """What ``show`` and ``diff`` read of one artifact: each module's entry and rule (the
    rule without its ``match``), the plan-level keys rows own (a nested one as
    ``parallel_dims.loss_parallel``) and the keys no row owns, each as the file holds it."""

    source: str
    mesh: list[str] | None  # mesh_dim_names; None when null or absent
    entries: Mapping[str, dict[str, Any]]
    rules: dict[str, dict[str, Any]]
    rule_order: list[str]
    plan: dict[str, Any] = field(default_factory=dict)
    other: dict[str, Any] = field(default_factory=dict)


def read_view(path: str | Path) -> PlanView:
    """Load the artifact at ``path`` (``load_meta``) and index it; a MetaError names what
    cannot be read: a missing file, text that is not JSON, an entry that is not an object,
    a rule without a module or a second rule for one."""
    return view_of(load_meta(path), str(path))


def view_of(meta: CodegenMeta, source: str) -> PlanView:
    """The view of a loaded ``meta``; ``source`` names it in messages."""
    if not set(map(type, meta.param_plan.values())) <= {dict}:  # a read's: all dicts
        for fqn, entry in meta.param_plan.items():
            if not isinstance(entry, dict):
                raise MetaError(
                    key_path("param_plan", fqn), f"expected an object, got {json_type(entry)}"
                )
    rules = _rules(meta.injections)
    mesh = meta.mesh_dim_names
    view = PlanView(
        source,
        [str(a) for a in mesh] if isinstance(mesh, list) else None,
        meta.param_plan,
        rules,
        list(rules),
    )
    for key in OWNED_KEYS:
        value = getattr(meta, key, UNSET)
        if key in NESTED_KEYS and isinstance(value, dict):
            for inner, held in value.items():
                owned = inner in NESTED_KEYS[key]
                (view.plan if owned else view.other)[f"{key}.{inner}"] = held
        elif value is not UNSET:
            view.plan[key] = value
    for key, value in meta.extra.items():
        (view.plan if key in OWNED_KEYS else view.other)[key] = value
    return view


def _rules(injections: list[Any]) -> dict[str, dict[str, Any]]:
    """Each rule by its module, without its match; a MetaError names a rule that is not an
    object with a match string, or a second rule for a module."""
    # A read's rules are objects with one match string each, one rule a module: checked
    # in C first, and only otherwise rule by rule, to name the one at fault.
    if set(map(type, injections)) <= {dict}:
        matches: list[Any] = list(map(dict.get, injections, repeat(MATCH_KEY)))
        if set(map(type, matches)) <= {str} and len(set(matches)) == len(matches):
            rules: dict[str, dict[str, Any]] = dict(
                zip(matches, map(dict, injections), strict=True)
            )
            for held in rules.values():
                del held[MATCH_KEY]  # the rule without its match, in its order
            return rules
    rules = {}
    for index, rule in enumerate(injections):
        if not isinstance(rule, dict) or not isinstance(rule.get(MATCH_KEY), str):
            raise MetaError(
                f"injections[{index}]", f"expected an object with a {MATCH_KEY!r} string"
            )
        fqn = rule[MATCH_KEY]
        if fqn in rules:
            raise MetaError(
                f"injections[{index}]", f"a second rule for {fqn!r}; a module has at most one"
            )
        rules[fqn] = held = dict(rule)
        del held[MATCH_KEY]
    return rules


class Texts:
    """The text of values, with the axes in one order: the mesh's, then the others sorted.
    Placements repeat across a plan, so each distinct one is written once."""

    def __init__(self, mesh: list[str] | None) -> None:
        self._rank = {axis: index for index, axis in enumerate(mesh or ())}
        self._placements: dict[tuple[tuple[str, Any], ...], str | None] = {}

    def _axis_key(self, axis: str) -> tuple[int, str]:
        return (self._rank.get(axis, len(self._rank)), axis)

    def placement(self, value: object) -> str | None:
        """``dp=R tp=S(0)`` for a named placement ``{axis: text}``; None for anything else."""
        if type(value) is not dict or not value:
            return None
        try:
            key = tuple(value.items())
            text = self._placements.get(key, ...)
        except TypeError:  # an unhashable value: not a placement text
            return None
        if text is ...:
            text = self._placements[key] = self._placement_text(value)
        return text

    def _placement_text(self, value: dict[Any, Any]) -> str | None:
        if not all(isinstance(t, str) and _PLACEMENT.match(t) for t in value.values()):
            return None
        if not all(isinstance(axis, str) for axis in value):
            return None
        return " ".join(f"{axis}={value[axis]}" for axis in sorted(value, key=self._axis_key))

    def table(self, value: object) -> dict[str, str] | None:
        """``{name: placement text}`` for a placement table (a parameter map, an in/out
        contract); None for anything else."""
        if type(value) is not dict or not value:
            return None
        texts = {}
        for name, named in value.items():
            text = self.placement(named)
            if text is None:
                return None
            texts[name] = text
        return texts

    def field_lines(self, field_name: str, value: object) -> list[tuple[str, str]]:
        """The ``(label, text)`` lines of one field: one a name for a placement table."""
        table = self.table(value)
        if table is not None:
            return [(f"{field_name}[{name}]", text) for name, text in table.items()]
        text = self.placement(value)
        return [(field_name, text if text is not None else compact(value))]


def compact(value: object) -> str:
    """One-line JSON, keys sorted: what a value other than a placement shows as."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is str and value.isascii() and value.isprintable() and '"' not in value:
        return f'"{value}"' if "\\" not in value else json.dumps(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def summary(value: object) -> str:
    """The value if short, else its JSON type, size and digest: a change still shows."""
    if isinstance(value, (list, dict)) and len(value) > SHORT:
        text = json.dumps(value, sort_keys=True)  # for the digest only
    else:
        text = compact(value)
    if len(text) <= SHORT:
        return text
    size = f"{len(value)} items" if isinstance(value, (dict, list)) else f"{len(text)} characters"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"<{json_type(value)}, {size}, sha256 {digest}>"


def module_lines(view: PlanView, texts: Texts, fqn: str) -> list[tuple[str, str]]:
    """The ``(label, text)`` lines of one module: its entry's fields and its rule's
    (``rule.inner_wrapper``)."""
    lines: list[tuple[str, str]] = []
    entry = view.entries.get(fqn)
    if entry is not None:
        if not entry:
            lines.append(("entry", "{}"))
        for key in sorted(entry):
            lines += texts.field_lines(key, entry[key])
    rule = view.rules.get(fqn)
    if rule is not None:
        if not rule:
            lines.append(("rule", "{}"))
        for key in sorted(rule):
            lines += texts.field_lines(f"rule.{key}", rule[key])
    return lines


def plan_lines(view: PlanView) -> list[str]:
    """The plan-level lines, then the keys no row owns (``other``), one a key; a long
    value (``frozen_sharded_params``, derived from the entries) by its size and digest."""
    return [
        f"{head} {key}: {summary(keys[key])}"
        for head, keys in ((PLAN, view.plan), ("other", view.other))
        for key in sorted(keys)
    ]


def mesh_line(view: PlanView) -> str:
    """The first line: the mesh axes, in mesh order."""
    if view.mesh is not None:
        return "mesh: " + " ".join(view.mesh)
    return "mesh: not recorded (the full mesh)"


def module_names(view: PlanView) -> list[str]:
    """Every module the artifact names, in an entry or a rule, sorted naturally (names
    whose keys tie, as ``07`` and ``7``, by their text)."""
    # In the file's order, nearly the natural one: the sort finds its runs.
    return natural_sorted([*view.entries, *(view.rules.keys() - view.entries.keys())])


class Blocks:
    """Each module's lines after its name (`` label: text``), written once for each
    distinct entry and rule: the modules of a layer repeat theirs in every layer."""

    def __init__(self, view: PlanView) -> None:
        self.view = view
        self.texts = Texts(view.mesh)
        self._blocks: dict[bytes, tuple[str, ...]] = {}

    def keys(self) -> dict[str, bytes]:
        """Each module's content (entry and rule), as bytes to compare and hash: the entry's
        msgpack bytes, then the rule's (each self-delimiting, so no two pairs read alike);
        JSON bytes for all where msgpack cannot hold a value (an int beyond 64 bits)."""
        entries, rules = self.view.entries, self.view.rules
        try:
            pack = _PACK
            keys = dict(zip(entries, map(pack, entries.values()), strict=True))
            # Each rule's bytes after its module's entry's (None's for a rule alone), in C.
            held = list(map(keys.get, rules, repeat(pack(None))))
            keys.update(
                zip(rules, map(bytes.__add__, held, map(pack, rules.values())), strict=True)
            )
            return keys
        except (OverflowError, msgspec.EncodeError):
            text = _JSON
            return {f: b"j" + text((entries.get(f), rules.get(f))) for f in {*entries, *rules}}

    def of_key(self, key: bytes, fqn: str) -> tuple[str, ...]:
        """The lines of the content ``key`` (``fqn``: a module holding it)."""
        block = self._blocks.get(key)
        if block is None:
            lines = module_lines(self.view, self.texts, fqn)
            block = self._blocks[key] = tuple(sorted(f" {label}: {text}" for label, text in lines))
        return block


def show_text(view: PlanView, *, collapse: bool = False) -> str:
    """The text of ``shardplan show``: the mesh line, the plan's lines, the modules'; each
    line ends with a newline."""
    return "".join(show_parts(view, collapse=collapse))


# Modules a part of show's text holds: about a megabyte, which the allocator hands back
# part after part, where the whole text would be fresh memory, page by page, three times
# over (the modules' texts, their join, its encoding for the output).
MODULES_A_PART = 2048


def show_parts(view: PlanView, *, collapse: bool = False) -> Iterator[str]:
    """``show_text`` in parts, each of whole lines, to be written one after the other."""
    if collapse:
        yield "".join(line + "\n" for line in show_lines(view, collapse=True))
        return
    blocks = Blocks(view)
    yield "".join(line + "\n" for line in [mesh_line(view), *plan_lines(view)])
    keys = blocks.keys()
    # Each distinct block's lines once, as the parts its modules' names join: a module's
    # text is ``fqn.join(("", " a: x\n", " b: y\n"))``, one call in C.
    parts = {
        key: ("", *(line + "\n" for line in blocks.of_key(key, fqn)))
        for key, fqn in dict(zip(keys.values(), keys, strict=True)).items()  # one module a block
    }
    names = module_names(view)
    modules = map(str.join, names, map(parts.__getitem__, map(keys.__getitem__, names)))
    while part := "".join(islice(modules, MODULES_A_PART)):
        yield part


def show_lines(view: PlanView, *, collapse: bool = False) -> list[str]:
    """The lines of ``shardplan show`` (``show_text`` without the newlines)."""
    if not collapse:
        return show_text(view).splitlines()
    blocks = Blocks(view)
    # The modules alike folded first (a layer's modules), then each line across them.
    alike = fold_keyed(blocks.keys().items())
    module_items = fold_keyed(
        (segments, line)
        for segments, key in alike
        for line in blocks.of_key(key, member_of(segments))
    )
    shown = sorted((name_text(segments), line) for segments, line in module_items)
    shown.sort(key=lambda pair: natural_key(pair[0]))
    return [mesh_line(view), *plan_lines(view)] + [name + line for name, line in shown]


def member_of(segments: Segments) -> str:
    """One module a folded name stands for."""
    return ".".join(s if isinstance(s, str) else str(min(s)) for s in segments)
