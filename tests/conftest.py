"""Shared fixtures: a throwaway copy of the repository and a way to run specgen in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Example counts: `ci` (the default, what `make test` runs) and `fuzz` (`make fuzz`).
# Tests scale their own counts from `max_examples` (see tests/test_fidelity.py).
_SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=2_000, deadline=None, suppress_health_check=_SLOW_DRAWS
)
settings.register_profile(
    "fuzz", max_examples=50_000, deadline=None, suppress_health_check=_SLOW_DRAWS
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=_SLOW_DRAWS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
# What the generator needs to run in a copy: the config, the table and spec, itself, its templates.
COPIED = ("pyproject.toml", "shardplan", "generator", "templates", "generated")


def copy_repo(destination: Path) -> Path:
    """Copy the parts of the repository the generator reads into ``destination``."""
    destination.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A fresh copy of the repository to edit and regenerate without touching the real one."""
    return copy_repo(tmp_path / "repo")


def run_in(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python args...`` with ``root`` as the working folder and first on the path."""
    environ = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=environ, capture_output=True, text=True, timeout=120
    )


def run_specgen(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the generator's command line in ``root``."""
    return run_in(root, "-m", "generator", "--root", str(root), *args, env=env)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes, to prove nothing was touched."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
