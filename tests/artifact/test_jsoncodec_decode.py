"""The fast path of codegen_meta.json's read and the orjson tier
(shardplan/artifact/jsoncodec.py): a document it reads is what the strict standard library
reader would give, and the corpus reads and writes back to its bytes. The writer's side and
the counted tier: test_jsoncodec.py, whose helpers these tests share.
"""

from __future__ import annotations

import collections
import datetime
import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, strategies as st

from shardplan.artifact import jsoncodec
from shardplan.artifact.meta import (
    MAX_DOCUMENT_DEPTH,
    CodegenMeta,
    load_meta,
    meta_from_dict,
    meta_from_json,
    meta_to_bytes,
    meta_to_json,
)
from shardplan.errors import MetaError
from tests.cases import PLAIN, Name, Point, cycle, nested_lists, stdlib_bytes, stdlib_only
from tests.helpers import CORPUS_FILES

# ------------------------------------------------------------------ decode

CANONICAL = b'{\n  "injections": [],\n  "param_plan": {\n    "m": {}\n  },\n  "x": 1.5\n}\n'


def test_decode_takes_the_fast_path_for_canonical_bytes_and_text() -> None:
    expected = {"injections": [], "param_plan": {"m": {}}, "x": 1.5}
    assert jsoncodec.decode(CANONICAL) == expected
    assert jsoncodec.decode(CANONICAL.decode()) == expected


def test_decode_of_a_plain_file_is_proven_by_orjson_writing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """msgspec's own proof (re-encode, indent, compare) is not needed for a plain plan."""
    assert jsoncodec._ORJSON_BOUNDS_DEPTH  # the installed orjson refuses 501 levels

    def refuse(*args: Any) -> Any:
        raise AssertionError("msgspec's proof ran")

    monkeypatch.setattr(jsoncodec, "_msgspec_writes", refuse)
    assert jsoncodec.decode(stdlib_bytes(PLAIN)) == PLAIN


# Canonical documents orjson refuses to write: msgspec's proof reads them.
ORJSON_REFUSES = [
    pytest.param({"x": [2**64, -(2**63) - 1, 10**30]}, id="ints_beyond_64_bits"),
    pytest.param({"x": nested_lists(300)}, id="deeper_than_orjson_writes"),
    pytest.param({"x": nested_lists(498)}, id="depth_499"),
]


@pytest.mark.parametrize("document", ORJSON_REFUSES)
def test_decode_reads_what_orjson_refuses_through_msgspecs_proof(document: dict[str, Any]) -> None:
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(document)
    raw = stdlib_bytes(document)
    assert repr(jsoncodec.decode(raw)) == repr(json.loads(raw))


