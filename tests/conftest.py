"""Hypothesis profiles and fixtures; the helpers tests import are in tests/helpers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers import copy_repo

# Example counts: `ci` (the default, what `make test` runs) and `fuzz` (`make fuzz`).
# Tests scale their own counts from `max_examples` (see tests/generated/test_fidelity.py). `ci` is
# set by the suite's budget (100 s on a 2-core machine, where the properties took a third
# of the suite at 1,000 examples): 300 a property; the depth is `make fuzz`'s, 50,000.
_SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=_SLOW_DRAWS)
settings.register_profile(
    "fuzz", max_examples=50_000, deadline=None, suppress_health_check=_SLOW_DRAWS
)
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=_SLOW_DRAWS)
# The suite the weekly-flow test runs in its edited copy (tests/test_weekly_flow.py): it shows
# that no test breaks on a user's rows (every drawn plan holds every row); the depth of the
# properties is this suite's own.
settings.register_profile(
    "steps", max_examples=10, deadline=None, suppress_health_check=_SLOW_DRAWS
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def okpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An importable module ``okpkg`` re-exporting subprocess.run as ``go``, run in tmp (the
    trust tests' package that an entry admits)."""
    from tests.trust_helpers import OKPKG_SOURCE, installed

    yield from installed(tmp_path, monkeypatch, {"okpkg.py": OKPKG_SOURCE})


@pytest.fixture
def my_planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package the program owns (tests.trust_helpers.MY_PLANNER), importable in tmp: what
    module and subtree entries may name."""
    from tests.trust_helpers import MY_PLANNER, installed

    yield from installed(tmp_path, monkeypatch, MY_PLANNER)


@pytest.fixture(scope="module")
def mesh() -> Iterator[Any]:
    """A one-process gloo group and its 1-D ``tp`` mesh: enough for apply_plan's checks and a
    real parallelize_module (torch imported only by the modules that ask for it)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    finally:
        dist.destroy_process_group()


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A fresh copy of the repository to edit and regenerate without touching the real one."""
    return copy_repo(tmp_path / "repo")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (the suite copied and run by the weekly-flow test, then the
    multi-process launches): with two workers, a long test collected last would run alone
    at the end while the other worker idles."""
    weight = {"copies_the_suite": 0, "processes": 1}
    items.sort(
        key=lambda item: min(
            (weight[mark.name] for mark in item.iter_markers() if mark.name in weight),
            default=2,
        )
    )
