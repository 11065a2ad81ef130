"""Whose code a package is, for the trust rule (docs/trust.md, "Whose code an entry opens").

A module entry (``"a.b"``) or a subtree entry (``"a.b.*"``) says that every public
callable there may be called with arguments an artifact chooses: a promise only the
authors of ``a`` can make. So such entries are admitted only over the program's own
source, and that is decided by where the code comes from, not by a list of packages:

- the program's own: a top-level package found on ``sys.path`` outside the interpreter's
  library folders and provided by no installed distribution there, or provided by a
  distribution installed from a local folder (its ``direct_url.json`` has ``dir_info``,
  editable or not);
- someone else's: built-in and frozen modules, the standard library (by name and by
  location), everything in a library folder (the standard library's, every
  site-packages, the user site) that no distribution from a local folder provides, this
  runtime and its generated package, and every package a distribution installed from an
  index, a wheel or archive file or a VCS URL provides, wherever it was installed.

It is decided from the import system's path finders and the installed metadata, without
importing the package, and remembered for the process (for as long as ``sys.path`` is
the same list).
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import os
import re
import sys
import types
from dataclasses import dataclass

# This runtime's own top-level names: its package, its distribution's namespace
# (specgen.generator) and, in a source checkout, its generated package (shardplan.staleness).
RUNTIME_DISTRIBUTION = "specgen"
_RUNTIME_PACKAGE = __name__.partition(".")[0]
RUNTIME_PACKAGES = frozenset({_RUNTIME_PACKAGE, RUNTIME_DISTRIBUTION, "generated"})

# The answer for a top-level name that no path finder or editable mapping finds. Such a
# name is not refused when the list is read (nothing of it can be imported now: the shared
# fixture's hyper_parallel); it is looked up again when a Target under it is first called.
NOT_FOUND = "not found"


@dataclass(frozen=True)
class _Distribution:
    """An installed distribution's metadata folder, and how it was installed."""

    folder: str  # the .dist-info or .egg-info folder
    name: str
    version: str

    @functools.cached_property
    def source(self) -> str | None:
        """Where it was installed from, as a clause ("from a package index"), or None when
        from a local folder (``direct_url.json`` with ``dir_info``): the program's own."""
        try:
            with open(os.path.join(self.folder, "direct_url.json"), encoding="utf-8") as file:
                direct = json.load(file)
        except FileNotFoundError:
            if self.is_egg:
                return "by setuptools (an .egg-info, which records no source)"
            return "from a package index"
        except (OSError, ValueError):
            return "from a source its direct_url.json does not say readably"
        if not isinstance(direct, dict):
            return "from a source its direct_url.json does not say readably"
        url = direct.get("url", "?")
        if "dir_info" in direct:
            return None
        if "vcs_info" in direct:
            return f"from the VCS URL {url}"
        if "archive_info" in direct:
            return f"from the archive or wheel file {url}"
        return f"from {url}"

    @property
    def is_egg(self) -> bool:
        return self.folder.endswith(".egg-info")

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()


def _real(path: str) -> str:
    return os.path.realpath(path or os.curdir)


@functools.cache
def library_folders() -> tuple[tuple[str, str], ...]:
    """The interpreter's library folders, real paths each ending in a separator, with what
    each is: the standard library's and the platform library's, every site-packages of
    this environment and of the interpreter it was made from, the user site, and the lib
    folders of both prefixes. Read once a process."""
    import site
    import sysconfig

    found: dict[str, str] = {}

    def add(path: object, what: str) -> None:
        if isinstance(path, str) and path:
            found.setdefault(_real(path).rstrip(os.sep) + os.sep, what)

    stdlib = "the standard library"
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    for prefix in sorted(prefixes):
        paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
        add(paths.get("stdlib"), stdlib)
        add(paths.get("platstdlib"), stdlib)
        add(paths.get("purelib"), "a site-packages folder")
        add(paths.get("platlib"), "a site-packages folder")
    paths = sysconfig.get_paths()
    add(paths.get("stdlib"), stdlib)
    add(paths.get("platstdlib"), stdlib)
    add(paths.get("purelib"), "a site-packages folder")
    add(paths.get("platlib"), "a site-packages folder")
    for folder in getattr(site, "getsitepackages", list)():
        add(folder, "a site-packages folder")
    if hasattr(site, "getusersitepackages"):
        add(site.getusersitepackages(), "the user site")
    for prefix in sorted(prefixes):
        for lib in ("lib", "lib64", "Lib", "DLLs"):
            add(os.path.join(prefix, lib), "the interpreter's library folder")
    # The most specific folder first: a location is named by the deepest one it lies in.
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


def _library_folder(location: str) -> tuple[str, str] | None:
    """``(folder, what it is)`` of the library folder ``location`` lies in, or None."""
    real = _real(location)
    for folder, what in library_folders():
        if (real + os.sep).startswith(folder):
            return folder.rstrip(os.sep), what
    return None


# --------------------------------------------------------------- the import system


