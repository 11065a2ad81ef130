"""The plan table: which ShardingPlan field crosses the artifact boundary, and how.

The same form as the spec table (``spec_fields``), for the plan level of
codegen_meta.json: one row a ShardingPlan field (``modules`` aside: the spec table fills
it), in the order freeze writes them. A key of group ``plan`` is a top-level key, or a
nested one (``parallel_dims.sequence_parallel``); a ``derived`` row is a key freeze
computes from the entries, which names no field; the ``others`` row is the field that
carries every key no row owns (other producers' metadata), as it nests in the file.

Pure data, standard library only, like the spec table.
"""

from __future__ import annotations

from shardplan.table.format import GROUP_DERIVED, GROUP_OTHERS, GROUP_PLAN
from shardplan.table.rows import RetiredKey, SpecField, rows_digest

# fmt: off
PLAN_FIELDS: tuple[SpecField, ...] = (
    SpecField("special_handlers", "special_handlers", GROUP_PLAN, "handler_map", "handler_map",
              doc="Module FQN -> the name of a handler that treats it specially."),
    SpecField("mesh_dim_names", "mesh_dim_names", GROUP_PLAN, "opt_name_list", "opt_name_tuple",
              doc="The mesh axes the plan uses, in mesh order; null: not recorded, use the full mesh."),
    SpecField("tied_pairs", "tied_pairs", GROUP_PLAN, "pair_list", "pair_list",
              doc="Pairs of parameter FQNs that share storage."),
    SpecField("sequence_parallel", "parallel_dims.sequence_parallel", GROUP_PLAN,
              "bool", "bool_default_true",
              doc="Whether activations are sharded along the sequence between TP regions."),
    SpecField("loss_parallel", "parallel_dims.loss_parallel", GROUP_PLAN,
              "bool", "bool_default_false",
              doc="Whether the loss is computed on vocabulary-sharded logits."),
    SpecField("frozen_sharded_params", "frozen_sharded_params", GROUP_DERIVED,
              "sharded_params", "sharded_params",
              doc="Sorted FQNs of the parameters with any axis not replicated."),
    SpecField("other_keys", "", GROUP_OTHERS,
              doc="The artifact's keys no row owns (other producers' metadata), written back unchanged."),
)
# fmt: on

# Keys of removed plan-level rows that artifacts may still hold: rebuild accepts and drops them.
PLAN_RETIRED_KEYS: tuple[RetiredKey, ...] = ()


def table_digest(
    fields: tuple[SpecField, ...] | None = None, retired: tuple[RetiredKey, ...] | None = None
) -> str:
    """sha256 over the plan table's rows and retired keys (default: as they are now)."""
    return rows_digest(
        PLAN_FIELDS if fields is None else fields,
        PLAN_RETIRED_KEYS if retired is None else retired,
    )
