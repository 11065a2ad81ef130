"""The add-a-field workflow (README "Adding a spec field"), end to end in a copy of the repo.

Each test edits the dataclass and/or the table of a throwaway copy, runs specgen there,
and checks what a developer would see: the drift check, the one-block diff, the round
trip of the new field through codegen_meta.json, and the loud failures of a skipped step.

The generator and the copy's code run in this process (tests.helpers.run_specgen_here,
run_python_here). Real processes: only the README steps (`make codegen`, then pytest in the
copy), which are what a developer runs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shardplan.table.spec import ModuleShardingSpec
from shardplan.table.spec_fields import PARAM_PLAN_SPEC_FIELDS
from tests.helpers import (
    run_python_here,
    run_specgen_here,
    snapshot,
)
from tests.older_artifacts import frozen_again
from tests.strategies import crossing_of

SPEC = "shardplan/table/spec.py"
TABLE = "shardplan/table/spec_fields.py"
GENERATED_MODULES = ("freeze.py", "rebuild.py")
# Lines that change with any table edit: the header stamp and the staleness-guard constant
# (one line per table module: its digest).
DIGEST_PREFIXES = ("# tables sha256: ", "# inputs sha256: ", "TABLE_SHA256 = ")
GUARD_LINE = re.compile(r'    "[\w.]+": "[0-9a-f]{64}",')


def _is_digest_line(line: str) -> bool:
    return line.startswith(DIGEST_PREFIXES) or bool(GUARD_LINE.fullmatch(line))


@dataclass(frozen=True)
class NewField:
    """A field to add: its dataclass line, its table row, and the lines they go after."""

    name: str
    declaration: str
    after_declaration: str
    row: str
    after_row: str


GRAD_SCALE = NewField(
    name="grad_scale",
    declaration="grad_scale: float | None = None",
    after_declaration="skip_source_lowering: int | bool | None = None",
    row='SpecField("grad_scale", "grad_scale", GROUP_PARAM_PLAN, "float", "float", doc="Loss scale.")',
    after_row=(
        'SpecField("skip_source_lowering", "skip_source_lowering", GROUP_PARAM_PLAN,\n'
        '              "int_truthy", "int_or_true",\n'
        "              doc=\"A producer's marker (a truthy int or true): keep the module's source.\")"
    ),
)
# Every field of ModuleShardingSpec has a default, so any place is legal; after _ep_size
# keeps the injections group together, as the table does.
POST_HOOK = NewField(
    name="post_hook",
    declaration="post_hook: object = None",
    after_declaration="_ep_size: int = 0",
    row='SpecField("post_hook", "post_hook", GROUP_INJECTIONS, "value_to_dict", "injection_target", doc="Runs after forward.")',
    after_row=(
        'SpecField("_ep_size", "ep_size", GROUP_INJECTIONS, "int_truthy", "int_truthy",\n'
        '              doc="The expert-parallel degree; absent means 0, no expert parallelism.")'
    ),
)


# ------------------------------------------------------------------- edits


def _insert_after(path: Path, anchor: str, line: str) -> None:
    """Insert ``line`` (4-space indented) on its own line right after the unique line(s) ``anchor``."""
    text = path.read_text()
    anchor = f"    {anchor}\n"
    assert text.count(anchor) == 1, f"test setup: {anchor!r} is not in {path.name} exactly once"
    path.write_text(text.replace(anchor, f"{anchor}    {line}\n"))


def _add_dataclass_field(root: Path, new: NewField) -> None:
    _insert_after(root / SPEC, new.after_declaration, new.declaration)


def _add_table_row(root: Path, new: NewField) -> None:
    _insert_after(root / TABLE, new.after_row + ",", new.row + ",")


def _add_field_and_row(root: Path, new: NewField) -> None:
    _add_dataclass_field(root, new)
    _add_table_row(root, new)


def _add_field_and_regenerate(root: Path, new: NewField) -> None:
    _add_field_and_row(root, new)
    result = run_specgen_here(root)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------- observations


def _generated_texts(root: Path) -> dict[str, str]:
    return {name: (root / "generated" / name).read_text() for name in GENERATED_MODULES}


def _changed_lines(before: str, after: str) -> tuple[Counter[str], Counter[str]]:
    """(added, removed) lines, counted, digest lines left out; asserts the digests changed.

    Counted, not aligned: a diff's alignment depends on the neighbours (a block of the same
    shape nearby, a user's row, shifts it), while what was added and removed does not.
    Where a block goes is checked on the text itself."""
    old, new = Counter(before.splitlines()), Counter(after.splitlines())
    added, removed = new - old, old - new
    assert any(line.startswith(DIGEST_PREFIXES[0]) for line in removed), "table digest unchanged"
    assert any(GUARD_LINE.fullmatch(line) for line in added), "guard constant unchanged"
    return (
        Counter({line: n for line, n in added.items() if not _is_digest_line(line)}),
        Counter({line: n for line, n in removed.items() if not _is_digest_line(line)}),
    )


def _assert_check_names_both_modules_stale(root: Path) -> None:
    result = run_specgen_here(root, "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "generated/freeze.py is stale" in result.stderr
    assert "generated/rebuild.py is stale" in result.stderr


# Freeze the plan with the copy's generated code, write and read the JSON artifact,
# rebuild, and do the same with the table-driven reference. Entries and rules are
# printed as produced (meta_to_json sorts keys, which would hide the table order).
ROUND_TRIP = """
import json

