"""shardplan: the live sharding plan, its field table, and the codegen_meta.json artifact.

The names a user needs are here, each loaded from its module on first use (docs/contract.md
§12): ``import shardplan`` imports nothing else, and a name costs only what its module
does. The artifact's reading and writing (``load_meta``, ``dump_meta``), the plan's data
classes and the errors (those the docs say to catch among them: ``MetaError``,
``UntrustedTarget``, ``ArtifactWriteError``, ``StaleGeneratedCode``) never import torch;
``freeze_plan``, ``rebuild_plan``, ``write_plan``, ``read_plan`` (the generated code),
``apply_plan`` and ``check_fit`` do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them ("as": they are re-exported)
    from shardplan.api import (
        freeze_plan as freeze_plan,
        read_plan as read_plan,
        rebuild_plan as rebuild_plan,
        write_plan as write_plan,
    )
    from shardplan.artifact.meta import dump_meta as dump_meta, load_meta as load_meta
    from shardplan.convert.targets import Target as Target
    from shardplan.errors import (
        ApplyError as ApplyError,
        ArtifactWriteError as ArtifactWriteError,
        FreezeError as FreezeError,
        MetaError as MetaError,
        UntrustedTarget as UntrustedTarget,
    )
    from shardplan.parallelize.apply import apply_plan as apply_plan
    from shardplan.parallelize.fit import check_fit as check_fit
    from shardplan.staleness import StaleGeneratedCode as StaleGeneratedCode
    from shardplan.table.spec import (
        ModuleShardingSpec as ModuleShardingSpec,
        ShardingPlan as ShardingPlan,
    )

# Each public name and the module that defines it: the one place the front door is kept.
_HOMES = {
    "freeze_plan": "shardplan.api",
    "rebuild_plan": "shardplan.api",
    "write_plan": "shardplan.api",
    "read_plan": "shardplan.api",
    "load_meta": "shardplan.artifact.meta",
    "dump_meta": "shardplan.artifact.meta",
    "apply_plan": "shardplan.parallelize.apply",
    "check_fit": "shardplan.parallelize.fit",
    "Target": "shardplan.convert.targets",
    "ModuleShardingSpec": "shardplan.table.spec",
    "ShardingPlan": "shardplan.table.spec",
    "MetaError": "shardplan.errors",
    "FreezeError": "shardplan.errors",
    "ApplyError": "shardplan.errors",
    "UntrustedTarget": "shardplan.errors",
    "ArtifactWriteError": "shardplan.errors",
    "StaleGeneratedCode": "shardplan.staleness",
}

__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shardplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
