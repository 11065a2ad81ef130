"""The runtime entry points, backed by the generated straight-line code."""

from __future__ import annotations

from generated.freeze import freeze_injections, freeze_param_plan
from generated.rebuild import rebuild_live_plan_from_meta
from shardplan.meta import CodegenMeta
from shardplan.plan_meta import meta_for_plan
from shardplan.spec import ShardingPlan


def freeze_plan(plan: ShardingPlan) -> CodegenMeta:
    """Freeze a live plan into a CodegenMeta (entries, rules and plan-level settings)."""
    return meta_for_plan(plan, freeze_param_plan(plan), freeze_injections(plan))


def rebuild_plan(meta: CodegenMeta, *, strict: bool = True) -> ShardingPlan:
    """Rebuild a live plan from a CodegenMeta; MetaError names any bad place."""
    return rebuild_live_plan_from_meta(meta, strict=strict)