import shardplan
from shardplan import reference
from shardplan.artifact.meta import meta_from_json, meta_to_json
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.convert.targets import Target

plan = ShardingPlan(modules={modules})
meta = shardplan.freeze_plan(plan)
text = meta_to_json(meta)
rebuilt = shardplan.rebuild_plan(meta_from_json(text), allow_targets=("json.dumps",))
reference_meta = reference.freeze_plan(plan)
refrozen = shardplan.freeze_plan(rebuilt)
print(json.dumps({{
    "frozen": [meta.param_plan, meta.injections],
    "reference_frozen": [reference_meta.param_plan, reference_meta.injections],
    "refrozen": [refrozen.param_plan, refrozen.injections],
    "json": text,
    "reference_json": meta_to_json(reference_meta),
    "rebuilt": {{fqn: repr(getattr(spec, {field!r})) for fqn, spec in rebuilt.modules.items()}},
    "rebuilt_equals_plan": rebuilt.modules == plan.modules,
    "reference_rebuilt_equals_rebuilt":
        reference.rebuild_live_plan_from_meta(meta_from_json(text), allow_targets=("json.dumps",)).modules
        == rebuilt.modules,
}}))
"""


def _regenerate_after_check_fails(
    root: Path, new: NewField
) -> dict[str, tuple[Counter[str], Counter[str]]]:
    """Add the field and row, see --check fail, regenerate, see --check pass.

    Returns each generated module's (added, removed) lines.
    """
    before = _generated_texts(root)
    _add_field_and_row(root, new)
    _assert_check_names_both_modules_stale(root)
    assert run_specgen_here(root).returncode == 0
    check = run_specgen_here(root, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    after = _generated_texts(root)
    return {name: _changed_lines(before[name], after[name]) for name in ("freeze.py", "rebuild.py")}


def _round_trip(root: Path, new: NewField, modules: str) -> dict[str, Any]:
    """Run ROUND_TRIP in ``root`` for the plan whose ``modules`` dict is given as source."""
    result = run_python_here(root, "-c", ROUND_TRIP.format(modules=modules, field=new.name))
    assert result.returncode == 0, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout)
    return outcome


def _assert_generated_agrees_with_reference(outcome: dict[str, Any]) -> None:
    # json.dumps keeps insertion order, so this compares key order too.
    assert json.dumps(outcome["frozen"]) == json.dumps(outcome["reference_frozen"])
    assert outcome["json"] == outcome["reference_json"]
    assert outcome["reference_rebuilt_equals_rebuilt"]
    assert outcome["rebuilt_equals_plan"]
    # freeze(rebuild(M)) == M, entry and rule keys in the same (table) order. Module order
    # may differ: the artifact sorts keys, so the rebuilt plan holds the modules sorted.
    (entries, rules), (refrozen_entries, refrozen_rules) = outcome["frozen"], outcome["refrozen"]
    assert refrozen_entries == entries and refrozen_rules == rules
    assert {fqn: list(entry) for fqn, entry in refrozen_entries.items()} == {
        fqn: list(entry) for fqn, entry in entries.items()
    }
    assert [list(rule) for rule in refrozen_rules] == [list(rule) for rule in rules]


# ------------------------------------------------------------------- a param_plan field

GRAD_SCALE_FREEZE_BLOCK = [
    "        # grad_scale: typed_float, written when not None",
    "        __value = __spec.grad_scale",
    "        if __value is not None:",
    '            __entry["grad_scale"] = __freeze_typed_float(',
    '                __value, __module_path(__fqn) + ".grad_scale"',
    "            )",
]


def test_new_param_plan_field_fails_check_until_codegen_adds_one_block_after_its_neighbour(
    repo_copy: Path,
) -> None:
    changes = _regenerate_after_check_fails(repo_copy, GRAD_SCALE)
    added, removed = changes["freeze.py"]
    assert not removed
    # The block, and the import of the kind function it calls (unless a row called it).
    import_line = "    freeze_typed_float as __freeze_typed_float,"
    assert added - Counter([import_line]) == Counter(GRAD_SCALE_FREEZE_BLOCK)
    skip_line = '                __value, __module_path(__fqn) + ".skip_source_lowering"\n            )'
    assert (
        "\n".join([skip_line, *GRAD_SCALE_FREEZE_BLOCK]) in _generated_texts(repo_copy)["freeze.py"]
    )

    added, removed = changes["rebuild.py"]
    assert not removed
    assert "        # grad_scale: typed_float, None when absent" in added
    assert '    "grad_scale",' in added  # PARAM_PLAN_KEYS: unknown keys stay strict errors
    # Declared after skip_source_lowering, so among the fields the spec is given by position.
    assert "            grad_scale," in added and '        "grad_scale",' in added
    # The common value by its exact type, the rest through the kind's function.
    assert "        if __type(__value) in (__float, __int):" in added
    assert "            grad_scale: float | None = __value" in added
    assert any(line.startswith("            grad_scale = __rebuild_typed_float(") for line in added)


def test_new_param_plan_field_round_trips_through_the_artifact_in_table_order(
    repo_copy: Path,
) -> None:
    _add_field_and_regenerate(repo_copy, GRAD_SCALE)
    fqn = "model.layers.0.mlp"
    outcome = _round_trip(
        repo_copy,
        GRAD_SCALE,
        f'{{{fqn!r}: ModuleShardingSpec(out_names=["y"], skip_source_lowering=2, grad_scale=0.5), '
        '"model.head": ModuleShardingSpec()}',
    )
    assert outcome["rebuilt"] == {fqn: "0.5", "model.head": "None"}
    param_plan, injections = outcome["frozen"]
    # Table order, not alphabetical: grad_scale sorts before skip_source_lowering. The keys
    # written are those set, and those whose row writes the field's default (is_boundary).
    defaults, set_here = ModuleShardingSpec(), {"out_names": ["y"], "skip_source_lowering": 2}
    expected = []
    for row in PARAM_PLAN_SPEC_FIELDS:
        if crossing_of(row).writes(set_here.get(row.name, getattr(defaults, row.name))):
            expected.append(row.key)
        if row.name == "skip_source_lowering":  # GRAD_SCALE's row follows it
            expected.append("grad_scale")
    assert list(param_plan[fqn]) == expected
    assert param_plan[fqn]["grad_scale"] == 0.5
    assert "grad_scale" not in param_plan["model.head"]  # None is not written
    # No rule, unless the table writes a rule key always.
    modules = dict.fromkeys(param_plan, {})
    assert injections == frozen_again({"param_plan": modules, "injections": []})["injections"]
    _assert_generated_agrees_with_reference(outcome)


# ------------------------------------------------------------------- an injection field


def test_new_injection_field_fails_check_until_codegen_adds_one_block_after_its_neighbour(
    repo_copy: Path,
) -> None:
    changes = _regenerate_after_check_fails(repo_copy, POST_HOOK)
    added, removed = changes["freeze.py"]
    block = [
        "        # post_hook: injected, written when not None",
        "        __value = __spec.post_hook",
        "        if __value is not None:",
        '            __rule["post_hook"] = (',
        "                __value",
        "                if __type(__value) is __str",
        '                else __freeze_injected(__value, __module_path(__fqn) + ".post_hook")',
        "            )",
    ]
    assert not removed
    assert added == Counter(block)
    ep_size_line = "            )"  # the end of the ep_size block: admit(..., freeze_int(...), ...)
    assert "\n".join([ep_size_line, *block]) in _generated_texts(repo_copy)["freeze.py"]

    added, removed = changes["rebuild.py"]
    assert not removed
    assert "            # post_hook: injected, None when absent" in added  # in `if rule:`
    assert "            post_hook = None" in added  # and in its `else:`, for modules with no rule
    assert '    "post_hook",' in added  # INJECTION_KEYS
    # Declared after _ep_size, so among the fields the spec is given by position.
    assert "            post_hook," in added and '        "post_hook",' in added


def test_new_injection_field_freezes_a_target_into_a_rule_and_rebuilds_an_equal_target(
    repo_copy: Path,
) -> None:
    _add_field_and_regenerate(repo_copy, POST_HOOK)
    outcome = _round_trip(
        repo_copy,
        POST_HOOK,
        '{"model.a": ModuleShardingSpec(post_hook=Target("json.dumps", indent=2)), '
        '"model.b": ModuleShardingSpec(_ep_size=4, post_hook=Target("json.dumps")), '
        '"model.c": ModuleShardingSpec()}',
    )
    param_plan, injections = outcome["frozen"]
    rules = [
        {"match": "model.a", "post_hook": {"_target_": "json.dumps", "indent": 2}},
        {"match": "model.b", "ep_size": 4, "post_hook": {"_target_": "json.dumps"}},
    ]
    # With the rule keys the table writes always (a rule for model.c too, then).
    modules = dict.fromkeys(param_plan, {})
    assert injections == frozen_again({"param_plan": modules, "injections": rules})["injections"]
    assert [
        [key for key in rule if key in ("match", "ep_size", "post_hook")] for rule in injections
    ][:2] == [
        ["match", "post_hook"],
        ["match", "ep_size", "post_hook"],
    ]
    assert outcome["rebuilt"] == {
        "model.a": "Target('json.dumps', indent=2)",
        "model.b": "Target('json.dumps')",
        "model.c": "None",
    }
    _assert_generated_agrees_with_reference(outcome)


# ------------------------------------------------------------------- a forgotten step


@pytest.mark.parametrize("args", [(), ("--check",)], ids=["codegen", "check"])
def test_dataclass_field_without_a_row_exits_2_naming_it_and_touches_nothing(
    repo_copy: Path, args: tuple[str, ...]
) -> None:
    _add_dataclass_field(repo_copy, GRAD_SCALE)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("specgen: ")
    assert (
        "field 'grad_scale' of shardplan.table.spec:ModuleShardingSpec has no table row"
        in result.stderr
    )
    assert "Add a SpecField row for it to shardplan/table/spec_fields.py" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


@pytest.mark.parametrize(
    ("code", "stale_module"),
    [
        ("import generated.rebuild", "generated/rebuild.py"),
        ("import shardplan; shardplan.freeze_plan", "generated/meta.py"),
    ],
    ids=["import-generated", "shardplan-freeze_plan"],
)
def test_row_added_without_codegen_makes_generated_code_refuse_to_load(
    repo_copy: Path, code: str, stale_module: str
) -> None:
    _add_field_and_row(repo_copy, GRAD_SCALE)
    result = run_python_here(repo_copy, "-c", code)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"StaleGeneratedCode: {stale_module} is stale: the field table changed" in result.stderr
    assert "Run `make codegen` and commit generated/." in result.stderr
