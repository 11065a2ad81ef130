"""The staleness guard of generated code: refuse a module rendered from another table.

Every generated module calls ``check_generated`` first, before it imports anything that
loads torch, so a stale module refuses in milliseconds. It compares the digest the
module was rendered with against ``table_digest()``, which lives beside the table: the
generated module needs no loop over the table. No torch import here.
"""

from __future__ import annotations

from shardplan.table.spec_fields import table_digest


class StaleGeneratedCode(ImportError):
    """A generated module was rendered from another version of the field table."""


class MissingGeneratedCode(ModuleNotFoundError):
    """A generated module does not exist: it was never generated, or was deleted."""


def check_generated(module_file: str, digest: str) -> None:
    """Raise StaleGeneratedCode, naming ``module_file``, unless ``digest`` is the table's."""
    if digest != table_digest():
        raise StaleGeneratedCode(
            f"{module_file} is stale: the field table changed since it was generated.\n"
            "  Run `make codegen` and commit generated/."
        )
