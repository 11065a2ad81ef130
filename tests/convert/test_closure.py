"""Freeze and rebuild close over each other (docs/contract.md §4, §10): whatever Python value
a plan holds, freeze either refuses it with a FreezeError naming its place, or writes JSON
that loads and rebuilds strictly and freezes back to the same bytes. No other
exception type ever escapes, from freeze, the writer or the reader.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, strategies as st

from shardplan.artifact.meta import CodegenMeta, meta_from_dict, meta_from_json, meta_to_json
from shardplan.errors import FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import GROUP_EXEMPT, SPEC_FIELDS
from tests import strategies
from tests.cases import ATOMS, KEYS, VALUES
from tests.implementations import IMPLEMENTATIONS

# What rebuild trusts here: every Target these values freeze to (callables included).
TRUSTED = (*strategies.TARGET_ENTRIES, "pkg.mod.fn", "builtins.len", "tests.cases")

FROZEN_FIELDS = [f.name for f in SPEC_FIELDS if f.group != GROUP_EXEMPT]


def outcome(implementation: str, plan: ShardingPlan) -> tuple[str, Any]:
    """("refused", path) or ("written", artifact text); any other exception propagates."""
    try:
        meta = IMPLEMENTATIONS[implementation].freeze_plan(plan)
    except FreezeError as exc:
        return "refused", exc.path
    return "written", meta_to_json(meta)  # a MetaError here breaks the promise: it propagates


def assert_reads_back(implementation: str, text: str) -> None:
    """The written text loads, rebuilds strictly, and freezes back to the same bytes."""
    impl = IMPLEMENTATIONS[implementation]
    plan = impl.rebuild_live_plan_from_meta(
        meta_from_json(text), strict=True, allow_targets=TRUSTED
    )
    again = impl.freeze_plan(plan)
    assert meta_to_json(again) == text


@given(st.sampled_from(FROZEN_FIELDS), VALUES)
def test_every_field_value_is_refused_by_freeze_or_read_back_by_rebuild(
    name: str, value: Any
) -> None:
    """Closure: for every frozen field and any Python value, freeze raises FreezeError, or
    its output survives meta_to_json -> meta_from_json -> strict rebuild and freezes back
    to the same bytes; both implementations agree."""
    spec = ModuleShardingSpec()
    setattr(spec, name, value)
    plan = ShardingPlan(modules={"model.m": spec})
    outcomes = {impl: outcome(impl, plan) for impl in IMPLEMENTATIONS}
    assert outcomes["generated"] == outcomes["reference"]
    verdict, detail = outcomes["generated"]
    if verdict == "refused":
        assert detail.startswith('modules["model.m"]'), detail
        return
    for implementation in IMPLEMENTATIONS:
        assert_reads_back(implementation, detail)


SETTINGS = ["module_name", "special_handlers", "mesh_dim_names", "tied_pairs"]
SETTINGS += ["sequence_parallel", "loss_parallel"]
SETTING_VALUES = st.one_of(
    VALUES,
    st.lists(st.text(max_size=3), max_size=3),
    st.lists(st.text(max_size=3), max_size=3).map(tuple),
    st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)), max_size=2),
    st.lists(st.lists(st.text(max_size=3), max_size=3), max_size=2),
    st.dictionaries(KEYS, st.one_of(st.text(max_size=3), ATOMS), max_size=2),
)


@given(st.sampled_from(SETTINGS), SETTING_VALUES)
def test_every_plan_setting_is_refused_by_freeze_or_read_back_by_rebuild(
    setting: str, value: Any
) -> None:
    """Closure for the plan-level settings: module names, special_handlers,
    mesh_dim_names, tied_pairs and the two flags."""
    plan = ShardingPlan(modules={"m": ModuleShardingSpec()})
    if setting == "module_name":
        try:
            plan.modules = {value: ModuleShardingSpec()}
        except TypeError:
            assume(False)  # not hashable: no dict can hold it as a module name
    else:
        setattr(plan, setting, value)
    outcomes = {impl: outcome(impl, plan) for impl in IMPLEMENTATIONS}
    assert outcomes["generated"] == outcomes["reference"]
    verdict, detail = outcomes["generated"]
    if verdict == "written":
        for implementation in IMPLEMENTATIONS:
            assert_reads_back(implementation, detail)


@st.composite
def python_built_metas(draw: st.DrawFn) -> Any:
    """A valid meta document with one Python value planted anywhere: what a caller who
    builds a CodegenMeta in Python might hand over."""
    document = strategies.frozen_json(strategies.random_plan(draw(st.integers(0, 2**32))))
    trail = draw(st.sampled_from(strategies._locations(document)))
    return strategies._set(document, trail, draw(VALUES))


@given(python_built_metas(), st.booleans())
def test_a_python_built_meta_raises_nothing_but_meta_error(document: Any, strict: bool) -> None:
    """Reading, rebuilding and writing a CodegenMeta built in Python raises MetaError or
    nothing: never a TypeError, AttributeError or RecursionError."""
    try:
        meta = meta_from_dict(document)
    except MetaError:
        return
    for implementation in IMPLEMENTATIONS:
        try:
            IMPLEMENTATIONS[implementation].rebuild_live_plan_from_meta(
                meta, strict=strict, allow_targets=TRUSTED
            )
        except MetaError:
            pass
    try:
        meta_to_json(meta)
    except MetaError:
        pass


def test_meta_with_tuple_mesh_dim_names_names_the_python_type() -> None:
    try:
        meta_to_json(CodegenMeta(mesh_dim_names=("tp",)))  # type: ignore[arg-type]
    except MetaError as exc:
        assert exc.path == "mesh_dim_names"
        assert "got Python tuple" in str(exc) and "got array" not in str(exc)
    else:
        raise AssertionError("a tuple was written as if it were a list")
