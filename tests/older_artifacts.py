"""What freezing an older artifact again writes, derived from the tables as they stand.

An artifact comes back byte for byte through rebuild and freeze, except for one thing the
table decides: a row whose freeze writes its key even at the absent value (written always,
or written when not None with a default that is not None) adds that key, at its absent
value, to every artifact written before the row, since rebuild reads the missing key as
the absent value and freeze then writes it. ``frozen_again`` gives that document; every
test that pins "an older artifact comes back byte for byte" expects it, so what differs is
those keys and nothing else. On a table without such a row the artifact itself comes back.

Derived rows (a key freeze computes, naming no field) are left out: the laws recompute an
absent derived key, and every artifact holds it.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from shardplan.artifact.meta import meta_from_dict, meta_to_bytes
from shardplan.table.format import GROUP_INJECTIONS, GROUP_PARAM_PLAN, GROUP_PLAN, MATCH_KEY
from shardplan.table.kinds import Crossing, crossings
from shardplan.table.plan_fields import PLAN_FIELDS
from shardplan.table.rows import split_key
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from shardplan.table.spec_fields import SPEC_FIELDS


@functools.cache
def keys_written_always() -> dict[str, dict[str, Any]]:
    """By group (param_plan, injections, plan), each key freeze writes even at its absent
    value (``Crossing.written_at_absent``), with the JSON it writes for that value (a key
    nested in ``parallel_dims`` as the table writes it, ``parallel_dims.name``)."""
    found: dict[str, dict[str, Any]] = {GROUP_PARAM_PLAN: {}, GROUP_INJECTIONS: {}, GROUP_PLAN: {}}
    for rows, cls in ((SPEC_FIELDS, ModuleShardingSpec), (PLAN_FIELDS, ShardingPlan)):
        resolved = crossings(rows, cls)
        for row in rows:
            crossing = resolved.get(row.name)
            if row.group in found and crossing is not None and crossing.written_at_absent:
                found[row.group][row.key] = _frozen_absent(row.key, crossing)
    return found


def _frozen_absent(key: str, crossing: Crossing) -> Any:
    """The JSON freeze writes for the row's absent value: null for None, else what the
    row's freeze kind makes of it."""
    # Imported at first use: the kinds' functions import torch, which importing this module
    # (test_evolution does) should not cost.
    from shardplan import reference

    value = crossing.absent_value()
    return None if value is None else reference.function(crossing, "freeze")(value, key)


def frozen_again(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (an artifact's JSON) as freeze writes it again after rebuild: every
    entry, rule and plan object gains the keys written always that it lacks, at their
    absent values; a module without a rule gains one where a rule key is written always
    (in match order, where freeze writes it). Nothing else changes."""
    again = copy.deepcopy(document)
    written = keys_written_always()
    for entry in again.get(GROUP_PARAM_PLAN, {}).values():
        _fill(entry, written[GROUP_PARAM_PLAN])
    if written[GROUP_INJECTIONS]:
        rules = again.setdefault(GROUP_INJECTIONS, [])
        matched = {rule.get(MATCH_KEY) for rule in rules}
        for rule in rules:
            _fill(rule, written[GROUP_INJECTIONS])
        for fqn in again.get(GROUP_PARAM_PLAN, {}):
            if fqn not in matched:
                rule = _fill({MATCH_KEY: fqn}, written[GROUP_INJECTIONS])
                later = [n for n, r in enumerate(rules) if r.get(MATCH_KEY, "") > fqn]
                rules.insert(later[0] if later else len(rules), rule)
    for key, value in written[GROUP_PLAN].items():
        within, leaf = split_key(GROUP_PLAN, key)
        holder = again.setdefault(within, {}) if within else again
        holder.setdefault(leaf, copy.deepcopy(value))
    return again


def frozen_again_bytes(data: bytes) -> bytes:
    """The bytes of ``frozen_again`` for an artifact's bytes, as the format writes them."""
    return meta_to_bytes(meta_from_dict(frozen_again(json.loads(data))))


def _fill(holder: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    for key, value in keys.items():
        holder.setdefault(key, copy.deepcopy(value))
    return holder
