"""Run a test module against both implementations: the reference and the generated code.

Per-kind and bad-input tests then check the templates too, not only the table walker.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

import shardplan
from generated import freeze as gen_freeze
from generated import rebuild as gen_rebuild
from shardplan import reference

IMPLEMENTATIONS: dict[str, Any] = {
    "reference": reference,
    "generated": SimpleNamespace(
        freeze_param_plan=gen_freeze.freeze_param_plan,
        freeze_injections=gen_freeze.freeze_injections,
        freeze_plan=shardplan.freeze_plan,
        rebuild_live_plan_from_meta=gen_rebuild.rebuild_live_plan_from_meta,
    ),
}


def use_both_implementations(module_name: str) -> Any:
    """An autouse fixture running every test of ``module_name`` once per implementation,
    with the module's global ``impl`` bound to it."""

    @pytest.fixture(autouse=True, params=sorted(IMPLEMENTATIONS))
    def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
        monkeypatch.setattr(sys.modules[module_name], "impl", IMPLEMENTATIONS[request.param])
        return str(request.param)

    return implementation
