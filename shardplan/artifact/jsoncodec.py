"""A fast path for codegen_meta.json: the standard library's exact bytes, in C.

The artifact's form is ``json.dumps(document, indent=2, sort_keys=True, allow_nan=False)``
plus one newline. With ``indent`` the standard library encodes in pure Python, and the
strict reader needs Python hooks; both are slow on a large plan.

Writing, first: orjson writes the format itself (indent 2, sorted keys) where it provably
gives the standard library's bytes. It refuses sets, bytes, complex numbers, ints beyond
64 bits, keys that are not str, cycles and nesting beyond 254 levels, and (asked to)
dataclasses, datetimes and subclasses of str, int, dict and list; marshal, which writes
only the exact core types, refuses the UUIDs, Enums and other objects orjson would write.
A document both accept holds only None, bool, int, float, str, list, tuple and dict, and
for those orjson's bytes are the standard library's except for non-ASCII text and 0x7f
(written raw), NaN and infinity (written null) and some floats below 1e-4 (0.00001 and
1e-7, not 1e-05 and 1e-07): each is found in the output, which then is not used.

Writing, second: the standard library's C encoder writes the same tokens when it is not
asked to indent (the same escapes, ``float.__repr__``, sorted keys, and the same refusals:
NaN, a set, a cycle), and msgspec lays them out with ``indent=2``, in C. Its tokens are
copied, so the bytes are the standard library's by construction. What neither checks is
left to the caller's standard library path (None): a key that is not a str (json.dumps
would write 1 as "1"; msgspec's sorted encoder refuses it, found in one cheap pass), and
nesting deeper than the writer allows.

Reading, first (``decode_counted``, for a caller whose own pass visits every object):
msgspec decodes any layout of ASCII JSON, with a float hook that refuses what overflows
(``1e400``); it refuses NaN and Infinity (not JSON to msgspec) and reads ints beyond 64
bits exactly, as the standard library does. It keeps the last of two equal keys, so the
caller proves no key repeated by counting: the members of every object it visits
(``json_values.members_within`` counts the rest and bounds nesting) against the ':' bytes of the
file. Each member has its own ':' and a repeated key leaves the decoded objects fewer
members than the file holds, so equal counts prove none repeated; a ':' inside a string
only makes them differ, and then the second tier decides. ``decode_counted_apart`` gives
the same document holding less at once (read_plan's: the entries cut out in pieces and
decoded once the file's bytes are gone).

Reading, second: msgspec decodes, and the result is trusted only when encoding it again
gives the input bytes exactly; otherwise (None) the caller's strict reader runs. orjson
writes the form again (indent 2, sorted keys, the newline) in one pass; where it refuses
the document (an int beyond 64 bits, nesting past its 254 levels), msgspec's sorted
compact tokens, indented by msgspec, are compared instead. Equal bytes prove the file
is a writer's output of the document, which the standard library reads back to that
document, with no key repeated. Where the writers and the standard library differ
(found by experiment on msgspec 0.23 and orjson 3.13): both write non-ASCII and 0x7f
raw (stdlib: ``\\u00e9``, ``\\u007f``); msgspec writes floats as ``1e16``, ``1.5e-7``,
``0.00001`` (stdlib: ``1e+16``, ``1.5e-07``, ``1e-05``), orjson ``1e-7`` for ``1e-07``;
msgspec reads ``1e400`` as infinity and keeps the last of two equal keys. Each of these
makes the bytes differ, but for 0x7f, which a canonical file never holds raw: such a
file takes the strict reader, which accepts it or names its defect.
"""

from __future__ import annotations

import json
import marshal
import re
import secrets
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from shardplan.collector import pause_collector, resume_collector

_ENCODER = msgspec.json.Encoder(order="sorted")  # sorted: stdlib's sort_keys, for str keys


class _Refused(Exception):
    """Raised by a float hook to stop a decode early: a text this tier does not take."""


