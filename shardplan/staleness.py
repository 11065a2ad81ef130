"""The staleness guard of generated code: refuse a module rendered from other tables, or
a generated module that is not there.

Every generated module calls ``check_generated`` first, before it imports anything that
loads torch, so a stale module refuses in milliseconds. It compares the digest each table
had when the module was rendered against that table module's own ``table_digest()``,
which lives beside the table: the generated module needs no loop over a table. No torch
import here.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

# The generated package's two names. In a checkout it is the folder generated/ beside
# shardplan/, imported as `generated`; installed, it is shardplan/_generated (pyproject.toml
# maps the folder there), so the distribution installs no top-level `generated` package
# that could collide with another project's. Generated modules import each other relatively.
CHECKOUT_NAME = "generated"
INSTALLED_NAME = "shardplan._generated"


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


def check_parameters(module_file: str, cls: type, names: tuple[str, ...]) -> None:
    """Raise StaleGeneratedCode, naming ``module_file``, unless ``names`` are still the
    first __init__ parameters of the dataclass ``cls``, in its order: the module passes
    them by position, which a reordered class would silently mix up."""
    found = tuple(f.name for f in dataclasses.fields(cls) if f.init)[: len(names)]
    if found != names:
        raise StaleGeneratedCode(
            f"{module_file} is stale: it passes {cls.__name__}'s fields {', '.join(names)} "
            f"by position, and the class now starts with {', '.join(found) or 'none'}.\n"
            "  Run `make codegen` and commit generated/."
        )


def generated_package() -> str:
    """The import name of the generated code this ``shardplan`` runs with.

    Installed from a wheel: ``shardplan._generated``. A checkout: ``generated``, from the
    folder beside shardplan/ (what its tests and `make` import). An editable install run
    where the checkout is not on the path: ``shardplan._generated``, which the install maps
    to the same folder. Anything else is ``generated``, for ``require_generated`` to report.
    """
    here = Path(__file__).resolve().parent
    if (here / "_generated").is_dir():
        return INSTALLED_NAME
    if _loaded_from(CHECKOUT_NAME) == (here.parent / CHECKOUT_NAME).resolve():
        return CHECKOUT_NAME
    if _loaded_from(INSTALLED_NAME) is not None:
        return INSTALLED_NAME
    return CHECKOUT_NAME


def generated_modules(*names: str) -> tuple[ModuleType, ...]:
    """Import the generated modules ``names`` (``meta``, ``freeze``, ``rebuild``) under the
    package's name here (``generated_package``): each is checked by ``require_generated``
    before any is imported, since importing one may load torch (seconds)."""
    package = generated_package()
    for name in names:
        require_generated(f"{package}.{name}")
    return tuple(importlib.import_module(f"{package}.{name}") for name in names)


def require_generated(name: str) -> None:
    """Raise MissingGeneratedCode naming the generated module ``name`` if it does not exist
    in this checkout: the folder the ``shardplan`` package was imported from.

    A module that would be loaded from elsewhere is refused too: with an editable install
    of another checkout (`make bench --before REV` runs one in a git worktree), Python would
    otherwise load that checkout's generated code without a word. Folders are compared
    resolved.
    """
    package = name.rpartition(".")[0]
    here = Path(__file__).resolve().parent
    inside = here / "_generated"
    folder = inside if inside.is_dir() else (here.parent / CHECKOUT_NAME).resolve()
    file = f"{CHECKOUT_NAME}/{name.rpartition('.')[2]}.py"  # as the repository names it
    for module in (package, name):  # the package first: another's is never run
        found = _loaded_from(module)
        if found is None:
            raise MissingGeneratedCode(
                f"{file} is missing: the generated code was never generated here, or was "
                "deleted.\n  Run `make codegen` and commit generated/.",
                name=name,
            )
        if found != folder:
            raise MissingGeneratedCode(
                f"{file} is missing in {folder.parent}, the checkout shardplan was imported "
                f"from: Python would load the one in {found} instead.\n  Run `make codegen` "
                f"in {folder.parent} and commit generated/.",
                name=name,
            )


def _loaded_from(name: str) -> Path | None:
    """The resolved folder module ``name`` would be loaded from; None if there is none."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its package is missing
        return None
    if spec is None:
        return None
    if spec.origin is not None and spec.has_location:
        return Path(spec.origin).resolve().parent
    return Path(next(iter(spec.submodule_search_locations or ["."]))).resolve()  # a namespace
