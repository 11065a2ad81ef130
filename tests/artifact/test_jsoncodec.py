"""The msgspec fast path of codegen_meta.json (shardplan/artifact/jsoncodec.py).

Its one promise: bytes it gives are the standard library's bytes, and a document it
reads is what the strict standard library reader would give. Everywhere else it steps
aside (None), and the callers in meta.py run the standard library path unchanged.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from shardplan.artifact import jsoncodec, meta
from shardplan.artifact.meta import (
    KNOWN_KEYS,
    MAX_DOCUMENT_DEPTH,
    CodegenMeta,
    dump_meta,
    meta_from_dict,
    meta_to_bytes,
    meta_to_dict,
    meta_to_json,
)
from shardplan.convert.json_values import members_within
from shardplan.errors import MetaError
from tests.cases import PLAIN, Name, Point, cycle, nested_lists, stdlib_bytes, stdlib_only
from tests.helpers import CORPUS_FILES


def stdlib_bytes_or_none(document: Any) -> bytes | None:
    try:
        return stdlib_bytes(document)
    except (TypeError, ValueError, RecursionError):
        return None


# ------------------------------------------------------------------ random documents

# Text as msgspec and the standard library write it differently: non-ASCII, 0x7f,
# control characters, quotes, lone surrogates (which msgspec cannot encode at all).
SPECIAL_TEXT = ["", "\x7f", "\x00", "\b\f\n\r\t\x1f", '"\\/', "é", "\u2028", "😀", "\ud800"]
# Numbers at the edges of both writers: big ints, and floats whose text differs.
SPECIAL_NUMBERS = [2**63, 2**64, -(2**63) - 1, 10**30, -(10**30), -0.0, 5e-324, 1e16,
                   1e15, 1e-7, 1e-5, 1e-4, 1e308, 1e-100, 0.1, math.nan, math.inf, -math.inf]  # fmt: skip
plain_texts = st.text("abz019._", max_size=4)  # what FQNs and placements are made of
texts = st.one_of(
    plain_texts,
    st.sampled_from(SPECIAL_TEXT),
    st.text(st.characters(max_codepoint=0x2FF, exclude_categories=()), max_size=4),
)
# Floats both libraries write without an exponent, in the same text.
plain_floats = st.floats(-1e15, 1e15).filter(lambda x: x == 0 or abs(x) >= 1e-4)
plain_scalars = st.one_of(st.none(), st.booleans(), st.integers(), plain_floats, plain_texts)
scalars = st.one_of(
    plain_scalars,
    st.floats(),  # any float, including nan and inf
    st.sampled_from(SPECIAL_NUMBERS),
    texts,
)


def documents_of(
    keys: st.SearchStrategy[str], leaves: st.SearchStrategy[Any], *, tuples: bool
) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with ``keys`` at every level and ``leaves`` as scalars, nesting lists and
    dicts, and tuples if ``tuples`` (a tuple always leaves the fast path)."""

    def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        made = [st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)]
        if tuples:
            made.append(st.lists(inner, max_size=3).map(tuple))
        return st.one_of(made)

    values = st.recursive(leaves, containers, max_leaves=8)
    return st.dictionaries(keys.filter(lambda key: key not in KNOWN_KEYS), values, max_size=3)