def _stdlib_float(text: str) -> float:
    # Called by the decoder for every float literal (rare in a plan), with its text. The
    # standard library writes float.__repr__: any other text (an exponent msgspec writes
    # as 1e-7, a 1e400 that overflows to inf, a 0.00001 stdlib writes as 1e-05) is not
    # the canonical form. float() parses exactly as json.loads does by default.
    value = float(text)
    if repr(value) != text:
        raise _Refused(text)
    return value


_DECODER = msgspec.json.Decoder(float_hook=_stdlib_float)


def _finite_float(text: str) -> float:
    # The first tier's hook: any spelling the standard library reads, to the same float
    # (float() is json.loads' default), but not one that overflows (the strict reader
    # refuses 1e400, naming it).
    value = float(text)
    if value == _INFINITY or value == -_INFINITY:
        raise _Refused(text)
    return value


_INFINITY = float("inf")
_ANY_LAYOUT_DECODER = msgspec.json.Decoder(float_hook=_finite_float)

# The writer refuses nesting deeper than 500 levels (meta.MAX_DOCUMENT_DEPTH); msgspec
# does not. A container at level 501 sits on a line indented by 1000 spaces, so this
# finds every one. It also finds the members of a level-500 container, which the writer
# allows: a false alarm that only costs the fast path, for a nesting no plan has.
_MAX_DEPTH = 500
_TOO_DEEP = b"\n" + b" " * (2 * _MAX_DEPTH)


def _encode_compact(document: dict[str, Any]) -> bytes | None:
    """msgspec's compact, key-sorted JSON of ``document``: the canonical tokens for a
    document decoded from JSON (plain types), checked ASCII; None where it cannot say."""
    try:
        raw = _ENCODER.encode(document)
    except Exception:
        # TypeError (a non-str key, a str subclass), UnicodeEncodeError (a lone
        # surrogate), ValueError (an int beyond the digit limit), RecursionError: the
        # stdlib path decides.
        return None
    if not raw.isascii() or b"\x7f" in raw:
        return None  # stdlib (ensure_ascii=True) escapes both as \uXXXX
    return raw


def _indent(raw: bytes) -> bytes | None:
    """The indented form of compact ``raw`` plus the newline; None if nested too deep."""
    text = msgspec.json.format(raw, indent=2) + b"\n"
    return None if _TOO_DEEP in text else text


_ORJSON_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS  # passed through to no default: TypeError
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_APPEND_NEWLINE  # the format's newline, written in place: no copy of the file
)
# orjson writes floats as float.__repr__ does, but some below 1e-4 (found in the output).
# Checked again here, once, for the orjson installed: another version, another tier.
_FLOAT_PROBE = [1e16, 1.5e16, 1e22, 1e308, 5e-324, 1e-4, 1.5e-4, 0.1, 123.456, -0.0, 2.5]
_ORJSON_FLOATS_AS_REPR = orjson.dumps(_FLOAT_PROBE) == json.dumps(
    _FLOAT_PROBE, separators=(",", ":")
).encode("ascii")


# Below 1e-4, orjson writes 0.00001 or 1e-7 where float.__repr__ writes 1e-05, 1e-07.
_ONE_DIGIT_EXPONENT = re.compile(rb"[0-9]e-[0-9](?![0-9])")


def _orjson_bytes(document: dict[str, Any]) -> bytes | None:
    """orjson's bytes of the format where they are the standard library's; else None."""
    if not _ORJSON_FLOATS_AS_REPR:
        return None
    try:
        text = orjson.dumps(document, option=_ORJSON_OPTIONS)
        marshal.dumps(document)  # refuses what is not an exact core type: UUID, Enum, ...
    except Exception:  # TypeError, ValueError, orjson.JSONEncodeError: the next tier decides
        return None
    if not text.isascii() or b"\x7f" in text or b"null" in text or b"0.0000" in text:
        return None  # raw non-ASCII, NaN or infinity (or a None), 1e-05 written 0.00001
    if b"e-" in text and _ONE_DIGIT_EXPONENT.search(text):
        return None  # 1e-07 written 1e-7
    return text


