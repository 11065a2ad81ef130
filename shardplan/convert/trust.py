"""Which callables an artifact may name (docs/contract.md §8).

A Target rebuilt from an artifact names a callable the trainer will import and call with
the artifact's arguments. It is admitted only under a module prefix the calling program
passed as ``allow_targets`` (trusted code; never the artifact), matched at dot
boundaries: ``"hyper_parallel"`` admits ``hyper_parallel.models.x.fn``, not
``hyper_parallel_evil.fn``. Whatever the allow-list, a path with a dunder segment and the
names in ``ALWAYS_REFUSED`` are refused. When the Target is first resolved, the object it
imports must itself live under an allowed prefix (its ``__module__``): a re-export does
not make a callable trusted.

The allow-list of the rebuild in progress lives in a ``ContextVar`` (thread- and
async-safe), set by ``begin_rebuild`` and reset by ``end_rebuild`` in a ``finally``:
generated code calls ``kinds.rebuild_injection_target(value, path)`` and never sees it.
Outside any rebuild the scope admits nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import ModuleType
from typing import Any

from shardplan.errors import UntrustedTarget, shown

MODULE_PREFIX_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
_MODULE_PREFIX_RE = re.compile(MODULE_PREFIX_PATTERN)

# The longest Target path an artifact may name. Real ones are about 100 characters; a
# longer path only costs the trainer one import attempt a segment when it is resolved.
MAX_PATH_LENGTH = 512

_RUNS_CODE = "runs or compiles code it is given as text"
_IMPORTS = "imports a module, or finds an object, by a name it is given"
_BY_NAME = "reaches any attribute, item or namespace by a name it is given"
_CALLS = "binds or makes a call to whatever callable it is given"
_UNPICKLES = "rebuilds arbitrary objects, calls included, from serialized data"
_LOADS = "loads and runs code or pickles from a file, a library or the network"
_CONFIGURES = "instantiates whatever callables its configuration names"
_SPAWNS = "runs any command line or program it is given"
_SELF = "builds or resolves Targets itself, which would bypass these checks"

# os's process starters; posix and nt are where os finds them (their real module).
_PROCESS_STARTERS = (
    *("system", "popen", "posix_spawn", "posix_spawnp", "startfile"),
    *(f"exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    *(f"spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
)

_REFUSED_BY_REASON: dict[str, tuple[str, ...]] = {
    _RUNS_CODE: (
        "builtins.eval",
        "builtins.exec",
        "builtins.compile",
        "builtins.breakpoint",
        "code",
        "codeop",
        "timeit",
        "trace",
        "cProfile",
        "profile",
        "pdb",
        "bdb",
        "doctest",
        "types.FunctionType",
        "types.LambdaType",
        "types.CodeType",
        "builtins.function",
        "builtins.code",
    ),
    _IMPORTS: (
        "builtins.__import__",
        "importlib",
        "imp",
        "_imp",
        "zipimport",
        "pkgutil",
        "pydoc",
        "runpy",
        "unittest.mock",
    ),
    _BY_NAME: (
        "builtins.getattr",
        "builtins.setattr",
        "builtins.delattr",
        "builtins.globals",
        "builtins.locals",
        "builtins.vars",
        "operator.attrgetter",
        "operator.itemgetter",
        "operator.methodcaller",
        "inspect.getattr_static",
    ),
    _CALLS: (
        "functools.partial",
        "functools.partialmethod",
        "functools.reduce",
        "_functools",
        "operator.call",
        "sys.call_tracing",
    ),
    _UNPICKLES: ("pickle", "_pickle", "marshal", "shelve", "copyreg", "dill", "cloudpickle"),
    _LOADS: (
        "ctypes",
        "_ctypes",
        "torch.hub",
        "torch.load",
        "torch.serialization.load",
        "torch.jit.load",
        "torch.jit._serialization",
        "torch.package",
        "torch.utils.cpp_extension",
    ),
    _CONFIGURES: ("logging.config", "hydra.utils", "hydra._internal"),
    _SPAWNS: (
        *(f"{module}.{name}" for module in ("os", "posix", "nt") for name in _PROCESS_STARTERS),
        "subprocess",
        "_posixsubprocess",
        "pty.spawn",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "asyncio.subprocess",
    ),
    _SELF: ("shardplan.convert.targets", "shardplan.convert.trust"),
}

# Dotted name -> why it is refused whatever the allow-list. A name refuses itself and
# everything under it at dot boundaries ("importlib" refuses importlib.util.find_spec).
ALWAYS_REFUSED: dict[str, str] = {
    name: reason for reason, names in _REFUSED_BY_REASON.items() for name in names
}


def refused_name(dotted: str) -> str | None:
    """The entry of ALWAYS_REFUSED that ``dotted`` is, or lies under; None if none."""
    end = dotted.find(".")
    while end >= 0:
        if dotted[:end] in ALWAYS_REFUSED:
            return dotted[:end]
        end = dotted.find(".", end + 1)
    return dotted if dotted in ALWAYS_REFUSED else None


def dunder_segment(dotted: str) -> str | None:
    """The first segment of ``dotted`` that is a dunder name (``__globals__``), or None."""
    if "__" not in dotted:
        return None
    for segment in dotted.split("."):
        if segment.startswith("__") and segment.endswith("__"):
            return segment
    return None


def under_prefix(dotted: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``dotted`` is one of ``prefixes`` or lies under one at a dot boundary."""
    for prefix in prefixes:
        if dotted.startswith(prefix) and (len(dotted) == len(prefix) or dotted[len(prefix)] == "."):
            return True
    return False


