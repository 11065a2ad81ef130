"""A fast path for codegen_meta.json: the standard library's bytes, written and read by msgspec.

The artifact's form is ``json.dumps(document, indent=2, sort_keys=True, allow_nan=False)``
plus one newline. With ``indent`` the standard library encodes in pure Python, and the
strict reader needs Python hooks; both are slow on a large plan. msgspec does the same
work in C, but its output differs from the standard library's in places (found by
experiment on msgspec 0.23, each one checked below):

- non-ASCII text is written raw (stdlib: ``\\uXXXX``), and so is 0x7f (stdlib: ``\\u007f``);
- a lone surrogate cannot be encoded at all (UnicodeEncodeError);
- floats: ``1e16``, ``1.5e-7``, ``0.00001`` (stdlib: ``1e+16``, ``1.5e-07``, ``1e-05``);
- NaN and infinity are written as ``null`` (stdlib refuses them);
- sets, frozensets, bytes, datetimes, UUIDs, Decimals, dataclasses and plain Enums are
  written (stdlib refuses them), and nesting deeper than the writer's limit is written;
- str, int and float subclasses other than Enums are refused (stdlib writes them).

So neither function here ever returns bytes that could differ: each returns None instead,
and the caller runs the standard library path, which gives the bytes or the error.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shardplan.collector import collector_paused

_ENCODER = msgspec.json.Encoder(order="sorted")  # sorted: stdlib's sort_keys, for str keys


class _NotCanonical(Exception):
    """Raised by the float hook to stop a decode early: the text is not stdlib's."""


def _stdlib_float(text: str) -> float:
    # Called by the decoder for every float literal (rare in a plan), with its text. The
    # standard library writes float.__repr__: any other text (an exponent msgspec writes
    # as 1e-7, a 1e400 that overflows to inf, a 0.00001 stdlib writes as 1e-05) is not
    # the canonical form. float() parses exactly as json.loads does by default.
    value = float(text)
    if repr(value) != text:
        raise _NotCanonical(text)
    return value


_DECODER = msgspec.json.Decoder(float_hook=_stdlib_float)

# The writer refuses nesting deeper than 500 levels (meta.MAX_DOCUMENT_DEPTH); msgspec
# does not. A container at level 501 sits on a line indented by 1000 spaces, so this
# finds every one. It also finds the members of a level-500 container, which the writer
# allows: a false alarm that only costs the fast path, for a nesting no plan has.
_MAX_DEPTH = 500
_TOO_DEEP = b"\n" + b" " * (2 * _MAX_DEPTH)


def _encode_compact(document: dict[str, Any]) -> bytes | None:
    """msgspec's compact, key-sorted JSON of ``document``; None where stdlib's text differs."""
    try:
        raw = _ENCODER.encode(document)
    except Exception:
        # TypeError (non-str key, unsupported type, str subclass), UnicodeEncodeError
        # (lone surrogate), ValueError (an int beyond sys.get_int_max_str_digits),
        # RecursionError (a cycle, or deep nesting), or anything user code raises while
        # msgspec reads a dataclass or Enum: no promise, the stdlib path reports it.
        return None
    if not raw.isascii() or b"\x7f" in raw:
        return None  # stdlib (ensure_ascii=True) escapes both as \uXXXX
    return raw


def _indent(raw: bytes) -> bytes | None:
    """The indented form of compact ``raw`` plus the newline; None if nested too deep."""
    text = msgspec.json.format(raw, indent=2) + b"\n"
    return None if _TOO_DEEP in text else text


def encode(document: dict[str, Any]) -> bytes | None:
    """The bytes of ``json.dumps(document, indent=2, sort_keys=True, allow_nan=False)``
    plus ``"\\n"``, UTF-8, or None when this fast path cannot promise those exact bytes.

    None covers every document the standard library refuses (NaN, a set, a cycle, ...),
    so a caller that falls back to it gets its error, or its bytes, unchanged.
    """
    raw = _encode_compact(document)
    text = None if raw is None else _indent(raw)
    if raw is None or text is None:
        return None
    # msgspec writes types the standard library refuses (a set as an array, a datetime
    # as a string, NaN as null, ...), and floats in other forms. Reading the output back
    # settles both at once, in C: the float hook refuses any float text that is not
    # float.__repr__, and the result equals the document only if every value in it is
    # one msgspec writes as stdlib does. That includes NaN and infinity (null reads back
    # as None), so no separate search for them is needed, and IntEnum and str Enum values
    # (equal to their value; both libraries write the value). A tuple reads back as a
    # list, which is not equal: tuples take the stdlib path, which writes them as arrays.
    try:
        # The collector paused: on a 10k-module artifact it takes 3/4 of the decode time.
        with collector_paused():
            same = _DECODER.decode(raw) == document
    except Exception:  # _NotCanonical, or an __eq__ of the document that raises
        return None
    return text if same else None


def decode(data: bytes | str) -> Any | None:
    """The document of ``data`` if ``data`` is exactly the canonical form, else None.

    Canonical: what ``encode`` gives for the document it holds. That one comparison
    proves what the strict standard library reader checks one value at a time: no key
    repeated (the re-encoded object would have fewer members), no NaN or Infinity (not
    JSON to msgspec), no number that overflows (the float hook refuses 1e400), and no
    other spelling of a value. None means "read it with the strict reader", which
    accepts a valid non-canonical file (compact, unsorted, raw UTF-8) or names its defect.
    """
    if isinstance(data, str):
        if not data.isascii():
            return None  # canonical text is ASCII
        data = data.encode("ascii")
    elif not data.isascii():
        return None  # also sends invalid UTF-8 to the reader that names it
    try:
        with collector_paused():  # as in encode()
            document = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError, _NotCanonical):
        return None
    if not isinstance(document, dict):
        return None
    # The decoded values are plain JSON types with stdlib float texts, so the read-back
    # check of encode() is not needed: the bytes alone decide.
    raw = _encode_compact(document)
    if raw is None or _indent(raw) != data:
        return None
    return document