def encode_written(document: dict[str, Any], default: Callable[[Any], str]) -> bytes | None:
    """The format's bytes of write_plan's document (``freeze_for_writing``), or None where
    they may not be the standard library's: then the caller freezes and dumps as usual.

    ``default`` gives the text of each live placement the document holds; for anything
    else it raises, and so does orjson. No marshal pass and no null scan: every value
    freeze lets through is an exact JSON value or a str, int or float subclass (a
    subclass other than an Enum reaches ``default``, an Enum is written by its value, as
    json.dumps writes it), and freeze refuses NaN and infinity. What is left to look for
    is orjson's own spellings: raw non-ASCII and 0x7f, floats below 1e-4.
    """
    if not _ORJSON_FLOATS_AS_REPR:
        return None
    try:
        text = orjson.dumps(document, default=default, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if not text.isascii() or b"\x7f" in text or b"0.0000" in text:
        return None
    if b"e-" in text and _ONE_DIGIT_EXPONENT.search(text):
        return None
    return text


def _str_keys_only(document: dict[str, Any]) -> bool:
    """Whether every key at every level is a str: msgspec's sorted encoder refuses any
    other key, in C, where json.dumps would quietly write 1 as "1". A cycle is refused
    too (RecursionError)."""
    try:
        _ENCODER.encode(document)
    except Exception:  # also a lone surrogate, a str subclass: the stdlib path decides
        return False
    return True


def _stdlib_tokens_indented(document: dict[str, Any]) -> bytes | None:
    """The standard library C encoder's tokens, indented by msgspec; None where the
    caller's standard library path must decide."""
    if not _str_keys_only(document):
        return None
    # No circular check (it costs a third of the time): _str_keys_only has already refused
    # a cycle (RecursionError). The collector is paused: sorting keys builds a list of
    # pairs per object.
    paused = pause_collector()
    try:
        tokens = json.dumps(
            document, sort_keys=True, allow_nan=False, check_circular=False, separators=(",", ":")
        )
    except (TypeError, ValueError, RecursionError):
        return None
    finally:
        resume_collector(paused)
    return _indent(tokens.encode("ascii"))


def encode(document: dict[str, Any]) -> bytes | None:
    """The bytes of ``json.dumps(document, indent=2, sort_keys=True, allow_nan=False)``
    plus ``"\n"``, UTF-8, or None where the caller's standard library path must decide:
    a document it refuses (NaN, a set, a cycle, ...), a key that is not a str, nesting
    deeper than the writer allows. orjson first, then the standard library's tokens.
    """
    fast = _orjson_bytes(document)
    return fast if fast is not None else _stdlib_tokens_indented(document)


# orjson's layout of the form, for a document decoded from JSON (plain types, str keys).
_READ_BACK_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def _orjson_refuses(levels: int) -> bool:
    """Whether orjson refuses to write ``levels`` lists, one inside the other."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return True
    return False


# The read-back bounds nesting only through orjson's own limit (254 levels in orjson 3):
# checked once, for the orjson installed, that it refuses what the writer refuses.
_ORJSON_BOUNDS_DEPTH = _orjson_refuses(_MAX_DEPTH + 1)


def decode(data: bytes | str) -> Any | None:
    """The document of ``data`` if a writer, encoding it again, gives ``data`` exactly;
    else None, and the caller's strict reader runs.

    That one comparison proves what the strict standard library reader checks one value
    at a time: no key repeated (the re-encoded object would have fewer members), no NaN
    or Infinity (not JSON to msgspec), no number that overflows (the float hook refuses
    1e400), no other spelling of a value, and nesting the writer writes (orjson refuses
    more than 254 levels; msgspec's layout shows level 501 as a line indented by 1,000
    spaces). Canonical files of ASCII text and floats without an exponent pass; the rest
    (compact, unsorted, raw UTF-8, ``1e+16``) take the strict reader, which accepts them
    or names their defect.
    """
    if isinstance(data, str):
        if not data.isascii():
            return None  # canonical text is ASCII
        data = data.encode("ascii")
    elif not data.isascii():
        return None  # also sends invalid UTF-8 to the reader that names it
    if b"\x7f" in data:
        return None  # stdlib writes it \u007f, where orjson and msgspec write it raw
    document = _decoded_object(_DECODER, data)
    if document is None:
        return None
    # The decoded values are plain JSON types with stdlib float texts, so the read-back
    # check of encode() is not needed: the bytes alone decide.
    if _ORJSON_BOUNDS_DEPTH:
        try:
            written = orjson.dumps(document, option=_READ_BACK_OPTIONS)
        except orjson.JSONEncodeError:
            pass  # an int beyond 64 bits, nesting past orjson's: msgspec's proof decides
        else:
            return document if written == data else None
    return document if _msgspec_writes(document, data) else None


def _msgspec_writes(document: dict[str, Any], data: bytes) -> bool:
    """Whether msgspec's sorted tokens of ``document``, indented, are ``data`` exactly,
    with no line nested deeper than the writer writes."""
    raw = _encode_compact(document)
    if raw is None:
        return False
    indented = msgspec.json.format(raw, indent=2)
    del raw  # the compared copies are all the proof holds besides the input and document
    # The input is the indented form plus the format's newline: compared in place, not by
    # building that form with its newline (a third copy of the file at the read's peak).
    return (
        len(data) == len(indented) + 1
        and data.endswith(b"\n")
        and data.startswith(indented)
        and _TOO_DEEP not in indented
    )


def decode_counted(data: bytes) -> tuple[dict[str, Any], int] | None:
    """The document ``json.loads(data)`` gives, if ``data`` is ASCII JSON whose top level is
    an object, and the number of ':' bytes in ``data``; None where this tier cannot say
    (then the second tier, ``decode``, or the strict reader decides).

    What it does not prove is left to the caller: that no key repeats (its members,
    counted, must equal the ':' bytes returned) and that nothing nests deeper than the
    writer writes (``members_within`` does both for what the caller's pass does not
    visit). Any layout is read: compact, unsorted, another indent.
    """
    if not data.isascii():
        return None  # raw UTF-8 and invalid bytes: the strict reader reads or names them
    document = _decoded_object(_ANY_LAYOUT_DECODER, data)
    return None if document is None else (document, data.count(b":"))


# Where a member of an object at the document's second level ends and the next begins, in
# the canonical layout (indent 2): the object apart is cut there, never inside a string (a
# string holds no raw newline).
_MEMBER_END = b'\n    },\n    "'
_PIECES = 16  # the object apart is decoded in this many pieces, at most
_MEMBER_WINDOW = 1 << 16  # how far back from one top-level member the one before is sought


def decode_counted_apart(data: bytes, apart: str) -> tuple[dict[str, Any], list[bytes], int] | None:
    """``decode_counted``, holding less at once: the document but the object under the
    top-level key ``apart`` (a plan's entries, most of the file), that object's text copied
    out of ``data`` in pieces cut between its members, and the ':' bytes of ``data``. Once
    the caller has dropped ``data``, ``decode_pieces`` decodes the pieces one by one, each
    dropped once read: the file's bytes and the whole document are never held together.

    The object is found by its canonical opening line and closing brace; the rest of the
    file is decoded with a random string in its place, which the decoded document must
    hold under ``apart`` at its top level (a file cannot hold a string it cannot know), so
    the text cut out is that object's. A file of another layout is decoded whole (no
    pieces). None where this tier cannot say, as decode_counted."""
    if not data.isascii() or not apart.isascii():
        return None
    found = _object_at_top(data, apart)
    if found is None:
        whole = decode_counted(data)
        return None if whole is None else (whole[0], [], whole[1])
    start, stop = found
    placeholder = "\0" + secrets.token_hex(16)
    rest = b"".join((data[:start], b'"\\u0000', placeholder[1:].encode(), b'"', data[stop:]))
    document = _decoded_object(_ANY_LAYOUT_DECODER, rest)
    if document is None or document.get(apart) != placeholder:
        return None
    document[apart] = {}
    return document, _cut(data, start, stop), data.count(b":")


def _object_at_top(data: bytes, key: str) -> tuple[int, int] | None:
    """Where the object under the top-level ``key`` sits in ``data``, laid out canonically
    (indent 2): from its "{" to just past its "}"; None if it is not found so.

    A forward search for its closing line stops at every line's indent (1.2 µs a module, a
    plan's entries being most of the file), so the end is found from the file's end: each
    top-level member after the object opens on a line of two spaces and a quote (no string
    holds a raw newline), and each is sought within _MEMBER_WINDOW bytes of the next. None
    within it: the object ends there. A later member longer than that is taken for the
    object's end; the piece holding it then decodes to no object, and the pair's path
    reads the file."""
    opening = b'\n  "' + key.encode("ascii") + b'": {\n'
    start = data.find(opening)
    if start < 0:
        return None
    start += len(opening) - 2  # at its "{"
    after = data.rfind(b"\n}")  # the document's closing brace
    if after <= start:
        return None
    while True:
        line = data.rfind(b'\n  "', max(start, after - _MEMBER_WINDOW), after)
        if line < 0:
            break
        after = line
    stop = after - 1 if data[after - 1] == ord(",") else after  # just past its "}"
    return (start, stop) if data.endswith(b"\n  }", start, stop) else None


def decode_pieces(document: dict[str, Any], apart: str, pieces: list[bytes]) -> bool:
    """Decode the pieces ``decode_counted_apart`` cut, into ``document[apart]``, emptying
    ``pieces`` as it goes (each piece's bytes go once read). False where this tier cannot
    say: a piece that is no object (a cut the layout does not allow, not between two
    members), or what decode_counted refuses. A key repeated across pieces is kept once,
    and the members the caller counts fall short of the ':' bytes, as for any repeat."""
    members = document.get(apart)
    paused = pause_collector()
    try:
        pieces.reverse()  # popped from the end, in the file's order
        while pieces:
            found = _ANY_LAYOUT_DECODER.decode(pieces.pop())
            if type(found) is not dict or type(members) is not dict:
                return False
            members.update(found)
    except (msgspec.DecodeError, RecursionError, _Refused):
        return False
    finally:
        resume_collector(paused)
    return True


def _cut(data: bytes, start: int, stop: int) -> list[bytes]:
    """The object ``data[start:stop]`` as up to _PIECES objects of its members, in order:
    cut after a member's end near each share of its length."""
    pieces, at, share = [], start + 1, (stop - start) // _PIECES + 1
    text = memoryview(data)  # each piece copied once, by join
    while True:
        end = data.find(_MEMBER_END, at + share, stop)
        if end < 0:
            pieces.append(b"".join((b"{", text[at:stop])))
            return pieces
        pieces.append(b"".join((b"{", text[at : end + 6], b"}")))  # through the member's "}"
        at = end + 12  # from the next member's opening quote


def _decoded_object(decoder: msgspec.json.Decoder[Any], data: bytes) -> dict[str, Any] | None:
    """The object ``decoder`` reads from ASCII ``data``, collector paused (it builds a
    container per object: see collector.py); None for anything else: not JSON to msgspec
    (NaN, a lone surrogate, an int past the standard library's digit limit), nested past
    the interpreter's stack, a float text the hook refuses, or not an object."""
    paused = pause_collector()
    try:
        document = decoder.decode(data)
    except (msgspec.DecodeError, RecursionError, _Refused):
        return None
    finally:
        resume_collector(paused)
    return document if type(document) is dict else None
