"""The staleness guard of generated code: refuse a module rendered from other tables, or
a generated module that is not there.

Every generated module calls ``check_generated`` first, before it imports anything that
loads torch, so a stale module refuses in milliseconds. It compares the digest each table
had when the module was rendered against that table module's own ``table_digest()``,
which lives beside the table: the generated module needs no loop over a table. No torch
import here.
"""

from __future__ import annotations

import importlib
import importlib.util


class StaleGeneratedCode(ImportError):
    """A generated module was rendered from another version of a field table."""


class MissingGeneratedCode(ModuleNotFoundError):
    """A generated module does not exist: it was never generated, or was deleted."""


def check_generated(module_file: str, digests: dict[str, str]) -> None:
    """Raise StaleGeneratedCode, naming ``module_file``, unless every table module named in
    ``digests`` still has the digest the module was rendered with."""
    for module_name, digest in digests.items():
        if importlib.import_module(module_name).table_digest() != digest:
            raise StaleGeneratedCode(
                f"{module_file} is stale: the field table changed since it was generated.\n"
                "  Run `make codegen` and commit generated/."
            )


def require_generated(name: str) -> None:
    """Raise MissingGeneratedCode naming the generated module ``name`` if it does not exist."""
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the generated package itself is missing
        found = False
    if not found:
        raise MissingGeneratedCode(
            f"{name.replace('.', '/')}.py is missing: the generated code was never "
            "generated here, or was deleted.\n  Run `make codegen` and commit generated/.",
            name=name,
        )