def allow_list(allow_targets: object) -> tuple[str, ...]:
    """``allow_targets`` as a tuple of checked module prefixes, or TypeError/ValueError.

    A bare string is refused: iterating it would allow its letters.
    """
    if type(allow_targets) is tuple and not allow_targets:
        return ()
    if isinstance(allow_targets, (str, bytes)):
        raise TypeError(
            "allow_targets must be a tuple of module prefixes, got the "
            f"{type(allow_targets).__name__} {shown(allow_targets)}: write "
            f"allow_targets=({allow_targets!r},)"
        )
    if not isinstance(allow_targets, Iterable):
        raise TypeError(
            "allow_targets must be a tuple of module prefixes such as ('hyper_parallel',), "
            f"got {type(allow_targets).__name__} {shown(allow_targets)}"
        )
    prefixes: list[str] = []
    for prefix in allow_targets:
        if not isinstance(prefix, str):
            raise TypeError(
                f"allow_targets holds {type(prefix).__name__} {shown(prefix)}: each entry must "
                "be a module prefix string such as 'hyper_parallel'"
            )
        if not _MODULE_PREFIX_RE.fullmatch(prefix):
            raise ValueError(
                f"allow_targets entry {shown(prefix)} is not a dotted module name such as "
                "'hyper_parallel' or 'my_pkg.models' (ASCII, no wildcards, no leading or "
                "trailing dot)"
            )
        segment = dunder_segment(prefix)
        if segment is not None:
            raise ValueError(
                f"allow_targets entry {prefix!r} has the dunder segment {segment!r}: dunder "
                "paths are always refused, so it would allow nothing"
            )
        refused = refused_name(prefix)
        if refused is not None:
            raise ValueError(
                f"allow_targets entry {prefix!r} would allow nothing: {refused} is always "
                f"refused (it {ALWAYS_REFUSED[refused]})"
            )
        prefixes.append(prefix)
    return tuple(prefixes)


def _how_to_allow(dotted: str, prefixes: tuple[str, ...]) -> str:
    now = f"allow_targets={prefixes!r}" if prefixes else "no Target is allowed (allow_targets=())"
    return (
        f"{now}. If you trust every callable of that package, the program rebuilding the "
        f"artifact allows it: rebuild_plan(meta, allow_targets=({dotted.split('.')[0]!r},))"
    )


def refusal(dotted: str, prefixes: tuple[str, ...]) -> str | None:
    """Why an artifact may not name ``dotted`` under ``prefixes``; None if it may."""
    if len(dotted) > MAX_PATH_LENGTH:
        return f"Target path of {len(dotted)} characters is refused: at most {MAX_PATH_LENGTH}"
    segment = dunder_segment(dotted)
    if segment is not None:
        return (
            f"Target {dotted!r} is always refused: its segment {segment!r} is a dunder name, "
            "which reaches Python's internals, not a callable a package exports"
        )
    refused = refused_name(dotted)
    if refused is not None:
        return (
            f"Target {dotted!r} is always refused, whatever allow_targets says: {refused} "
            f"{ALWAYS_REFUSED[refused]}"
        )
    if not under_prefix(dotted, prefixes):
        return f"Target {dotted!r} is not allowed: {_how_to_allow(dotted, prefixes)}"
    return None


