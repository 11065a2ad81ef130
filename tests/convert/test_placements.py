"""Placement text <-> torch DTensor placements (docs/contract.md §7): strict both ways, never
Replicate by default."""

from __future__ import annotations

from enum import Enum

import pytest
from hypothesis import given, strategies as st
from torch.distributed.tensor import Partial, Placement, Replicate, Shard
from torch.distributed.tensor.placement_types import _MaskPartial, _StridedShard

from shardplan.convert.placement_text import REDUCE_OPS
from shardplan.convert.placements import (
    freeze_named_placement,
    freeze_placement_table,
    parse_placement,
    placement_to_string,
)
from shardplan.errors import FreezeError, MetaError

EXPECTED_FORMS = "expected S(dim), SS(dim,factor), R or P(op)"
PATH = 'param_plan["m"].params["w"]["tp"]'


class StrAxis(str, Enum):  # noqa: UP042 (the spelling planners use)
    TP = "tp"
    CP = "cp"


class PlainAxis(Enum):
    """Not a str subclass, so ``PlainAxis.TP`` and ``"tp"`` are two distinct dict keys."""

    TP = "tp"


class IntAxis(Enum):
    TP = 0


ROUND_TRIPS: list[tuple[Placement, str]] = [
    (Shard(0), "S(0)"),
    (Shard(3), "S(3)"),
    (Shard(-1), "S(-1)"),
    (Shard(-2), "S(-2)"),
    (Shard(999_999_999), "S(999999999)"),
    (Replicate(), "R"),
    *[(Partial(op), f"P({op})") for op in REDUCE_OPS],
    (_StridedShard(0, split_factor=2), "SS(0,2)"),
    (_StridedShard(1, split_factor=1), "SS(1,1)"),
    (_StridedShard(-1, split_factor=4), "SS(-1,4)"),
]


def assert_same_placement(actual: Placement, expected: Placement) -> None:
    assert type(actual) is type(expected)
    assert actual == expected


@pytest.mark.parametrize(("placement", "text"), ROUND_TRIPS, ids=[text for _, text in ROUND_TRIPS])
def test_placement_freezes_to_its_text(placement: Placement, text: str) -> None:
    assert placement_to_string(placement) == text


@pytest.mark.parametrize(("placement", "text"), ROUND_TRIPS, ids=[text for _, text in ROUND_TRIPS])
def test_placement_text_parses_back_to_the_same_type_and_value(
    placement: Placement, text: str
) -> None:
    assert_same_placement(parse_placement(text), placement)


def test_strided_shard_keeps_its_split_factor_through_a_round_trip() -> None:
    rebuilt = parse_placement(placement_to_string(_StridedShard(-1, split_factor=3)))
    assert isinstance(rebuilt, _StridedShard)
    assert (rebuilt.dim, rebuilt.split_factor) == (-1, 3)


MALFORMED_TEXTS = [
    "S(x)",
    "P",
    "P()",
    " R",
    "R ",
    "RR",
    "r",
    "S(01)",
    "S(-0)",
    "S(+1)",
    "S()",
    "S(0,1)",
    "S( 1)",
    "S(1)\n",
    "S(\u0661)",  # ARABIC-INDIC DIGIT ONE: str.isdigit() is true, but it is no dim
    "S(\uff11)",  # FULLWIDTH DIGIT ONE
    "S(1234567890)",
    "Shard(0)",
    "SS(1)",
    "SS(0,0)",
    "SS(1,-2)",
    "SS(-0,2)",
    "SS(1,01)",
    "SS(0, 2)",
    "SS(1,\u0662)",
    "P(foo)",
    "P(SUM)",
    "P(premul_sum)",
    "P(sum)x",
    "p(sum)",
    "",
]


@pytest.mark.parametrize("text", MALFORMED_TEXTS, ids=repr)
def test_malformed_placement_text_is_a_meta_error_naming_text_and_forms(text: str) -> None:
    with pytest.raises(MetaError) as caught:
        parse_placement(text, PATH)
    assert caught.value.path == PATH
    message = str(caught.value)
    assert message.startswith(f"{PATH}: ")
    assert repr(text) in message
    assert EXPECTED_FORMS in message


