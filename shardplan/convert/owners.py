"""Whose code a package is, for the trust rule (docs/trust.md, "Whose code an entry opens").

A module entry (``"a.b"``) or a subtree entry (``"a.b.*"``) says that every public
callable there may be called with arguments an artifact chooses: a promise only the
authors of ``a`` can make. So such entries are admitted only over the program's own
packages. Everything else is someone else's code: the standard library, this runtime
(``shardplan``, whose own callables an artifact must not drive either), and every
distribution this runtime depends on, directly or transitively, as the installed metadata
says (torch, numpy and what they bring). Nothing here imports the packages it asks about.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import Distribution

# This runtime's distribution (pyproject.toml's [project] name): its requirements, every
# extra included, are where the walk starts. torch and numpy start it too, so that a source
# checkout run without installing still counts them (and what they require) as libraries.
RUNTIME_DISTRIBUTION = "specgen"
_ROOTS = (RUNTIME_DISTRIBUTION, "torch", "numpy")
_RUNTIME_PACKAGE = __name__.partition(".")[0]

_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"\bextra\s*==")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _library_packages() -> dict[str, str]:
    """Top-level import name -> why it is a library's, for every package installed by this
    runtime's distribution and the distributions it depends on. Read once a process from
    the installed metadata: distributions are found by name, and only the lines this needs
    are read (importlib.metadata's own accessors parse each METADATA file as an email,
    which made a trainer's first rebuild 0.1 s slower)."""
    from importlib import metadata  # only a program that names a string entry pays for it

    owners = {_RUNTIME_PACKAGE: f"{_RUNTIME_PACKAGE} is this runtime's own code"}
    seen: set[str] = set()
    pending = list(_ROOTS)
    while pending:
        name = pending.pop()
        if _normalized(name) in seen:
            continue
        seen.add(_normalized(name))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing of it can be imported either
        headers = distribution.read_text("METADATA")  # None for an .egg-info folder
        requirements = distribution.requires if headers is None else _requirements(headers)
        for requirement in requirements or ():
            # A dependency's own extras are not installed for this runtime; the runtime's are.
            if name in _ROOTS or not _EXTRA_MARKER.search(requirement.partition(";")[2]):
                found = _REQUIREMENT_NAME.match(requirement)
                if found is not None:
                    pending.append(found.group(1))
        why = (
            "is this runtime's own code"
            if name == RUNTIME_DISTRIBUTION
            else f"is installed by {name}, a distribution this runtime ({RUNTIME_DISTRIBUTION}) "
            "depends on"
        )
        for top in _top_level_names(distribution):
            owners.setdefault(top, f"{top} {why}")
    return owners


def _requirements(headers: str) -> list[str]:
    """The Requires-Dist values of a METADATA file (its headers end at the first blank
    line)."""
    found = []
    for line in headers.split("\n"):
        if not line.strip():
            break
        if line.startswith("Requires-Dist:"):
            found.append(line.removeprefix("Requires-Dist:").strip())
    return found


def _top_level_names(distribution: Distribution) -> set[str]:
    """The top-level import names a distribution installs: its top_level.txt, else the
    first part of each path its RECORD lists (as importlib.metadata's
    packages_distributions reads them)."""
    text = distribution.read_text("top_level.txt")
    if text is not None:
        return set(text.split())
    names = set()
    for line in (distribution.read_text("RECORD") or "").splitlines():
        first, slash, _ = line.partition(",")[0].partition("/")
        if first.startswith("__"):
            continue  # __pycache__, __editable__ finders: no package
        if first.endswith(".py") or (slash and first.isidentifier()):
            names.add(first.removesuffix(".py"))
    return names


def library_of(top: str) -> str | None:
    """Why the top-level package ``top`` is not the program's own code (one clause), or
    None when it may be: the standard library, this runtime, or a distribution this
    runtime depends on."""
    if top in sys.stdlib_module_names:
        return f"{top} is part of the standard library"
    return _library_packages().get(top)


def names_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package, found as the import system would find
    it but without importing or running anything: each segment is looked up in the search
    locations of the package before it (a module already imported counts as found)."""
    if dotted in sys.modules:
        return True
    parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: nothing is imported
    except (ImportError, ValueError):
        return False
    for index in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return False
        prefix = ".".join(parts[: index + 1])
        spec = importlib.machinery.PathFinder.find_spec(prefix, spec.submodule_search_locations)
    return spec is not None