def _spec_locations(spec: importlib.machinery.ModuleSpec) -> list[str]:
    """The files or folders a top-level spec's code is read from."""
    if spec.submodule_search_locations is not None:
        return [str(location) for location in spec.submodule_search_locations]
    if spec.origin and spec.has_location:
        return [spec.origin]
    return []


def _editable_mapping(top: str) -> tuple[str, str] | None:
    """``(location, the finder's file)`` where a setuptools editable install's finder on
    ``sys.meta_path`` maps ``top``, read from the finder module's own MAPPING (imported at
    startup by its .pth file); nothing is asked of the finder."""
    for finder in sys.meta_path:
        owner = finder if isinstance(finder, type) else type(finder)
        name = str(vars(owner).get("__module__", ""))
        module = sys.modules.get(name) if name.startswith("__editable__") else None
        if type(module) is not types.ModuleType:
            continue
        mapping = vars(module).get("MAPPING")
        if isinstance(mapping, dict) and isinstance(mapping.get(top), str):
            return mapping[top], str(vars(module).get("__file__") or "")
    return None


def _located(top: str) -> tuple[list[str], str] | None:
    """Where ``top`` would be imported from, without importing it: the module already
    imported, else the path finders over ``sys.path``, else an editable install's mapping.
    ``(locations, the editable finder's file or "")``; None when none finds it."""
    module = sys.modules.get(top)
    spec = vars(module).get("__spec__") if type(module) is types.ModuleType else None
    if not isinstance(spec, importlib.machinery.ModuleSpec):
        try:
            spec = importlib.machinery.PathFinder.find_spec(top)
        except (ImportError, ValueError, OSError):
            spec = None
    if spec is not None:
        locations = _spec_locations(spec)
        if locations:
            return locations, ""
    mapped = _editable_mapping(top)
    if mapped is not None:
        return [mapped[0]], mapped[1]
    return None


# --------------------------------------------------------------- installed metadata

_INFO = re.compile(r"(?P<name>[^-]+)(?:-(?P<version>[^-]+))?.*\.(?:dist|egg)-info$")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def _metadata_folders(entry: str) -> tuple[_Distribution, ...]:
    """The distributions whose metadata lies in the ``sys.path`` entry ``entry`` (read once
    a process: an install adds its folder and is seen by the next process)."""
    try:
        names = os.listdir(entry)
    except OSError:
        return ()
    found = []
    for name in sorted(names):
        matched = _INFO.match(name)
        if matched is not None:
            found.append(
                _Distribution(
                    os.path.join(entry, name), matched["name"], matched["version"] or ""
                )
            )
    return tuple(found)


