"""Where the test data lives: the shared conformance vector and the project's corpus.

``../shared/fixtures`` (beside the repository) holds a real artifact written by another
planner. CI has it; a clone without it must still pass, so every test that reads it
asks for it through ``shared_fixture``, which skips with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
QWEN3_MOE = "qwen3_moe_codegen_meta.json"
CORPUS = REPO / "tests" / "corpus"
CORPUS_FILES = sorted(CORPUS.glob("*.json"))


def shared_fixture_or_none(name: str) -> Path | None:
    """The shared fixture's path, or None when ``../shared/fixtures`` is absent."""
    path = SHARED_FIXTURES / name
    return path if path.is_file() else None


def shared_fixture(name: str) -> Path:
    """The shared fixture's path; skips the calling test when the folder is absent."""
    path = shared_fixture_or_none(name)
    if path is None:
        pytest.skip(f"{SHARED_FIXTURES} is absent (no {name}): the shared conformance vector")
    return path
