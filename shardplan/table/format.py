"""The artifact format's own names: what no table row may take, and what both the
generator (which never imports torch, msgspec or orjson) and the runtime read.

Pure data and the standard library only: ``specgen check`` imports this module, and the
generated code, the reference and the artifact I/O import it too, so each name has one home.
"""

from __future__ import annotations

# ------------------------------------------------------------------ the groups of a row
#
# A row's group says where its key lives in codegen_meta.json. The spec table's groups:
GROUP_PARAM_PLAN = "param_plan"  # a key of meta.param_plan[fqn], one entry per module
GROUP_INJECTIONS = "injections"  # a key of a rule of meta.injections
# The plan table's groups:
GROUP_PLAN = "plan"  # a top-level key, or a nested one ("parallel_dims.sequence_parallel")
GROUP_DERIVED = "derived"  # a top-level key freeze derives from the entries (no plan field)
GROUP_OTHERS = "others"  # the one field carrying the keys no row owns (other producers')
# Both tables:
GROUP_EXEMPT = "exempt"  # runtime state that never crosses the artifact

# What each group's rows do, which the generator checks a row against: "crosses" (a key
# and kinds; the field is frozen under the key), "derived" (a key and kinds, no field: freeze
# computes it from the entries), "others" (no key, no kinds: the field carries the keys no
# row owns) or "exempt" (no key, no kinds: never crosses).
GROUP_ROLES: dict[str, str] = {
    GROUP_PARAM_PLAN: "crosses",
    GROUP_INJECTIONS: "crosses",
    GROUP_PLAN: "crosses",
    GROUP_DERIVED: "derived",
    GROUP_OTHERS: "others",
    GROUP_EXEMPT: "exempt",
}

# The groups each table may use.
TABLE_GROUPS: dict[str, tuple[str, ...]] = {
    "spec": (GROUP_PARAM_PLAN, GROUP_INJECTIONS, GROUP_EXEMPT),
    "plan": (GROUP_PLAN, GROUP_DERIVED, GROUP_OTHERS, GROUP_EXEMPT),
}
# Groups a retired key may name: where keys were written.
RETIRABLE_GROUPS = (GROUP_PARAM_PLAN, GROUP_INJECTIONS, GROUP_PLAN, GROUP_DERIVED)

# ------------------------------------------------------------------ reserved keys

MATCH_KEY = "match"  # a rule's module FQN
TARGET_KEY = "_target_"  # a Target's dotted import path

# Keys the format itself uses, by group, and why: a row frozen under one of them would
# overwrite it. At the top level, the spec table's containers are the format's.
RESERVED_KEYS: dict[str, dict[str, str]] = {
    GROUP_PARAM_PLAN: {},
    GROUP_INJECTIONS: {MATCH_KEY: "it names the module FQN a rule applies to"},
    GROUP_PLAN: {
        GROUP_PARAM_PLAN: "it holds the modules' entries (the spec table)",
        GROUP_INJECTIONS: "it holds the modules' injection rules (the spec table)",
        "extra": "CodegenMeta keeps the keys no row owns under it",
    },
}
RESERVED_KEYS[GROUP_DERIVED] = RESERVED_KEYS[GROUP_PLAN]
# Groups whose keys are top-level keys of the document: each is a CodegenMeta field, so its
# segments are Python identifiers; it nests at most one level, "container.key".
TOP_LEVEL_GROUPS = (GROUP_PLAN, GROUP_DERIVED)
NESTING_SEPARATOR = "."

# ------------------------------------------------------------------ grammars

# A Target's path: dotted, at least two segments.
DOTTED_PATH_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+"
# A placement's text: S(dim), SS(dim,factor), R or P(op) (the grammar lives with its parser).
from shardplan.convert.placement_text import PLACEMENT_PATTERN  # noqa: E402

# How an error path names a key (``.key``, or ``["key"]`` when it is no identifier):
# generated code spells its paths with the same rule.
from shardplan.errors import field_path  # noqa: E402

__all__ = [
    "DOTTED_PATH_PATTERN",
    "GROUP_DERIVED",
    "GROUP_EXEMPT",
    "GROUP_INJECTIONS",
    "GROUP_OTHERS",
    "GROUP_PARAM_PLAN",
    "GROUP_PLAN",
    "GROUP_ROLES",
    "MATCH_KEY",
    "NESTING_SEPARATOR",
    "PLACEMENT_PATTERN",
    "RESERVED_KEYS",
    "RETIRABLE_GROUPS",
    "TABLE_GROUPS",
    "TARGET_KEY",
    "TOP_LEVEL_GROUPS",
    "field_path",
]
