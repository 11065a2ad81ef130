"""Run a test module against both implementations: the reference and the generated code.

Both modules expose the same functions (``freeze_plan``, ``freeze_param_plan``,
``freeze_injections``, ``rebuild_live_plan_from_meta``), so each is taken as it is; the
last admits Targets under ``allow_targets`` around each module's
``_rebuild_live_plan_from_meta``, the name upstream's runtime calls.
Per-kind and bad-input tests then check the templates too, not only the table walker.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest

from shardplan import api, reference

IMPLEMENTATIONS: dict[str, ModuleType] = {"reference": reference, "generated": api}


def use_both_implementations(module_name: str) -> Any:
    """An autouse fixture running every test of ``module_name`` once per implementation,
    with the module's global ``impl`` bound to it."""

    @pytest.fixture(autouse=True, params=sorted(IMPLEMENTATIONS))
    def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
        monkeypatch.setattr(sys.modules[module_name], "impl", IMPLEMENTATIONS[request.param])
        return str(request.param)

    return implementation