def test_a_canonical_file_nested_past_the_writer_is_refused(tmp_path: Path) -> None:
    """501 levels: neither proof vouches for it, and the strict reader names it."""
    raw = stdlib_bytes({"x": nested_lists(MAX_DOCUMENT_DEPTH)})
    assert jsoncodec.decode(raw) is None
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(raw)
    with pytest.raises(MetaError, match="nests deeper than 500 levels"):
        load_meta(path)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_load_meta_of_a_corpus_file_never_runs_the_stdlib_reader(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = meta_from_dict(json.loads(path.read_bytes()))
    stdlib_only(monkeypatch)
    assert load_meta(path) == expected
    assert meta_from_json(path.read_text()) == expected


# Laid out as the canonical form is, so only the defect keeps them off the fast path.
# fmt: off
BAD_FILES = [
    pytest.param(b'{\n  "param_plan": {},\n  "param_plan": {}\n}\n', "repeats the key 'param_plan'", id="duplicate_key"),
    pytest.param(b'{\n  "param_plan": {\n    "m": {},\n    "m": {}\n  }\n}\n', "repeats the key 'm'", id="duplicate_nested_key"),
    pytest.param(b'{\n  "param_plan": {},\n  "x": NaN\n}\n', "NaN", id="nan"),
    pytest.param(b'{\n  "param_plan": {},\n  "x": Infinity\n}\n', "Infinity", id="infinity"),
    pytest.param(b'{\n  "param_plan": {},\n  "x": -Infinity\n}\n', "-Infinity", id="minus_infinity"),
    pytest.param(b'{\n  "param_plan": {},\n  "x": 1e400\n}\n', "overflows", id="overflowing_number"),
    pytest.param(b'{\n  "param_plan": {}\n}\n}', "not valid JSON", id="trailing_garbage"),
    pytest.param(b'{\n  "param_plan": {}\n}\n{}\n', "not valid JSON", id="second_document"),
    pytest.param(b'{\n  "param_plan": {\n', "not valid JSON", id="truncated"),
    pytest.param(b'{\n  "x": "\x01"\n}\n', "not valid JSON", id="raw_control_char"),
]
# fmt: on


@pytest.mark.parametrize(("raw", "fragment"), BAD_FILES)
def test_a_defective_file_is_refused_with_the_stdlib_reader_message(
    raw: bytes, fragment: str, tmp_path: Path
) -> None:
    assert jsoncodec.decode(raw) is None
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(raw)
    with pytest.raises(MetaError, match="codegen_meta.json") as from_file:
        load_meta(path)
    with pytest.raises(MetaError) as from_text:
        meta_from_json(raw.decode(), "source.json")
    assert fragment in str(from_file.value) and fragment in str(from_text.value)
    assert str(from_text.value).startswith("source.json")


def test_a_file_that_is_not_utf8_is_still_named_so(tmp_path: Path) -> None:
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(b'{\n  "x": "\xff"\n}\n')
    assert jsoncodec.decode(path.read_bytes()) is None
    with pytest.raises(MetaError, match=r"codegen_meta\.json is not UTF-8"):
        load_meta(path)


# Valid JSON another producer could write: not canonical, so read by the strict reader.
EXPECTED = CodegenMeta(param_plan={"m": {}}, mesh_dim_names=["tp"], extra={"note": "é"})
# fmt: off
OTHER_PRODUCERS = [
    pytest.param('{"mesh_dim_names":["tp"],"note":"\\u00e9","param_plan":{"m":{}}}', id="compact"),
    pytest.param('{\n  "mesh_dim_names": [\n    "tp"\n  ],\n  "note": "é",\n  "param_plan": {\n    "m": {}\n  }\n}\n', id="ensure_ascii_false"),
    pytest.param('{\n  "param_plan": {\n    "m": {}\n  },\n  "note": "\\u00e9",\n  "mesh_dim_names": [\n    "tp"\n  ]\n}\n', id="unsorted_keys"),
    pytest.param('{\n  "mesh_dim_names": [\n    "tp"\n  ],\n  "note": "\\u00e9",\n  "param_plan": {\n    "m": {}\n  }\n}', id="no_trailing_newline"),
    pytest.param('{\r\n  "mesh_dim_names": [\r\n    "tp"\r\n  ],\r\n  "note": "\\u00e9",\r\n  "param_plan": {\r\n    "m": {}\r\n  }\r\n}\r\n', id="crlf"),
    pytest.param('{\n    "mesh_dim_names": ["tp"],\n    "note": "\\u00e9",\n    "param_plan": {"m": {}}\n}\n', id="indent_4"),
]
# fmt: on


@pytest.mark.parametrize("text", OTHER_PRODUCERS)
def test_a_valid_non_canonical_file_reads_to_the_same_meta(text: str, tmp_path: Path) -> None:
    assert jsoncodec.decode(text) is None
    assert meta_from_json(text) == EXPECTED
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(text.encode("utf-8"))
    assert load_meta(path) == EXPECTED


@pytest.mark.parametrize(
    "raw",
    [
        b'{\n  "x": 1e-07\n}\n',  # stdlib's text: msgspec writes 1e-7
        b'{\n  "x": 1e-7\n}\n',  # msgspec's text: not stdlib's
        b'{\n  "x": 0.00001\n}\n',  # msgspec's text: stdlib writes 1e-05
        b'{\n  "x": 1.0E+16\n}\n',
        b'{\n  "x": 1\n}',
        b"[\n  1\n]\n",
    ],
)
def test_decode_steps_aside_for_number_texts_and_shapes_it_cannot_vouch_for(raw: bytes) -> None:
    assert jsoncodec.decode(raw) is None


# ------------------------------------------------------------------ the corpus


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_a_corpus_file_is_canonical_and_reads_and_writes_back_to_its_bytes(path: Path) -> None:
    raw = path.read_bytes()
    assert raw == stdlib_bytes(json.loads(raw)), "the corpus promises canonical files"
    assert jsoncodec.decode(raw) == json.loads(raw)
    assert meta_to_bytes(load_meta(path)) == raw
    assert meta_to_json(load_meta(path)) == raw.decode()


def test_there_is_a_corpus() -> None:
    assert len(CORPUS_FILES) >= 2


def test_the_fast_path_refuses_the_nesting_the_writer_refuses() -> None:
    # jsoncodec cannot import meta (meta imports it), so it keeps its own copy.
    assert jsoncodec._MAX_DEPTH == MAX_DOCUMENT_DEPTH


# ------------------------------------------------------------------ the orjson tier

ORJSON_PLAIN = {
    "param_plan": {"m.mlp": {"params": {"w": {"tp": "S(0)", "dp": "R"}}, "is_boundary": True}},
    "injections": [{"match": "m.mlp", "ep_size": 2, "ratio": 0.5, "sizes": (1, 2)}],
    "mesh_dim_names": ["dp", "tp"],
    "numbers": [2**63, -(2**63), 2**64 - 1, 1e-4, 1e16, 5e-324, -0.0, 123.456],
    "empty": [{}, []],
}


def test_the_orjson_tier_is_on_and_writes_a_plain_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the standard library's writer runs, not even its C encoder."""
    expected = stdlib_bytes(ORJSON_PLAIN)
    assert jsoncodec._ORJSON_FLOATS_AS_REPR  # the installed orjson writes floats as repr

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("json.dumps ran")

    monkeypatch.setattr(json, "dumps", refuse)
    assert jsoncodec.encode(ORJSON_PLAIN) == expected


class Plain(enum.Enum):
    A = 1


class Text(str, enum.Enum):  # noqa: UP042 (a str Enum as producers write them)
    A = "a"


class Number(enum.IntEnum):
    ONE = 1


# What the orjson tier leaves to the next one: orjson refuses it, marshal refuses it (it
# writes only exact core types), or the output shows it (raw text, null, 0.0000...).
ORJSON_DECLINES = [
    pytest.param("é", id="non_ascii"),
    pytest.param("\x7f", id="delete_char"),
    pytest.param(None, id="none_written_null"),
    pytest.param(math.nan, id="nan_written_null"),
    pytest.param(1e-5, id="float_below_1e-4"),
    pytest.param(-2.5e-7, id="negative_float_one_digit_exponent"),
    pytest.param(uuid.UUID(int=1), id="uuid"),
    pytest.param(Plain.A, id="plain_enum"),
    pytest.param(orjson.Fragment(b'"x"'), id="orjson_fragment"),  # raw text, written as is
    pytest.param(Text.A, id="str_enum"),
    pytest.param(Number.ONE, id="int_enum"),
    pytest.param(collections.OrderedDict(a=1), id="dict_subclass"),
    pytest.param(Name("x"), id="str_subclass"),
    pytest.param({1, 2}, id="set"),
    pytest.param(b"x", id="bytes"),
    pytest.param(2**64, id="int_beyond_64_bits"),
    pytest.param(Point(1), id="dataclass"),
    pytest.param(datetime.date(2020, 1, 1), id="date"),
    pytest.param(nested_lists(300), id="depth_beyond_orjson"),
    pytest.param(cycle(), id="cycle"),
    pytest.param({1: "x"}, id="non_str_key"),
]


@pytest.mark.parametrize("value", ORJSON_DECLINES)
def test_the_orjson_tier_declines_what_it_cannot_vouch_for(value: Any) -> None:
    assert jsoncodec._orjson_bytes({"x": value}) is None


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=8))
def test_the_orjson_tier_writes_every_finite_float_as_repr_or_declines(floats: list[float]) -> None:
    fast = jsoncodec._orjson_bytes({"x": floats})
    if fast is not None:
        assert fast == stdlib_bytes({"x": floats})
