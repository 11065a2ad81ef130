"""The runtime entry points, backed by the generated straight-line code.

It exposes the same four functions as the table-driven reference
(``shardplan.reference``): ``freeze_plan``, ``freeze_param_plan``, ``freeze_injections``
and ``rebuild_live_plan_from_meta``, so tests and benchmarks take either module as it
is; ``rebuild_plan`` is the public name of the last. ``write_plan`` is
``dump_meta(freeze_plan(plan), path)`` in one pass, and ``read_plan`` its pair, the plan
of ``rebuild_plan(load_meta(path))`` in one pass over the document it decodes.

Before importing the generated modules (which load torch, seconds), this module checks
they exist, so a missing one is reported at once with the command that makes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardplan.staleness import generated_modules

if TYPE_CHECKING:
    from generated.freeze import (
        freeze_for_writing,
        freeze_injections,
        freeze_param_plan,
        freeze_plan as _freeze_plan,
    )
    from generated.meta import CodegenMeta
    from generated.rebuild import (
        _rebuild_live_plan_from_meta as _generated_rebuild,
        consume_document,
    )
else:  # under the generated package's name here: see shardplan.staleness
    _meta, _freeze, _rebuild = generated_modules("meta", "freeze", "rebuild")
    CodegenMeta = _meta.CodegenMeta
    freeze_for_writing, _freeze_plan = _freeze.freeze_for_writing, _freeze.freeze_plan
    freeze_injections, freeze_param_plan = _freeze.freeze_injections, _freeze.freeze_param_plan
    _generated_rebuild = _rebuild._rebuild_live_plan_from_meta
    consume_document = _rebuild.consume_document

# After the check on purpose: these imports are the expensive part.
import os
from pathlib import Path

from shardplan.artifact import jsoncodec
from shardplan.artifact.atomic import atomic_write_bytes
from shardplan.artifact.meta import file_path, load_meta, meta_to_bytes, read_counted
from shardplan.collector import pause_collector, resume_collector
from shardplan.convert.kinds import written_text
from shardplan.convert.trust import AllowTargets, allow_list
from shardplan.errors import MetaError, check_argument
from shardplan.table.format import GROUP_PARAM_PLAN
from shardplan.table.spec import ShardingPlan


def freeze_plan(plan: ShardingPlan) -> CodegenMeta:
    """Freeze a live plan into a CodegenMeta (entries, rules and plan-level settings).

    Automatic garbage collection is paused for the call (shardplan.collector)."""
    paused = pause_collector()
    try:
        return _freeze_plan(plan)
    finally:
        resume_collector(paused)


def write_plan(plan: ShardingPlan, path: str | os.PathLike[str]) -> None:
    """Freeze ``plan`` and write it to ``path``: the file ``dump_meta(freeze_plan(plan),
    path)`` writes, byte for byte, atomically, in one pass.

    The common case is written straight from the live plan: placement tables as they
    stand, no CodegenMeta of texts built, no second walk over the document. Anything else
    (a value that is not of the common form, one freeze refuses, bytes that might not be
    the format's) takes ``freeze_plan`` and ``dump_meta``'s own path, so every error is
    theirs: a FreezeError or MetaError naming the place, nothing written. Automatic
    garbage collection is paused for the call (shardplan.collector)."""
    paused = pause_collector()
    try:
        data = _plan_bytes(plan)  # the plan first, then the path: the pair's order of errors
        atomic_write_bytes(file_path(path), data)
    finally:
        resume_collector(paused)


def _plan_bytes(plan: ShardingPlan) -> bytes:
    """The bytes of ``meta_to_bytes(freeze_plan(plan))``: the live document's where the
    fast path takes the plan, else that pair's own (and its errors)."""
    try:
        document = freeze_for_writing(plan)
        written = None if document is None else jsoncodec.encode_written(document, written_text)
    except Exception:  # noqa: BLE001 - freeze's own path below raises it, with its message
        written = None
    return meta_to_bytes(_freeze_plan(plan)) if written is None else written


def rebuild_live_plan_from_meta(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """The generated rebuild (``generated.rebuild._rebuild_live_plan_from_meta``, the name
    upstream's runtime calls), admitting Targets only under ``allow_targets``.

    ``allow_targets`` holds what the calling program trusts (shardplan.convert.trust):
    exact callables (``"pkg.mod.fn"``), a module's own callables (``"pkg.mod"``), an
    owned subtree (``"pkg.*"``), or paths bound to its own callables (``{path: fn}``). A
    Target no entry admits is an UntrustedTarget (a MetaError) naming its place, before
    anything is imported. The default admits none."""
    check_argument(meta, CodegenMeta, "a CodegenMeta", MetaError)
    check_argument(strict, bool, "True or False", MetaError, "strict")
    # Trust: the list is checked when the rebuild starts (a MetaError for an entry over
    # someone else's code), then passed down as an argument to every Target it builds.
    allowed = allow_list(allow_targets)
    return _generated_rebuild(meta, strict=strict, allow_targets=allowed)


def rebuild_plan(
    meta: CodegenMeta, *, strict: bool = True, allow_targets: AllowTargets = ()
) -> ShardingPlan:
    """Rebuild a live plan from a CodegenMeta; MetaError names any bad place. Targets
    are admitted only under ``allow_targets`` (rebuild_live_plan_from_meta).

    Automatic garbage collection is paused for the call (shardplan.collector)."""
    paused = pause_collector()
    try:
        return rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)
    finally:
        resume_collector(paused)


def read_plan(path: str | Path, *, allow_targets: AllowTargets = ()) -> ShardingPlan:
    """Read the artifact at ``path`` and rebuild its live plan, strictly: the plan
    ``rebuild_plan(load_meta(path), allow_targets=allow_targets)`` gives, or exactly its
    error (a MetaError naming the place, the file's defect or the path's). The pair of
    ``write_plan``. Targets are admitted only under ``allow_targets``
    (rebuild_live_plan_from_meta). Automatic garbage collection is paused for the call
    (shardplan.collector).

    One pass (``generated.rebuild.consume_document``) rebuilds the plan from the document
    it decoded, which nobody else holds: its placement tables parsed in place, its arrays
    of strings adopted. Its members, counted, must equal the file's ':' bytes (then no key
    repeated: docs/artifacts.md). Anything else, a mismatch or an error, takes the pair's
    path from scratch, which gives the plan or names the defect."""
    paused = pause_collector()
    try:
        plan = _read_consumed(file_path(path), allow_targets)
        if plan is None:
            plan = rebuild_plan(load_meta(path), allow_targets=allow_targets)
        return plan
    finally:
        resume_collector(paused)


def _read_consumed(path: Path, allow_targets: AllowTargets) -> ShardingPlan | None:
    """The plan of read_plan's one pass, or None where the pair's path must decide. The
    file is refused as load_meta refuses it, with its MetaError."""
    counted = read_counted(path, GROUP_PARAM_PLAN)  # the entries, decoded in pieces
    if counted is None:
        return None
    document, colons = counted
    del counted  # the pass converts the document: no other name may hold it
    try:
        plan, members = consume_document(document, allow_targets=allow_list(allow_targets))
    except Exception:  # noqa: BLE001 - the pair's path gives the plan or its own error
        return None
    return plan if members == colons else None


__all__ = [
    "freeze_injections",
    "freeze_param_plan",
    "freeze_plan",
    "read_plan",
    "rebuild_live_plan_from_meta",
    "rebuild_plan",
    "write_plan",
]
