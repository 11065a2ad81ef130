"""What ``apply_plan`` does with every row of both field tables (docs/contract.md §13). It lives beside the tables: pure data about their rows.

Each row's field is either *consumed* (the apply or ``check_fit`` reads it; the text says
where) or *not an apply input* (the text says why). ``tests/parallelize/test_apply_nd.py`` fails
for a row of ``SPEC_FIELDS`` or ``PLAN_FIELDS`` that has no decision here, so a new field
cannot be silently ignored by the apply, as reflection stops it being dropped by freeze.
Pure data, like the tables.
"""

from __future__ import annotations

from collections.abc import Iterable

from shardplan.table.format import GROUP_DERIVED
from shardplan.table.plan_fields import PLAN_FIELDS

CONSUMED = "consumed"
NOT_APPLY_INPUT = "not an apply input"

_EXEMPT = "exempt runtime state: never crosses the artifact, so a rebuilt plan never holds it"

# Row name -> (decision, where it is consumed or why it is not an input).
SPEC_DECISIONS: dict[str, tuple[str, str]] = {
    "params": (
        CONSUMED,
        "engine shards each parameter; check_fit: it exists, dims exist and divide",
    ),
    "in_src": (CONSUMED, "engine compiles in_src -> in_dst per input; check_fit: names bind"),
    "in_dst": (CONSUMED, "engine: the layout the module computes on; the gradient rule"),
    "out_src": (CONSUMED, "engine compiles out_src -> out_dst per output"),
    "out_dst": (CONSUMED, "engine: the layout an output leaves in; check_fit: loss_parallel"),
    "out_names": (CONSUMED, "engine: which tuple element each output contract moves"),
    "tp_divide_attrs": (CONSUMED, "engine divides them by the tp size; check_fit: ints, divisible"),
    "is_boundary": (CONSUMED, "engine: false moves nothing (injections still bind)"),
    "region_dispatch": (
        NOT_APPLY_INPUT,
        "this apply runs every module on local tensors (the producer's production mode); "
        "the field chooses DTensor dispatch or a local region only in its validate mode",
    ),
    "_deferred_bias_params": (
        CONSUMED,
        "engine adds the bias on the first rank of its row-sharded axes; check_fit: row-wise",
    ),
    "skip_source_lowering": (
        NOT_APPLY_INPUT,
        "codegen only: keeps the module's source instead of lowering it; no apply meaning",
    ),
    "inner_wrapper": (
        CONSUMED,
        "engine binds it (implementations or trusted Target), then runs it",
    ),
    "inner_target": (CONSUMED, 'engine wraps the module for "self"; check_fit refuses a child'),
    "inner_out_src": (
        CONSUMED,
        'check_fit: only a child inner_target uses it, and this apply refuses one ("self" only)',
    ),
    "local_compute_fn": (
        CONSUMED,
        "engine builds it once with the mesh family; it runs the forward",
    ),
    "_ep_stack": (CONSUMED, "engine stacks per-expert weights before sharding"),
    "_ep_size": (CONSUMED, "engine derives the expert mesh (edp, ep); experts.* shard on it"),
    "_tp_local_attr_plan": (NOT_APPLY_INPUT, _EXEMPT + "; head counts come from the placements"),
    "_is_terminal": (NOT_APPLY_INPUT, _EXEMPT),
    "_needs_cp_attn": (NOT_APPLY_INPUT, _EXEMPT + "; the inner_wrapper says what CP needs"),
    "_resolved_inner_wrapper": (NOT_APPLY_INPUT, _EXEMPT + "; the producer's write-back"),
    "_resolved_inner_target": (NOT_APPLY_INPUT, _EXEMPT + "; the producer's write-back"),
}

PLAN_DECISIONS: dict[str, tuple[str, str]] = {
    "special_handlers": (
        CONSUMED,
        "check_fit: a handler is a finding (this apply has none; apply it first)",
    ),
    "mesh_dim_names": (CONSUMED, "engine slices the mesh to these axes, in mesh order"),
    "tied_pairs": (CONSUMED, "engine ties the pair again after sharding; check_fit: placed alike"),
    "sequence_parallel": (
        NOT_APPLY_INPUT,
        "informational: the placements already say S(1) on tp where activations are split",
    ),
    "loss_parallel": (
        CONSUMED,
        "check_fit: some out_dst must shard the last dim; the logits stay sharded as it says",
    ),
    "frozen_sharded_params": (
        CONSUMED,
        "check_fit: cross-checked against the parameters the apply will shard",
    ),
    "other_keys": (
        CONSUMED,
        "check_fit reads boundary_classes, module_overrides and parallel_dims.*_size; "
        "OTHER_KEY_DECISIONS says what each other key is",
    ),
}

# The other producers' keys (plan.other_keys) the shared fixture holds, and what each is here.
OTHER_KEY_DECISIONS: dict[str, tuple[str, str]] = {
    "boundary_classes": (CONSUMED, "check_fit: each module exists and has that class name"),
    "module_overrides": (
        CONSUMED,
        "check_fit: a finding unless the program says they are applied (then: no module "
        "still has the original class)",
    ),
    "parallel_dims": (
        CONSUMED,
        "check_fit: each <axis>_size of an active axis is that axis' size; ep_size divides",
    ),
    "external_state_classes": (
        NOT_APPLY_INPUT,
        "codegen: classes whose forward is inlined; here the module's forward runs as it is",
    ),
    "source": (NOT_APPLY_INPUT, "model provenance (architecture, file, config dims)"),
    "covered": (NOT_APPLY_INPUT, "what the bundle describes"),
    "not_covered": (NOT_APPLY_INPUT, "what the program does itself: the mesh, FSDP, PP, ..."),
    "codegen_version": (NOT_APPLY_INPUT, "bundle provenance"),
    "entrypoints": (NOT_APPLY_INPUT, "the producer's generated entry points"),
    "model_class": (NOT_APPLY_INPUT, "provenance; boundary_classes is what is checked"),
    "model_name": (NOT_APPLY_INPUT, "provenance"),
    "outputs": (NOT_APPLY_INPUT, "bundle integrity (generated files' hashes)"),
    "remote_siblings": (NOT_APPLY_INPUT, "bundle provenance"),
    "signature": (NOT_APPLY_INPUT, "bundle integrity"),
    "skipped_overrides": (NOT_APPLY_INPUT, "overrides the producer did not apply: provenance"),
    "yaml_path": (NOT_APPLY_INPUT, "provenance"),
    "yaml_sha256": (NOT_APPLY_INPUT, "provenance"),
}


def _plan_key(name: str) -> str:
    return next(row.key for row in PLAN_FIELDS if row.name == name)


# The plan-level keys check_fit names in its findings, read off the plan table (the runtime
# spells no plan-level key itself).
MESH_DIM_NAMES_KEY = _plan_key("mesh_dim_names")
LOSS_PARALLEL_KEY = _plan_key("loss_parallel")
PARALLEL_DIMS_KEY = LOSS_PARALLEL_KEY.partition(".")[0]
SHARDED_PARAMS_KEY = next(row.key for row in PLAN_FIELDS if row.group == GROUP_DERIVED)


def undecided(names: Iterable[str], decisions: dict[str, tuple[str, str]]) -> list[str]:
    """The names with no decision, or a decision that is neither kind or gives no reason."""
    return [
        name
        for name in names
        if name not in decisions
        or decisions[name][0] not in (CONSUMED, NOT_APPLY_INPUT)
        or not decisions[name][1].strip()
    ]
