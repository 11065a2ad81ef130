"""The generated code equals the table's meaning: differential tests against the
reference, the round-trip laws of docs/contract.md §6, a fuzzed artifact reader, the real
artifact."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

import shardplan
from shardplan import api, reference
from shardplan.artifact.meta import (
    CodegenMeta,
    load_meta,
    meta_from_dict,
    meta_from_json,
    meta_to_dict,
    meta_to_json,
)
from shardplan.convert.targets import Target, target_of_callable
from shardplan.errors import FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import GROUP_EXEMPT, SPEC_FIELDS
from tests import strategies
from tests.helpers import QWEN3_MOE, shared_fixture, shared_fixture_or_none
from tests.implementations import IMPLEMENTATIONS
from tests.older_artifacts import frozen_again

# What these tests trust: the drawn plans' Targets and the shared fixture's
# (docs/contract.md §8).
TRUSTED = (*strategies.TARGET_ENTRIES, "hyper_parallel.*")


def outcome(call: Callable[[], Any], error: type[ValueError]) -> tuple[str, Any]:
    """("ok", result) or ("error", (path, message)): comparable across implementations."""
    try:
        return "ok", call()
    except error as exc:
        return "error", (exc.path, str(exc))  # type: ignore[attr-defined]


def ordered(value: Any) -> str:
    """JSON text keeping insertion order: equal texts mean equal values *and* key order."""
    return json.dumps(value)


def spec_state(spec: ModuleShardingSpec) -> dict[str, Any]:
    """Every field, including those dataclass equality skips (post_init ones)."""
    return {f.name: getattr(spec, f.name) for f in SPEC_FIELDS}


def plan_state(plan: ShardingPlan) -> Any:
    return (
        [(fqn, spec_state(spec)) for fqn, spec in plan.modules.items()],
        plan.special_handlers,
        plan.mesh_dim_names,
        plan.tied_pairs,
        plan.sequence_parallel,
        plan.loss_parallel,
    )


def rebuild_both(meta: CodegenMeta, strict: bool = True) -> tuple[Any, Any]:
    generated = outcome(
        lambda: plan_state(
            api.rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=TRUSTED)
        ),
        MetaError,
    )
    expected = outcome(
        lambda: plan_state(
            reference.rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=TRUSTED)
        ),
        MetaError,
    )
    return generated, expected


# ------------------------------------------------------------------ differential


@given(strategies.plan_source())
def test_generated_freeze_equals_reference_with_key_order(plan: ShardingPlan) -> None:
    """For every plan, generated freeze == reference freeze, key order included, and the
    whole meta (the plan level, derived keys and other producers' keys) alike."""
    assert ordered(api.freeze_param_plan(plan)) == ordered(reference.freeze_param_plan(plan))
    assert ordered(api.freeze_injections(plan)) == ordered(reference.freeze_injections(plan))
    generated, expected = api.freeze_plan(plan), reference.freeze_plan(plan)
    assert generated == expected
    assert meta_to_json(generated) == meta_to_json(expected)


@settings(max_examples=max(settings().max_examples // 10, 100))
@given(strategies.plans())
def test_drawn_plans_freeze_alike_and_round_trip(plan: ShardingPlan) -> None:
    """The differential and the law on plans drawn field by field (shrinkable, and wider
    value pools than the seeded plans): generated freeze == reference freeze, and
    freeze(rebuild(M)) == M."""
    assert ordered(api.freeze_param_plan(plan)) == ordered(reference.freeze_param_plan(plan))
    assert ordered(api.freeze_injections(plan)) == ordered(reference.freeze_injections(plan))
    meta = shardplan.freeze_plan(plan)
    assert meta_to_json(
        shardplan.freeze_plan(shardplan.rebuild_plan(meta, allow_targets=TRUSTED))
    ) == meta_to_json(meta)


@settings(max_examples=max(settings().max_examples // 4, 500))
@given(strategies.unfreezable_plans())
def test_generated_freeze_refuses_what_reference_refuses_at_the_same_path(
    plan: ShardingPlan,
) -> None:
    """A value freeze cannot write raises FreezeError with the same path in both."""
    for name in ("freeze_param_plan", "freeze_injections"):
        generated = outcome(lambda n=name: ordered(getattr(api, n)(plan)), FreezeError)
        expected = outcome(lambda n=name: ordered(getattr(reference, n)(plan)), FreezeError)
        assert generated == expected
    assert outcome(lambda: shardplan.freeze_plan(plan), FreezeError)[0] == "error"


@given(strategies.valid_meta_documents())
def test_generated_rebuild_equals_reference_on_valid_metas(document: dict[str, Any]) -> None:
    """For every meta freeze can produce, both rebuilds give equal plans."""
    generated, expected = rebuild_both(meta_from_dict(document))
    assert generated[0] == "ok"
    assert generated == expected


@given(strategies.malformed_meta_documents(), st.booleans())
def test_generated_rebuild_equals_reference_on_malformed_metas(document: Any, strict: bool) -> None:
    """Both rebuilds give equal plans, or MetaErrors with the same path and message."""
    loaded = outcome(lambda: meta_from_dict(document), MetaError)
    if loaded[0] == "ok":
        generated, expected = rebuild_both(loaded[1], strict)
        assert generated == expected


# ------------------------------------------------------------------ laws


@given(strategies.plan_source())
def test_freeze_of_rebuild_gives_back_the_same_meta_and_json_bytes(plan: ShardingPlan) -> None:
    """Law: for every meta M freeze can produce, freeze(rebuild(M)) == M with the same key
    order, so the JSON bytes are identical."""
    meta = shardplan.freeze_plan(plan)
    again = shardplan.freeze_plan(shardplan.rebuild_plan(meta, allow_targets=TRUSTED))
    assert ordered(again.param_plan) == ordered(meta.param_plan)
    assert ordered(again.injections) == ordered(meta.injections)
    assert meta_to_json(again) == meta_to_json(meta)


@given(strategies.valid_meta_documents())
def test_a_read_artifact_refreezes_to_the_same_entries_and_rules(document: dict[str, Any]) -> None:
    """Through JSON (sorted keys), entries come back byte-identical and rules come back
    equal per module; only the order of rules follows the artifact's sorted module order."""
    meta = meta_from_json(json.dumps(document, indent=2, sort_keys=True))
    again = shardplan.freeze_plan(shardplan.rebuild_plan(meta, allow_targets=TRUSTED))
    assert json.dumps(again.param_plan, sort_keys=True) == json.dumps(
        meta.param_plan, sort_keys=True
    )
    assert {r["match"]: r for r in again.injections} == {r["match"]: r for r in meta.injections}
    assert [r["match"] for r in again.injections] == [
        m for m in meta.param_plan if m in {r["match"] for r in meta.injections}
    ]


def _axis(key: Any) -> str:
    return key.value if isinstance(key, Enum) else key


def _table(value: Any) -> Any:
    if value is None:
        return None
    return {name: {_axis(a): p for a, p in named.items()} for name, named in value.items()}


def _injected(value: Any) -> Any:
    if value is None or isinstance(value, (str, Target)):
        return value
    if isinstance(value, dict):
        if all(isinstance(named, dict) for named in value.values()):
            return _table(value)  # a contract {name: {axis: placement}}
        return {_axis(a): p for a, p in value.items()}  # a named placement {axis: placement}
    return target_of_callable(value, "")


def expected_after_round_trip(spec: ModuleShardingSpec) -> dict[str, Any]:
    """What docs/contract.md §6 says rebuild(freeze(spec)) holds: frozen fields normalised as
    documented (tuple/list, the truthy kinds' falsy values), exempt fields at defaults."""
    default = ModuleShardingSpec()
    # Rows added since (README "Adding a spec field") hold values drawn from their kinds:
    # no hand-written expectation here knows them, so the reference's reading stands in
    # (the differential properties check the generated code against it as well).
    one = ShardingPlan(modules={"m": spec})
    read = reference.rebuild_live_plan_from_meta(
        reference.freeze_plan(one), allow_targets=strategies.TARGET_ENTRIES
    ).modules["m"]
    return {
        **{f.name: getattr(read, f.name) for f in SPEC_FIELDS if f.group != GROUP_EXEMPT},
        **{f.name: getattr(default, f.name) for f in SPEC_FIELDS if f.group == GROUP_EXEMPT},
        "params": _table(spec.params),
        "in_src": _table(spec.in_src),
        "in_dst": _table(spec.in_dst),
        "out_src": _table(spec.out_src),
        "out_dst": _table(spec.out_dst),
        "out_names": list(spec.out_names) if spec.out_names else None,
        "tp_divide_attrs": None if spec.tp_divide_attrs is None else list(spec.tp_divide_attrs),
        "is_boundary": spec.is_boundary,
        "region_dispatch": spec.region_dispatch,
        "_deferred_bias_params": tuple(spec._deferred_bias_params),
        "skip_source_lowering": spec.skip_source_lowering or None,
        "inner_wrapper": _injected(spec.inner_wrapper),
        "inner_target": spec.inner_target,
        "inner_out_src": _injected(spec.inner_out_src),
        "local_compute_fn": _injected(spec.local_compute_fn),
        "_ep_stack": dict(spec._ep_stack),
        "_ep_size": spec._ep_size,
    }


@given(strategies.plan_source())
def test_rebuild_of_freeze_restores_every_frozen_field(plan: ShardingPlan) -> None:
    """Law: rebuild(freeze(P)) equals P on every frozen field; exempt fields come back at
    their defaults; post_init fields are set after construction."""
    rebuilt = shardplan.rebuild_plan(
        meta_from_json(meta_to_json(shardplan.freeze_plan(plan))), allow_targets=TRUSTED
    )
    assert list(rebuilt.modules) == sorted(plan.modules)  # the artifact's keys are sorted
    for fqn, spec in plan.modules.items():
        assert spec_state(rebuilt.modules[fqn]) == expected_after_round_trip(spec)
    assert rebuilt.special_handlers == plan.special_handlers
    assert rebuilt.mesh_dim_names == plan.mesh_dim_names
    assert rebuilt.tied_pairs == plan.tied_pairs
    assert (rebuilt.sequence_parallel, rebuilt.loss_parallel) == (
        plan.sequence_parallel,
        plan.loss_parallel,
    )
    # Other producers' keys ride along, at the top level and inside parallel_dims.
    assert rebuilt.other_keys == plan.other_keys


# ------------------------------------------------------------------ the artifact reader

PATH_TOKEN = re.compile(r'\.(\w+)|\[(-?\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def resolves(document: Any, path: str) -> bool:
    """Does an error path name a place that exists in the document?"""
    match = re.match(r"\w+", path)
    if not path:
        return True
    if not match or not isinstance(document, dict) or match[0] not in document:
        return False
    node, rest = document[match[0]], path[match.end() :]
    while rest:
        token = PATH_TOKEN.match(rest)
        if token is None:
            return False
        key: Any = (
            token[1]
            if token[1] is not None
            else (int(token[2]) if token[2] else json.loads(token[3]))
        )
        if isinstance(node, dict) and isinstance(key, str) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return False
        rest = rest[token.end() :]
    return True


def _base_documents() -> list[dict[str, Any]]:
    # Drawing whole plans costs ~20 ms an example; the fuzzer plants its defects in a few
    # fixed documents instead (the real artifact and fully populated random plans), so it
    # can afford tens of thousands of examples.
    real = shared_fixture_or_none(QWEN3_MOE)  # absent on a clone without ../shared
    seeds = [json.loads(real.read_text())] if real else []
    for seed in range(8):
        seeds.append(strategies.frozen_json(strategies.random_plan(seed)))
    return seeds


BASE_DOCUMENTS = st.sampled_from(_base_documents()).map(copy.deepcopy)


@st.composite
def damaged_texts(draw: st.DrawFn) -> str:
    """Document text with one structural defect, or a raw cut or byte change."""
    if draw(st.integers(0, 4)):
        return json.dumps(draw(strategies.malformed_meta_documents(BASE_DOCUMENTS)))
    text = json.dumps(draw(BASE_DOCUMENTS))
    cut = draw(st.integers(0, len(text)))
    return (
        text[:cut]
        + draw(st.sampled_from(["", "}", "]", ",", '"', "NaN", "\x00", "é"]))
        + text[cut + 1 :]
    )


@given(damaged_texts())
def test_reading_a_damaged_artifact_raises_only_meta_error_pointing_into_it(text: str) -> None:
    """Fuzz: load + rebuild of any damaged document raises nothing but MetaError, and its
    path names a place that exists in the input."""
    try:
        shardplan.rebuild_plan(meta_from_json(text), allow_targets=TRUSTED)
    except MetaError as exc:
        try:
            document = json.loads(text)
        except ValueError:
            assert exc.path == ""  # not JSON at all: the whole file is the place
        else:
            assert resolves(document, exc.path), (exc.path, str(exc))


def test_load_meta_reads_the_file_it_is_given(tmp_path: Any) -> None:
    path = tmp_path / "codegen_meta.json"
    path.write_text('{"param_plan": {"m": {"params": {"w": {"tp": "S(9"}}}}}')
    with pytest.raises(MetaError) as caught:
        shardplan.rebuild_plan(load_meta(path))
    assert caught.value.path == 'param_plan["m"].params["w"]["tp"]'


# ------------------------------------------------------------------ the real artifact


@pytest.fixture(scope="module")
def fixture_meta() -> CodegenMeta:
    return load_meta(shared_fixture(QWEN3_MOE))


@pytest.mark.parametrize("implementation", ["generated", "reference"])
def test_real_artifact_round_trips_through_both_implementations(
    fixture_meta: CodegenMeta, implementation: str
) -> None:
    module = freezer = IMPLEMENTATIONS[implementation]
    plan = module.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    expected = frozen_again(meta_to_dict(fixture_meta))
    assert json.dumps(freezer.freeze_param_plan(plan), sort_keys=True) == json.dumps(
        expected["param_plan"], sort_keys=True
    )
    rules = {rule["match"]: rule for rule in freezer.freeze_injections(plan)}
    assert rules == {rule["match"]: rule for rule in expected["injections"]}


def test_real_artifact_plan_level_fields_survive_freeze_plan_and_rebuild_plan(
    fixture_meta: CodegenMeta,
) -> None:
    plan = shardplan.rebuild_plan(fixture_meta, allow_targets=TRUSTED)
    assert (plan.mesh_dim_names, plan.loss_parallel, plan.sequence_parallel) == (
        ("cp", "tp"),
        True,
        True,
    )
    again = shardplan.freeze_plan(plan)
    for name in ("special_handlers", "mesh_dim_names", "tied_pairs", "frozen_sharded_params"):
        assert getattr(again, name) == getattr(fixture_meta, name), name
    handlers = ShardingPlan(
        special_handlers={"lm_head": "pkg.loss.vocab_parallel"}, tied_pairs=[("a.w", "b.w")]
    )
    back = shardplan.rebuild_plan(shardplan.freeze_plan(handlers))
    assert (back.special_handlers, back.tied_pairs) == (
        handlers.special_handlers,
        handlers.tied_pairs,
    )
