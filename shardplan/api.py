"""The runtime entry points, backed by the generated straight-line code.

It exposes the same four functions as the table-driven reference
(``shardplan.reference``): ``freeze_plan``, ``freeze_param_plan``, ``freeze_injections``
and ``rebuild_live_plan_from_meta``, so tests and benchmarks take either module as it
is; ``rebuild_plan`` is the public name of the last.

Before importing the generated modules (which load torch, seconds), this module checks
they exist, so a missing one is reported at once with the command that makes it.
"""

from __future__ import annotations

from shardplan.staleness import require_generated

GENERATED_MODULES = ("generated.meta", "generated.freeze", "generated.rebuild")

for _name in GENERATED_MODULES:
    require_generated(_name)

# After the check on purpose: these imports are the expensive part.
from generated.freeze import freeze_injections, freeze_param_plan
from generated.freeze import freeze_plan as _freeze_plan
from generated.meta import CodegenMeta
from generated.rebuild import rebuild_live_plan_from_meta as _generated_rebuild
from shardplan.collector import pause_collector, resume_collector
from shardplan.convert.trust import AllowTargets, begin_rebuild, end_rebuild
from shardplan.errors import MetaError, check_argument
from shardplan.table.spec import ShardingPlan


def freeze_plan(plan: ShardingPlan) -> CodegenMeta:
    """Freeze a live plan into a CodegenMeta (entries, rules and plan-level settings).

    Automatic garbage collection is paused for the call (shardplan.collector)."""
    was_enabled = pause_collector()
    try:
        return _freeze_plan(plan)
    finally:
        resume_collector(was_enabled)


def rebuild_live_plan_from_meta(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """The generated rebuild, admitting Targets only under ``allow_targets``.

    ``allow_targets`` holds what the calling program trusts (shardplan.convert.trust):
    exact callables (``"pkg.mod.fn"``), a module's own callables (``"pkg.mod"``), an
    owned subtree (``"pkg.*"``), or paths bound to its own callables (``{path: fn}``). A
    Target no entry admits is an UntrustedTarget (a MetaError) naming its place, before
    anything is imported. The default admits none."""
    check_argument(meta, CodegenMeta, "a CodegenMeta", MetaError)
    check_argument(strict, bool, "True or False", MetaError, "strict")
    token = begin_rebuild(allow_targets)
    try:
        return _generated_rebuild(meta, strict=strict)
    finally:
        end_rebuild(token)


def rebuild_plan(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """Rebuild a live plan from a CodegenMeta; MetaError names any bad place. Targets
    are admitted only under ``allow_targets`` (rebuild_live_plan_from_meta).

    Automatic garbage collection is paused for the call (shardplan.collector)."""
    was_enabled = pause_collector()
    try:
        return rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)
    finally:
        resume_collector(was_enabled)


__all__ = [
    "freeze_injections",
    "freeze_param_plan",
    "freeze_plan",
    "rebuild_live_plan_from_meta",
    "rebuild_plan",
]