def check_path(dotted: str, prefixes: tuple[str, ...], place: str) -> None:
    """Raise UntrustedTarget at ``place`` unless an artifact may name ``dotted``."""
    why = refusal(dotted, prefixes)
    if why is not None:
        raise UntrustedTarget(place, why, target=dotted)


def real_name(obj: Any) -> tuple[str | None, str]:
    """``(module, "module.qualname")`` of a resolved object: where it really lives."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return None, shown(obj)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(qualname, str):  # an instance: named after its class
        qualname = type(obj).__qualname__
    return module, f"{module}.{qualname}"


def check_step(dotted: str, obj: Any, prefixes: tuple[str, ...], place: str) -> None:
    """Raise UntrustedTarget at ``place`` unless ``obj``, which the path ``dotted`` steps
    through, is a module or a class that really lives under an allowed prefix: an
    attribute is read only from those (no other object's ``__getattr__`` runs)."""
    if isinstance(obj, ModuleType):
        module = obj.__name__
    elif isinstance(obj, type):
        module = obj.__module__
    else:
        raise UntrustedTarget(
            place,
            f"Target {dotted!r} steps through {shown(obj)}, which is neither a module nor a "
            "class; nothing was called",
            target=dotted,
            real_name=shown(obj),
        )
    if not under_prefix(module, prefixes):
        raise UntrustedTarget(
            place,
            f"Target {dotted!r} steps through {shown(obj)}, whose module {module!r} is not "
            f"allowed (allow_targets={prefixes!r}): a re-export does not make it trusted; "
            "nothing was called",
            target=dotted,
            real_name=module,
        )


def check_resolved(dotted: str, obj: Any, prefixes: tuple[str, ...], place: str) -> None:
    """Raise UntrustedTarget at ``place`` unless the object ``dotted`` imported lives
    under an allowed prefix and is not always refused."""
    module, name = real_name(obj)
    if module is None:
        why = (
            f"Target {dotted!r} resolves to {name}, which has no __module__ naming where it "
            "lives, so it cannot be checked"
        )
    elif (refused := refused_name(name)) is not None:
        why = (
            f"Target {dotted!r} resolves to {name}, which is always refused: {refused} "
            f"{ALWAYS_REFUSED[refused]}"
        )
    elif not under_prefix(module, prefixes):
        why = (
            f"Target {dotted!r} resolves to {name}, whose module {module!r} is not allowed "
            f"(allow_targets={prefixes!r}): a re-export does not make a callable trusted. "
            f"Allow {module!r} too if you trust it"
        )
    else:
        return
    raise UntrustedTarget(place, why + "; nothing was called", target=dotted, real_name=name)


class TrustScope:
    """The allow-list of one rebuild, and the paths it has already admitted (an artifact
    names the same few callables thousands of times). ``prefixes`` is None only while
    freeze reads back a planner's own values: those are trusted code."""

    __slots__ = ("prefixes", "admitted")

    def __init__(self, prefixes: tuple[str, ...] | None) -> None:
        self.prefixes = prefixes
        self.admitted: set[str] = set()


_DENY_ALL = TrustScope(())  # never admits anything, so its set stays empty
_SCOPE: ContextVar[TrustScope] = ContextVar("shardplan_trust_scope", default=_DENY_ALL)


def current_scope() -> TrustScope:
    return _SCOPE.get()


def begin_rebuild(allow_targets: object) -> Token[TrustScope]:
    """Admit Targets under ``allow_targets`` until ``end_rebuild(token)``, in a finally."""
    return _SCOPE.set(TrustScope(allow_list(allow_targets)))


def begin_freeze_read_back() -> Token[TrustScope]:
    """Trust every Target until ``end_rebuild(token)``: freeze reading back what a planner
    built in Python, which is trusted code."""
    return _SCOPE.set(TrustScope(None))


def end_rebuild(token: Token[TrustScope]) -> None:
    _SCOPE.reset(token)


@contextmanager
def allowing_targets(allow_targets: object) -> Iterator[None]:
    """``begin_rebuild``/``end_rebuild`` as a with block, for code that calls the rebuild
    kinds directly (not on a hot path: see shardplan/collector.py's note on ``with``)."""
    token = begin_rebuild(allow_targets)
    try:
        yield
    finally:
        end_rebuild(token)
