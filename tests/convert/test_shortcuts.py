"""The kinds' shortcuts change speed only: each gives what its kind's function gives.

Generated code tries a kind's shortcut (the records' freeze_shortcut and rebuild_shortcut in
shardplan/table/kinds.py) before the function: a ``Shortcut(call=name)`` must give the
function's result or a falsy value; a ``Shortcut(exactly=types)`` promises the function
gives a value of exactly those types back as it is. Checked here against the functions,
on the closure tests' value set (freeze) and on JSON values and placement tables
(rebuild), plus the generated code's choice of shortcut for a row whose pair is not
closed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, strategies as st
from torch.distributed.tensor import Shard

from generator.blocks import _freeze_shortcut
from shardplan.convert import kinds, trust
from shardplan.errors import FreezeError, MetaError
from shardplan.table.kinds import KINDS, Shortcut, resolve
from shardplan.table.rows import SpecField
from tests.cases import VALUES
from tests.helpers import REPO

PLACEMENT_TEXTS = st.sampled_from(["R", "S(0)", "S(-1)", "SS(0,2)", "P(sum)", "P(avg)", "S(x)", ""])
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
REBUILD_VALUES = st.one_of(
    JSON_VALUES,
    st.dictionaries(
        st.text(max_size=2), st.dictionaries(st.sampled_from(["tp", "dp"]), PLACEMENT_TEXTS)
    ),
    st.dictionaries(st.sampled_from(["tp", "dp"]), PLACEMENT_TEXTS),
    st.lists(st.text(max_size=3), max_size=3),
)


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", call(*args)
    except (FreezeError, MetaError) as exc:
        return "refused", str(exc)


def _check(step: str, kind: str, how: Shortcut, value: Any) -> None:
    function = getattr(kinds, f"{step}_{kind}")
    # A rebuild that builds Targets is passed what its caller allowed: nothing, here.
    targets = (trust.admission(()),) if step == "rebuild" and KINDS[kind].targets else ()
    full = _outcome(function, value, "p", *targets)
    if how.call:
        short = getattr(kinds, how.call)(value)
        if short:  # a falsy result sends generated code to the function
            assert full == ("ok", short), (kind, value)
            assert type(full[1]) is type(short)
    elif type(value) in how.exactly:
        assert full[0] == "ok" and full[1] is value, (kind, value)


# Each drawn value goes through every kind: as many values per kind as a test per kind
# would draw, for the cost of drawing them once.
@given(value=VALUES)
def test_each_freeze_shortcut_gives_what_its_kind_gives(value: Any) -> None:
    for kind, record in KINDS.items():
        if record.freeze_shortcut:
            _check("freeze", kind, record.freeze_shortcut, value)


@given(value=REBUILD_VALUES)
def test_each_rebuild_shortcut_gives_what_its_kind_gives(value: Any) -> None:
    for kind, record in KINDS.items():
        if record.rebuild_shortcut:
            _check("rebuild", kind, record.rebuild_shortcut, value)


def test_the_shortcuts_are_taken_for_the_common_values() -> None:
    """Hand-written common values: a shortcut that never applied would be dead weight."""
    assert kinds.common_frozen_strings(("a", "b")) == ["a", "b"]
    assert kinds.common_strings(["a"]) == ["a"]
    assert kinds.common_string_tuple(["a"]) == ("a",)
    assert kinds.common_frozen_table({"w": {"tp": Shard(0)}}) == {"w": {"tp": "S(0)"}}
    kinds.rebuild_placements({"w": {"tp": "S(0)"}}, "p")  # a text that parsed is cached
    assert kinds.common_parsed_table({"w": {"tp": "S(0)"}}) == {"w": {"tp": Shard(0)}}
    assert kinds.common_frozen_strings(["a", 1]) is None
    assert kinds.common_strings(("a",)) is None  # JSON arrays are lists


def test_freeze_takes_a_type_shortcut_only_for_types_the_rebuild_kind_gives_back() -> None:
    """is_boundary (scalar -> bool_default_true) is not a closed pair: freeze reads its
    value back (admit), so only a bool, which bool_default_true gives back as it is,
    skips that; a str must still be refused by the read-back."""

    def shortcut(freeze: str, rebuild: str) -> tuple[str, tuple[type, ...]]:
        return _freeze_shortcut(resolve(SpecField("x", "x", "param_plan", freeze, rebuild), None))

    assert shortcut("scalar", "opt_scalar") == ("", (str, bool))
    assert shortcut("scalar", "bool_default_true") == ("", (bool,))
    assert shortcut("int_truthy", "int_truthy") == ("", ())
    generated = (REPO / "generated" / "freeze.py").read_text()
    block = generated[generated.index("# is_boundary:") : generated.index("# region_dispatch:")]
    assert "if __type(__value) is __bool" in block and "__admit(" in block