# Half plain documents, which must mostly take the fast path, half with any value.
documents = st.one_of(
    documents_of(plain_texts, plain_scalars, tuples=False),
    documents_of(texts, scalars, tuples=True),
)
# A drawn document costs Hypothesis about 7 ms here: the document properties run at half
# the profile's count (the suite's budget): 500 in CI.
half_the_profile = settings(max_examples=max(settings().max_examples // 2, 100))


@half_the_profile
@given(documents)
def test_encode_and_its_orjson_tier_give_the_stdlib_bytes_or_none(document: dict[str, Any]) -> None:
    """Both fast writers on the same draws (one property: the draws are its cost)."""
    for fast in (jsoncodec.encode(document), jsoncodec._orjson_bytes(document)):
        if fast is not None:
            assert fast == stdlib_bytes(document)


@half_the_profile
@given(documents)
def test_meta_to_json_gives_the_stdlib_bytes_or_a_meta_error_where_stdlib_refuses(
    document: dict[str, Any],
) -> None:
    artifact = CodegenMeta(extra=document)
    expected = stdlib_bytes_or_none(meta_to_dict(artifact))
    if expected is None:
        with pytest.raises(MetaError):
            meta_to_json(artifact)
    else:
        assert meta_to_bytes(artifact) == expected
        assert meta_to_json(artifact) == expected.decode()


@half_the_profile
@given(documents)
def test_decode_reads_only_the_canonical_bytes_and_reads_them_as_stdlib_does(
    document: dict[str, Any],
) -> None:
    canonical = stdlib_bytes_or_none(document)
    if canonical is None:
        return
    decoded = jsoncodec.decode(canonical)
    if decoded is not None:  # repr tells -0.0 from 0.0 and 1 from 1.0 from True
        assert repr(decoded) == repr(json.loads(canonical))
    for text in (
        json.dumps(document),
        json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        json.dumps(document, indent=2) + "\n",
    ):
        assert jsoncodec.decode(text) is None or text.encode() == canonical


# ------------------------------------------------------------------ the first tier: counted


def counted(raw: bytes) -> Any | None:
    """The first tier as a reader runs it on its own: decoded, every object's members
    counted against the file's ':' bytes and nesting bounded; None where it cannot say."""
    found = jsoncodec.decode_counted(raw)
    if found is None:
        return None
    document, colons = found
    return document if members_within(document, MAX_DOCUMENT_DEPTH) == colons else None


def strictly(raw: bytes) -> Any:
    """What load_meta's strict reader gives for ``raw`` (a MetaError where it refuses)."""
    data = meta._parse_strictly(raw.decode("utf-8"), "f")
    meta._refuse_deeper_than_written(data, "f")
    return data


def layouts(document: dict[str, Any]) -> list[bytes]:
    """``document`` as several producers write it, and with a key repeated (compact and
    indented: the first member written again, with another value)."""
    texts = [
        json.dumps(document),
        json.dumps(document, separators=(",", ":")),
        json.dumps(document, indent=2, sort_keys=True) + "\n",
        json.dumps(document, indent=4, ensure_ascii=False),
    ]
    for key in list(document)[:1]:
        texts.append("{" + json.dumps(key) + ": 0, " + json.dumps(document)[1:])
        texts.append("{\n  " + json.dumps(key) + ": [],\n" + json.dumps(document, indent=2)[2:])
    return [text.encode("utf-8", "surrogatepass") for text in texts]


@half_the_profile
@given(documents)
def test_the_counted_tier_reads_what_the_strict_reader_reads_or_steps_aside(
    document: dict[str, Any],
) -> None:
    """Whatever layout: where the count proves the document, the strict reader accepts
    the file and gives the same document (repr: -0.0, 1 and 1.0, True told apart); a
    repeated key, NaN, 1e400 or a lone surrogate never passes."""
    for raw in layouts(document):
        decoded = counted(raw)
        if decoded is not None:
            assert repr(decoded) == repr(strictly(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":1}',
        b'{"a":{"b":1,"b":2},"c":"::"}',  # two colons in a string cannot hide the repeat
        b'{"a":{"b":1,"b":2},"c":"\\u003a"}',  # nor an escaped one, which is no ':' byte
        b'{"a":NaN}',
        b'{"a":-Infinity}',
        b'{"a":1e400}',
        b'{"a":-1' + b"0" * 400 + b".0}",
        b'{"a":"\\ud800"}',
        b'{"a":' + b"1" * 4301 + b"}",  # past the standard library's digit limit
        b'{"a":"\xc3\xa9"}',  # raw UTF-8: the strict reader reads it
        b"[]",
        b'{"a":1} x',
    ],
)
def test_the_counted_tier_steps_aside_for_what_it_cannot_prove(raw: bytes) -> None:
    assert counted(raw) is None


def test_the_counted_tier_reads_big_ints_exactly_and_any_float_spelling() -> None:
    raw = b'{"big":123456789012345678901234567890,"f":[1E5,0.00001,1e-7,-0.0]}'
    assert repr(counted(raw)) == repr(json.loads(raw))


def test_the_counted_tier_bounds_nesting_in_a_compact_file() -> None:
    """No indentation to scan: the count's own walk refuses what the writer would not write."""
    allowed = json.dumps(
        {"x": nested_lists(MAX_DOCUMENT_DEPTH - 1)}, separators=(",", ":")
    ).encode()
    too_deep = json.dumps({"x": nested_lists(MAX_DOCUMENT_DEPTH)}, separators=(",", ":")).encode()
    assert counted(allowed) == json.loads(allowed) == strictly(allowed)
    assert jsoncodec.decode_counted(too_deep) is not None
    assert counted(too_deep) is None
    with pytest.raises(MetaError, match="nests deeper than 500 levels"):
        strictly(too_deep)


def test_a_colon_in_a_string_sends_the_file_to_the_second_tier() -> None:
    raw = b'{"url":"https://example.org"}'
    document, colons = jsoncodec.decode_counted(raw) or ({}, 0)
    assert (members_within(document, 2), colons) == (1, 2)


# ------------------------------------------------------------------ the fast path is taken


def test_encode_takes_the_fast_path_for_a_plain_artifact() -> None:
    assert jsoncodec.encode(PLAIN) == stdlib_bytes(PLAIN)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_encode_takes_the_fast_path_for_each_corpus_file(path: Path) -> None:
    raw = path.read_bytes()
    assert jsoncodec.encode(json.loads(raw)) == raw


# (str, Enum), not StrEnum: the spelling planners use (tests/strategies.py).
class Axis(str, enum.Enum):  # noqa: UP042
    TP = "tp"


class Size(enum.IntEnum):
    TWO = 2


# Values the fast path writes, in the standard library's exact bytes.
FAST = [
    pytest.param({"x": '\b\f\n\r\t\x00\x1f"\\/'}, id="control_chars"),
    pytest.param({"x": [2**63, 2**64, -(2**63) - 1, 10**30]}, id="big_ints"),
    pytest.param({"x": [-0.0, 0.0001, 1e15, 9999999999999998.0, 0.1]}, id="floats"),
    # Exponents of three digits: no "+" and no padding, so both write the same text.
    pytest.param({"x": [5e-324, 1e-100, 2.5e-300]}, id="exponent_floats_alike"),
    pytest.param({"x": [True, False, None]}, id="constants"),
    pytest.param({"x": Axis.TP, "y": Size.TWO}, id="enum_values"),
    pytest.param({Axis.TP: 1, "a": 2}, id="str_enum_key"),  # hashes and sorts as its str
    pytest.param({"x": collections.OrderedDict([("b", 1), ("a", 2)])}, id="dict_subclass"),
    pytest.param({"x": nested_lists(498)}, id="depth_499"),  # plus the document: 499 levels
    # Written by the standard library's C encoder, which gives the exact tokens where
    # msgspec's own would differ (escapes, float texts) or read back otherwise (tuples).
    pytest.param({"x": "é"}, id="non_ascii"),
    pytest.param({"x": "\u2028", "é": 1}, id="line_separator_and_non_ascii_key"),
    pytest.param({"x": "\x7f"}, id="delete_char"),
    pytest.param({"x": [1.5e-7, 1e16, 1e-5, 1e308, 0.1]}, id="float_texts"),
    pytest.param({"x": (1, ("a", 2.5))}, id="tuples"),
]


@pytest.mark.parametrize("document", FAST)
def test_encode_takes_the_fast_path_and_gives_the_stdlib_bytes(
    document: dict[str, Any],
) -> None:
    assert jsoncodec.encode(document) == stdlib_bytes(document)


def test_dump_meta_of_a_plain_artifact_never_runs_the_stdlib_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifact = meta_from_dict(PLAIN)
    expected = stdlib_bytes(meta_to_dict(artifact))
    stdlib_only(monkeypatch)
    dump_meta(artifact, tmp_path / "codegen_meta.json")
    assert (tmp_path / "codegen_meta.json").read_bytes() == expected


# ------------------------------------------------------------------ the fallback is taken


class Color(enum.Enum):
    RED = 1


# Each value the standard library refuses, or that msgspec refuses where the standard
# library writes it (a lone surrogate, a str subclass), or that the writer refuses.
FALLBACK = [
    pytest.param("\ud800", id="lone_surrogate"),
    pytest.param(math.nan, id="nan"),
    pytest.param(-math.inf, id="infinity"),
    pytest.param({1: "x"}, id="non_str_key"),
    pytest.param({1, 2}, id="set"),
    pytest.param(frozenset({"a"}), id="frozenset"),
    pytest.param(b"x", id="bytes"),
    pytest.param(datetime.date(2020, 1, 1), id="date"),
    pytest.param(uuid.UUID(int=1), id="uuid"),
    pytest.param(decimal.Decimal("1.5"), id="decimal"),
    pytest.param(Point(1), id="dataclass"),
    pytest.param(Color.RED, id="plain_enum"),
    pytest.param(orjson.Fragment(b'"x"'), id="orjson_fragment"),
    pytest.param(Name("x"), id="str_subclass"),
    pytest.param(object(), id="object"),
    pytest.param(10**5000, id="int_beyond_the_digit_limit"),
    pytest.param(cycle(), id="cycle"),
    pytest.param(nested_lists(500), id="depth_501"),  # plus the document: 501 levels
    pytest.param(nested_lists(499), id="depth_500_allowed_but_a_false_alarm"),
]
# What the writer refuses though the standard library writes it: a key json.dumps would
# turn into a string, and nesting beyond MAX_DOCUMENT_DEPTH.
REFUSED_BY_THE_WRITER = {"non_str_key", "depth_501"}


@pytest.mark.parametrize("value", FALLBACK)
def test_encode_steps_aside_where_the_bytes_could_differ(value: Any) -> None:
    assert jsoncodec.encode({"x": value}) is None


@pytest.mark.parametrize("value", FALLBACK)
def test_meta_to_json_still_gives_the_stdlib_bytes_or_a_meta_error(
    value: Any, request: pytest.FixtureRequest
) -> None:
    artifact = CodegenMeta(extra={"x": value})
    expected = stdlib_bytes_or_none(meta_to_dict(artifact))
    if expected is None or request.node.callspec.id in REFUSED_BY_THE_WRITER:
        with pytest.raises(MetaError):
            meta_to_json(artifact)
    else:
        assert meta_to_bytes(artifact) == expected


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        (math.nan, "x", "nan is not a finite number"),
        ({1, 2}, "x", "(set) has no JSON form"),
        ({"k": Color.RED}, 'x["k"]', "(Color) has no JSON form"),
        (cycle(), "x[1]", "contains itself"),
        (nested_lists(500), "x", "nests deeper than 499 levels"),
    ],
)
def test_the_fallback_keeps_the_message_naming_the_place(
    value: Any, path: str, fragment: str
) -> None:
    with pytest.raises(MetaError) as caught:
        meta_to_json(CodegenMeta(extra={"x": value}))
    assert caught.value.path == path
    assert fragment in str(caught.value)
