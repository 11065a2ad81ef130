"""shardplan: the live sharding plan, its field table, and the codegen_meta.json artifact.

``freeze_plan``, ``write_plan`` and ``rebuild_plan`` use the generated code. They are loaded
on first use (docs/contract.md §12) so that ``import shardplan.table.spec`` never pays for
importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardplan.api import freeze_plan, rebuild_plan, write_plan

__all__ = ["freeze_plan", "rebuild_plan", "write_plan"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from shardplan import api

        return getattr(api, name)
    raise AttributeError(f"module 'shardplan' has no attribute {name!r}")