@pytest.mark.parametrize(
    ("value", "json_name"),
    [
        (3, "number"),
        (1.5, "number"),
        (None, "null"),
        (True, "boolean"),
        (["R"], "array"),
        (b"R", "Python bytes"),  # only a meta built in Python holds one: named as such
        (("R",), "Python tuple"),
    ],
    ids=repr,
)
def test_non_string_placement_is_a_meta_error_naming_its_type(
    value: object, json_name: str
) -> None:
    with pytest.raises(MetaError) as caught:
        parse_placement(value, PATH)
    assert caught.value.path == PATH
    assert f"got {json_name}" in str(caught.value)
    assert EXPECTED_FORMS in str(caught.value)


@given(st.text(max_size=12))
def test_any_accepted_text_is_canonical_and_only_r_is_replicate(text: str) -> None:
    """Law: parse either raises MetaError or returns a placement that prints back to the same
    text; so nothing but the exact text "R" ever becomes Replicate()."""
    try:
        placement = parse_placement(text)
    except MetaError:
        return
    assert placement_to_string(placement) == text
    assert isinstance(placement, Replicate) == (text == "R")


@given(
    st.sampled_from(["S", "SS"]), st.integers(-(10**9) + 1, 10**9 - 1), st.integers(1, 10**9 - 1)
)
def test_every_in_range_shard_round_trips(prefix: str, dim: int, factor: int) -> None:
    """Law: every Shard and strided shard with at most 9-digit ints survives text and back."""
    placement = Shard(dim) if prefix == "S" else _StridedShard(dim, split_factor=factor)
    assert_same_placement(parse_placement(placement_to_string(placement)), placement)


class NotAPlacement:
    pass


@pytest.mark.parametrize(
    "placement",
    [
        _MaskPartial(),
        Partial("premul_sum"),
        Shard(10**9),
        NotAPlacement(),
        "S(0)",
        None,
    ],
    ids=["mask_partial", "premul_sum", "shard_dim_too_large", "plain_object", "text", "none"],
)
def test_unfreezable_placement_is_a_freeze_error_not_replicate(placement: object) -> None:
    with pytest.raises(FreezeError) as caught:
        placement_to_string(placement, PATH)
    assert caught.value.path == PATH
    assert str(caught.value).startswith(f"{PATH}: ")


def test_unknown_placement_type_inside_a_table_names_its_axis() -> None:
    with pytest.raises(FreezeError) as caught:
        freeze_placement_table({"embed.weight": {"tp": _MaskPartial()}}, 'modules["m"].params')
    assert caught.value.path == 'modules["m"].params["embed.weight"]["tp"]'


def test_str_enum_axis_keys_freeze_to_their_values() -> None:
    frozen = freeze_named_placement({StrAxis.TP: Shard(0), StrAxis.CP: Replicate()}, "p")
    assert frozen == {"tp": "S(0)", "cp": "R"}
    assert all(type(key) is str for key in frozen)


def test_enum_with_str_value_freezes_to_its_value() -> None:
    assert freeze_named_placement({PlainAxis.TP: Shard(1)}, "p") == {"tp": "S(1)"}


def test_enum_axis_and_its_value_string_together_are_a_freeze_error() -> None:
    with pytest.raises(FreezeError, match="appears twice") as caught:
        freeze_named_placement({PlainAxis.TP: Shard(0), "tp": Replicate()}, "p")
    assert caught.value.path == "p"


@pytest.mark.parametrize(
    "axis", [IntAxis.TP, 0, None, ("tp",)], ids=["int_enum", "int", "none", "tuple"]
)
def test_non_string_axis_key_is_a_freeze_error(axis: object) -> None:
    with pytest.raises(FreezeError, match="mesh axis key"):
        freeze_named_placement({axis: Shard(0)}, "p")
