"""The text forms of placements (docs/contract.md §7), as a grammar without torch.

The parser (``shardplan.convert.placements``) and the artifact's JSON Schema (rendered by the
generator, which never imports torch) read the same definitions here.
"""

from __future__ import annotations

# The reduce ops torch's c10d knows, less premul_sum, whose factor has no text form.
REDUCE_OPS = ("avg", "band", "bor", "bxor", "max", "min", "product", "sum")
# Dims and factors are bounded so that every accepted text fits torch's int64 fields.
MAX_INT_DIGITS = 9
INT = rf"(0|-?[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})"
POSITIVE = rf"([1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})"
SHARD = rf"S\({INT}\)"
STRIDED_SHARD = rf"SS\({INT},{POSITIVE}\)"
PARTIAL = rf"P\(({'|'.join(REDUCE_OPS)})\)"
REPLICATE = "R"
# The whole language, anchored: what a JSON Schema "pattern" (ECMA-262) needs.
PLACEMENT_PATTERN = rf"^({REPLICATE}|{SHARD}|{STRIDED_SHARD}|{PARTIAL})$"