def _read(folder: str, name: str) -> str | None:
    """The text of a metadata file, or None where there is none. Read with os.open and
    os.read: a first read may read hundreds of them, and a text file object costs more
    than the read."""
    try:
        descriptor = os.open(os.path.join(folder, name), os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(descriptor, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8", errors="replace")


@functools.cache
def _top_level(distribution: _Distribution) -> frozenset[str] | None:
    """The names a distribution's top_level.txt lists, or None without one."""
    listed = _read(distribution.folder, "top_level.txt")
    return None if listed is None else frozenset(listed.split())


_MODULE_FILES = (".py", ".pyc", ".so", ".pyd")


def _recorded(distribution: _Distribution, top: str) -> bool:
    """Whether a path its RECORD (an .egg-info's installed-files.txt) lists installs the
    top-level name ``top``: the folder ``top/``, or a module ``top.py`` or ``top.*.so``."""
    for record in ("RECORD", "installed-files.txt"):
        text = _read(distribution.folder, record)
        if text is None:
            continue
        if distribution.is_egg:  # paths relative to the .egg-info folder
            text = re.sub(r"(?m)^(\.\./)+", "", text)
        text = "\n" + text.replace("\r", "")
        if f"\n{top}/" in text:
            return True
        start = text.find(f"\n{top}.")
        while start >= 0:
            line = text[start + 1 : text.find(",", start)]
            if "/" not in line and "\n" not in line and line.endswith(_MODULE_FILES):
                return True
            start = text.find(f"\n{top}.", start + 1)
        return False
    return False


def _provides(distribution: _Distribution, top: str) -> bool:
    listed = _top_level(distribution)
    return top in listed if listed is not None else _recorded(distribution, top)


def _distribution_in(entry: str, top: str, thorough: bool) -> _Distribution | None:
    """The distribution whose metadata in ``entry`` installs ``top``. The one named like it
    first, then every top_level.txt there; then the RECORD of each (``thorough``), or in a
    library folder, where hundreds may lie, only of those installed from a local folder:
    the one answer that changes the decision there."""
    candidates = _metadata_folders(entry)
    wanted = _normalized(top)
    for distribution in candidates:
        if _normalized(distribution.name) == wanted and _provides(distribution, top):
            return distribution
    for distribution in candidates:
        listed = _top_level(distribution)
        if listed is not None and top in listed:
            return distribution
    for distribution in candidates:
        local = thorough or distribution.source is None
        # top_level.txt names packages, not every module a RECORD lists (an editable
        # install's finder): a distribution from a local folder is read whole.
        if local and (_top_level(distribution) is None or distribution.source is None):
            if _recorded(distribution, top):
                return distribution
    return None


def _finder_distribution(finder_file: str) -> _Distribution | None:
    """The distribution whose RECORD lists an editable install's finder module."""
    entry, name = os.path.split(finder_file)
    for distribution in _metadata_folders(entry):
        record = _read(distribution.folder, "RECORD") or ""
        if re.search(rf"(?m)^{re.escape(name)},", record):
            return distribution
    return None


# --------------------------------------------------------------- the decision


def _whose(top: str) -> str | None:
    """Why ``top`` is someone else's code (one clause); None when it is the program's own;
    NOT_FOUND when nothing finds it."""
    if top in RUNTIME_PACKAGES:
        return f"{top} is this runtime's own code"
    if top in sys.builtin_module_names:
        return f"{top} is built into the interpreter"
    if importlib.machinery.FrozenImporter.find_spec(top) is not None:
        return f"{top} is frozen into the interpreter, part of the standard library"
    located = _located(top)
    if top in sys.stdlib_module_names:  # Python's own list, a second line: the location decides
        where = f" ({located[0][0]})" if located is not None else ""
        return f"{top} is part of the standard library{where}"
    if located is None:
        return NOT_FOUND
    locations, finder_file = located
    if finder_file:
        distribution = _finder_distribution(finder_file)
        if distribution is not None and _normalized(distribution.name) == RUNTIME_DISTRIBUTION:
            return f"{top} is installed by {distribution}, this runtime's own distribution"
        if distribution is not None:
            source = distribution.source
            if source is not None:
                return f"{top} is installed by {distribution} {source}"
            return None  # an editable install of a local folder, wherever it lies
    for location in locations:
        folder = _library_folder(location)
        entry = os.path.dirname(location.rstrip(os.sep))
        distribution = _distribution_in(entry, top, thorough=folder is None)
        if distribution is not None and _normalized(distribution.name) == RUNTIME_DISTRIBUTION:
            return f"{top} is installed by {distribution}, this runtime's own distribution"
        if distribution is not None:
            source = distribution.source
            if source is None:
                continue  # installed from a local folder: the program's own
            if distribution.is_egg and folder is None:
                continue  # a source tree's own egg_info, beside its code
            return f"{top} is installed by {distribution} {source}"
        if folder is not None and folder[1] == "the standard library":
            return f"{top} is part of the standard library ({location})"
        if folder is not None:
            return (
                f"{top} lies in {folder[1]} ({folder[0]}), and no distribution from a local "
                "folder installs it"
            )
    return None


_WHOSE: dict[tuple[str, tuple[str, ...]], str | None] = {}


def _remembered(top: str, fresh_if_not_found: bool) -> str | None:
    key = (top, tuple(sys.path))
    why = _WHOSE.get(key, NOT_FOUND)
    if key not in _WHOSE or (why == NOT_FOUND and fresh_if_not_found):
        why = _whose(top)
        if len(_WHOSE) < 4096:  # bounded, as every cache an input can grow
            _WHOSE[key] = why
    return why


def library_of(top: str) -> str | None:
    """Why the top-level package ``top`` is not the program's own code (one clause, such
    as "joblib is installed by joblib 1.4.2 from a package index"), or None when it is,
    or when nothing finds it (nothing of it can be imported now: ``refused_at_import``
    asks again). Remembered for the process while ``sys.path`` is the same."""
    why = _remembered(top, fresh_if_not_found=False)
    return None if why == NOT_FOUND else why


def refused_at_import(top: str) -> str | None:
    """Why a module or subtree entry may not import ``top`` now: someone else's code, or
    found by none of the path finders this module reads (so where its code would come
    from is unknown); None when it is the program's own source. A name nothing found
    before is looked up again."""
    why = _remembered(top, fresh_if_not_found=True)
    if why == NOT_FOUND:
        return (
            f"no path finder on sys.path (nor an editable install's mapping) finds {top}, "
            "so where its code would come from is unknown"
        )
    return why


def names_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package, found as the import system's path
    finders would find it but without importing or running anything (no other meta path
    finder is asked: some import what they are asked about): each segment is looked up in
    the search locations of the package before it (a module already imported counts)."""
    if dotted in sys.modules:
        return True
    parts = dotted.split(".")
    located = _located(parts[0])
    if located is None:
        return False
    locations = located[0]
    for index in range(1, len(parts)):
        prefix = ".".join(parts[: index + 1])
        try:
            spec = importlib.machinery.PathFinder.find_spec(prefix, locations)
        except (ImportError, ValueError, OSError):
            return False
        if spec is None:
            return False
        if index == len(parts) - 1:
            return True
        if spec.submodule_search_locations is None:
            return False
        locations = [str(location) for location in spec.submodule_search_locations]
    return True
