"""generated/codegen_meta.schema.json says what strict rebuild accepts (issue 13).

Valid artifacts validate: the shared fixture, the corpus, random metas freeze writes.
A meta with one structural defect (a wrong JSON type, an unknown key, a bad placement
text) fails validation exactly when strict rebuild refuses it. The checks a schema
cannot state (README lists them) are not planted.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from jsonschema import Draft202012Validator

import shardplan
from shardplan.artifact.meta import load_meta, meta_from_dict
from shardplan.errors import MetaError
from shardplan.table.format import MATCH_KEY
from tests import strategies
from tests.helpers import CORPUS_FILES, QWEN3_MOE, REPO, shared_fixture

# What strict rebuild trusts here: the drawn metas' Targets and the corpus's
# (docs/contract.md §8).
TRUSTED = (*strategies.TARGET_ENTRIES, "deepseek_planner.*")

SCHEMA_FILE = REPO / "generated" / "codegen_meta.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text())
VALIDATOR = Draft202012Validator(SCHEMA)


def valid(document: Any) -> bool:
    return VALIDATOR.is_valid(document)


def rebuilds(document: Any) -> bool:
    try:
        shardplan.rebuild_plan(meta_from_dict(document), strict=True, allow_targets=TRUSTED)
    except MetaError:
        return False
    return True


def test_the_schema_is_a_valid_draft_2020_12_schema_with_an_id() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"].endswith("codegen_meta.schema.json")


def test_every_key_of_an_entry_and_a_rule_has_a_title_and_a_description() -> None:
    from shardplan.table.spec_fields import INJECTION_SPEC_FIELDS, PARAM_PLAN_SPEC_FIELDS

    for where, fields in (("entry", PARAM_PLAN_SPEC_FIELDS), ("rule", INJECTION_SPEC_FIELDS)):
        properties = SCHEMA["$defs"][where]["properties"]
        for field in fields:
            assert properties[field.key]["title"] == field.key
            assert properties[field.key]["description"] == field.doc and field.doc


def test_the_shared_fixture_validates() -> None:
    document = json.loads(shared_fixture(QWEN3_MOE).read_text())
    assert list(VALIDATOR.iter_errors(document)) == []


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_every_corpus_file_validates(path: Path) -> None:
    assert list(VALIDATOR.iter_errors(json.loads(path.read_text()))) == []
    shardplan.rebuild_plan(load_meta(path), allow_targets=TRUSTED)  # strict rebuild agrees


# A quarter of the profile's count: each example is a whole plan of several modules, and
# jsonschema takes about 10 ms a document here (the suite's budget).
@settings(max_examples=max(settings().max_examples // 4, 50))
@given(strategies.valid_meta_documents())
def test_every_meta_freeze_writes_validates(document: dict[str, Any]) -> None:
    """Random plans, frozen and decoded again: the schema accepts them all."""
    assert list(VALIDATOR.iter_errors(document)) == []


# ------------------------------------------------------------------ the differential

# Values of every JSON type but the integral float, which JSON Schema calls an integer
# while rebuild reads a float (README: what the schema cannot express).
WRONG_VALUES = [None, True, False, 0, 7, -3, 1.5, "", "x", "S(0)", [], ["a"], [1], {}, {"a": 1}]
BAD_PLACEMENTS = strategies.BAD_PLACEMENTS


def _node(document: Any, trail: tuple[Any, ...]) -> Any:
    for step in trail:
        document = document[step]
    return document


def _is_match(trail: tuple[Any, ...]) -> bool:
    # A rule's match naming no entry, and a derived key that disagrees with the entries,
    # are checks the schema cannot state: not planted.
    rule_match = len(trail) == 3 and trail[0] == "injections" and trail[2] == MATCH_KEY
    return rule_match or trail[:1] == ("frozen_sharded_params",)


def _sharded_params_stale(document: Any) -> bool:
    """docs/contract.md §2b, said again by hand: frozen_sharded_params lists, sorted, the FQN
    of every parameter with any axis not "R". A damaged placement ("R" -> "S(0)") makes it stale,
    which strict rebuild refuses and a schema cannot state."""
    try:
        sharded = sorted(
            f"{fqn}.{param}" if fqn else param
            for fqn, entry in document["param_plan"].items()
            for param, named in (entry.get("params") or {}).items()
            if any(text != "R" for text in named.values())
        )
    except (AttributeError, TypeError, KeyError):
        return False  # a structural defect: the differential below decides
    return document.get("frozen_sharded_params", []) != sharded


@st.composite
def structurally_damaged(draw: st.DrawFn) -> tuple[str, Any]:
    """A document freeze wrote (or the real artifact), with one structural defect."""
    document = copy.deepcopy(draw(BASES))
    trail = draw(st.sampled_from(strategies._locations(document)))
    defect = draw(st.sampled_from(["type", "key", "placement"]))
    if defect == "key":
        parent = _node(document, trail)
        if isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "Params", "_x"]))] = draw(
                st.sampled_from(WRONG_VALUES)
            )
        return defect, document
    if not trail or _is_match(trail):
        return defect, document
    if defect == "placement":
        if isinstance(_node(document, trail), str):
            strategies._set(document, trail, draw(st.sampled_from(BAD_PLACEMENTS)))
        return defect, document
    return defect, strategies._set(document, trail, draw(st.sampled_from(WRONG_VALUES)))


def _bases() -> list[dict[str, Any]]:
    documents = [
        json.loads(path.read_text()) for path in CORPUS_FILES if path.stat().st_size < 10_000
    ]
    documents += [strategies.frozen_json(strategies.random_plan(seed)) for seed in range(24)]
    return documents


BASES = st.sampled_from(_bases())


@given(structurally_damaged())
def test_schema_refuses_a_structural_defect_exactly_when_strict_rebuild_does(
    damaged: tuple[str, Any],
) -> None:
    """Differential: the schema's verdict equals strict rebuild's, defect by defect."""
    _, document = damaged
    if _rules_name_missing_or_twice(document) or _sharded_params_stale(document):
        # Replacing param_plan (say with {}) can orphan a rule: a rebuild-only check.
        assert not rebuilds(document)
        return
    assert valid(document) == rebuilds(document), list(VALIDATOR.iter_errors(document))


def _rules_name_missing_or_twice(document: Any) -> bool:
    entries, rules = document.get("param_plan"), document.get("injections")
    if not isinstance(entries, dict) or not isinstance(rules, list):
        return False
    matches = [r.get(MATCH_KEY) for r in rules if isinstance(r, dict)]
    named = [m for m in matches if isinstance(m, str)]
    return any(m not in entries for m in named) or len(set(named)) != len(named)


def test_the_differential_plants_defects_both_sides_refuse() -> None:
    """The differential is not vacuous: hand-written defects, each refused by both."""
    base = {
        "param_plan": {"m": {"is_boundary": True}},
        "injections": [{"match": "m", "ep_size": 2}],
    }
    defects = [
        {"param_plan": {"m": {"is_boundary": 1}}},
        {"param_plan": {"m": {"bogus": 1}}},
        {"param_plan": {"m": {"params": {"w": {"tp": "S(x)"}}}}},
        {"injections": [{"match": "m", "ep_size": True}]},
        {"injections": [{"match": "m", "inner_out_src": {"tp": "R", "o": {"tp": "R"}}}]},
        {"injections": [{"match": "m", "inner_wrapper": {"_target_": "no_dots"}}]},
        {"mesh_dim_names": "tp"},
        {"tied_pairs": [["a"]]},
        {"parallel_dims": {"loss_parallel": "yes"}},
    ]
    assert valid(base) and rebuilds(base)
    for defect in defects:
        document = {**base, **defect}
        assert not valid(document) and not rebuilds(document), defect
