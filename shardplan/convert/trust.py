"""Which callables an artifact may name (docs/contract.md §8, docs/trust.md).

A Target rebuilt from an artifact names a callable the trainer will import and call with
the artifact's arguments. It is admitted only by an entry of the ``allow_targets`` the
calling program passed (trusted code; never the artifact). An entry names what it
trusts: ``"a.b.fn"`` that one callable, ``"a.b"`` the public callables defined in module
``a.b`` itself (``a.b.name``, whose real ``__module__`` is ``a.b``), ``"a.b.*"`` every
public callable below ``a.b`` (no private ``_name`` segment below the entry); a mapping
``{path: callable}`` binds a path to the program's own callable, and nothing is imported
for it. Module and subtree entries are taken only over the program's own source: over
someone else's code (``owners.library_of``, by provenance: built-in modules, the standard
library, the interpreter's library folders, this runtime, whatever a distribution from an
index, a wheel file or a VCS URL installs) they are refused when the list is read, and
only exact entries and mappings reach it. A private callable is admitted only by an exact entry naming it (or a mapping):
an entry with a private segment is only an exact name, and a subtree entry with one is
refused. Whatever the allow-list, a path longer than ``MAX_PATH_LENGTH`` or
``MAX_PATH_SEGMENTS``, a dunder segment and the names in ``ALWAYS_REFUSED`` are refused.

When the Target is first resolved, its path steps only through plain modules and
classes: from a package, a segment that names a submodule is that submodule, imported,
whatever the package's namespace holds at the time (so the outcome does not depend on
what the process imported before); any other segment is read from the module's or the
class's own ``__dict__`` (no ``__getattr__`` or descriptor of anyone runs). The object it
reaches must be a function or a class whose real name is admitted too: a re-export does
not make a callable trusted.

The allow-list is a parameter all the way down: the generated rebuild (and read_plan's
one pass) takes ``allow_targets``, makes its ``Admission`` and passes it to
``kinds.rebuild_injected(value, path, targets)``, which builds each Target
(``targets.target_from_frozen``). Called with no list, it admits no Target.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardplan.convert.owners import library_of, names_module, refused_at_import
from shardplan.errors import MetaError, UntrustedTarget, shown
from shardplan.table.format import DOTTED_PATH_PATTERN

MODULE_PREFIX_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
_MODULE_PREFIX_RE = re.compile(MODULE_PREFIX_PATTERN)
_DOTTED_PATH_RE = re.compile(DOTTED_PATH_PATTERN)

# The longest Target path an artifact may name, in characters and in segments. Real ones
# are about 100 characters and 8 segments; each segment may cost the trainer one nested
# import when the path is resolved, so the count is bounded well below the interpreter's
# recursion limit.
MAX_PATH_LENGTH = 512
MAX_PATH_SEGMENTS = 32


_RUNS_CODE = "runs or compiles code it is given as text"
_IMPORTS = "imports a module, or finds an object, by a name it is given"
_BY_NAME = "reaches any attribute, item or namespace by a name it is given"
_CALLS = "binds or makes a call to whatever callable it is given"
_UNPICKLES = "rebuilds arbitrary objects, calls included, from serialized data"
_LOADS = "loads and runs code or pickles from a file, a library or the network"
_CONFIGURES = "instantiates whatever callables its configuration names"
_SPAWNS = "runs any command line or program it is given"
_WRITES = "writes, creates or maps a file at a path it is given"
_SELF = "builds or resolves Targets itself, which would bypass these checks"
_INSTALLS = "installs packages, or changes what the interpreter imports at startup"
_ENDS = "ends or signals a process"
_FETCHES = "fetches a URL, writes what it fetched or opens a browser on it"

# os's file changers, likewise (renames, makedirs and removedirs are os's own).
_FILE_CHANGERS = (
    *("rename", "renames", "replace", "remove", "unlink", "rmdir", "removedirs", "mkdir"),
    *("makedirs", "open", "truncate", "link", "symlink", "mkfifo", "mknod", "chmod"),
    *("chown", "lchown", "utime"),
)
# torch's storages, each with from_file (which maps, and with shared=True creates, the file
# at the path it is given): by every public path, and by their real homes.
_STORAGES = (
    *("BFloat16", "Bool", "Byte", "Char", "ComplexDouble", "ComplexFloat", "Double"),
    *("Float", "Half", "Int", "Long", "QInt32", "QInt8", "QUInt2x4", "QUInt4x2"),
    *("QUInt8", "Short", "", "Typed", "Untyped"),
)
# pathlib.Path's methods that create, change or remove the file at the path.
_PATH_CHANGERS = (
    *("touch", "write_text", "write_bytes", "open", "mkdir", "rename", "replace"),
    *("unlink", "rmdir", "symlink_to", "hardlink_to", "chmod", "lchmod"),
)

# os's process starters; posix and nt are where os finds them (their real module).
_PROCESS_STARTERS = (
    *("system", "popen", "posix_spawn", "posix_spawnp", "startfile"),
    *(f"exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    *(f"spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
)

# os's process enders and signallers (posix and nt are their real module).
_PROCESS_ENDERS = ("kill", "killpg", "abort", "_exit")

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
        # sympy's parsers and sympify evaluate the text they are given, wherever they are
        # reached from (sympy.sympify, sympy.parse_expr, lambdify's string expressions)
        "sympy.sympify",
        "sympy.core.sympify",
        "sympy.parsing",
        "sympy.parse_expr",
        "sympy.lambdify",
        "sympy.utilities.lambdify",
        "sympy.init_session",
        "sympy.interactive",
        "py_compile",
        "compileall",
        "types.FunctionType",
        "types.LambdaType",
        "types.CodeType",
        "builtins.function",
        "builtins.code",
        "numpy.testing",
        # torch's compiler: its helpers write, compile and import the source they are given
        # (torch._inductor.metrics._parse_kernel_fn_code, async_compile.AsyncCompile.cpp)
        "torch._inductor",
        # a GraphModule rebuilt from its pickled form execs the source its body carries
        "torch.fx.graph_module.reduce_graph_module",
        "torch.fx.graph_module.reduce_package_graph_module",
        "torch.fx.graph_module._deserialize_graph_module",
        # Timer runs the Python statements it is given; cpp_jit compiles and loads C++
        "torch.utils.benchmark",
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
    _UNPICKLES: (
        *("pickle", "_pickle", "marshal", "shelve", "copyreg", "dill", "cloudpickle"),
        # joblib's load and dump (numpy_pickle, where they live), and its pickling cache
        *("joblib.load", "joblib.dump", "joblib.numpy_pickle", "joblib.Memory", "joblib.memory"),
        # PyYAML's loaders that build arbitrary Python objects
        *("yaml.unsafe_load", "yaml.unsafe_load_all", "yaml.load", "yaml.load_all"),
        *("yaml.full_load", "yaml.full_load_all", "yaml.UnsafeLoader", "yaml.FullLoader"),
        *("yaml.Loader", "yaml.loader.UnsafeLoader", "yaml.loader.FullLoader", "yaml.loader.Loader"),
        *("yaml.constructor.UnsafeConstructor", "yaml.constructor.FullConstructor"),
        "yaml.constructor.Constructor",
        # an exported program's archive is unpickled and its code run
        "torch.export.load",
        "torch.export.pt2_archive",
    ),
    _LOADS: (
        "ctypes",
        "_ctypes",
        "torch.hub",
        "torch.load",
        "torch.serialization",
        "torch.jit.load",
        "torch.jit._serialization",
        "torch.package",
        "torch.utils.cpp_extension",
        # torch's top-level loaders, which an entry "torch" would admit by their real name
        "torch.import_ir_module",
        "torch.import_ir_module_from_buffer",
        "torch._load_global_deps",
        "torch._preload_cuda_deps",
        "torch._preload_cuda_lib",
        "torch._import_device_backends",
        "torch.ops.load_library",
        "torch.classes.load_library",
        "torch._ops._Ops.load_library",
        "torch._classes._Classes.load_library",
        "torch.fx.graph_module._exec_with_source",
        "torch.fx.graph_module._method_from_src",
        "torch.fx.graph_module._forward_from_src",
        # numpy's: numpy.load's __module__ is numpy, and allow_pickle unpickles a file
        "numpy.load",
        "numpy.lib.format",
        "numpy.lib._npyio_impl",
        "numpy.lib.npyio",
        "numpy.ctypeslib",
        "numpy.f2py",
        "numpy.distutils",
        # distributed checkpoints: metadata is unpickled, format_utils torch.loads a file
        "torch.distributed.checkpoint",
    ),
    _CONFIGURES: ("logging.config", "hydra.utils", "hydra._internal"),
    _SPAWNS: (
        *(f"{module}.{name}" for module in ("os", "posix", "nt") for name in _PROCESS_STARTERS),
        "subprocess",
        "_posixsubprocess",
        "torch.utils.collect_env",
        # torchrun and its launchers start whatever program their arguments name
        "torch.distributed.run",
        "torch.distributed.launch",
        "torch.distributed.launcher",
        "torch.distributed.elastic",
        "pty.spawn",
        # distutils' spawn and setuptools (which ships distutils and runs setup scripts)
        "distutils",
        "setuptools",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "asyncio.subprocess",
    ),
    _WRITES: (
        # by their real names (numpy 2.4: memmap is a class, the others dispatchers, all
        # with __module__ numpy), whatever path or re-export reaches them
        "numpy.memmap",
        "numpy.save",
        "numpy.savez",
        "numpy.savez_compressed",
        "numpy.savetxt",
        "torch.save",
        "torch.from_file",
        "torch._VariableFunctionsClass.from_file",
        "torch.export.save",
        "torch.onnx.export",
        "torch.PyTorchFileWriter",
        *(f"{module}.{name}" for module in ("os", "posix", "nt") for name in _FILE_CHANGERS),
        "builtins.open",
        "io.open",
        "io.FileIO",
        "_io",
        "shutil",
        "tempfile",
        "zipfile",
        "tarfile",
        "logging.FileHandler",
        "logging.basicConfig",
        "logging.handlers",
        *(f"pathlib.Path.{name}" for name in _PATH_CHANGERS),
        *(f"torch.{kind}Storage.from_file" for kind in _STORAGES),
        *(f"torch.storage.{kind}.from_file" for kind in ("TypedStorage", "UntypedStorage")),
        "torch.storage._StorageBase.from_file",
        # the compressed and codec file openers (mode "w" creates the file)
        *("gzip.open", "gzip.GzipFile", "bz2.open", "bz2.BZ2File", "lzma.open", "lzma.LZMAFile"),
        *("codecs.open", "fileinput"),
        # databases opened, and created, at the path given
        *("sqlite3", "_sqlite3", "dbm"),
    ),
    _INSTALLS: (
        "pip",
        "ensurepip",
        "venv",
        *("site.addsitedir", "site.addpackage", "site.main"),
        *("site.execsitecustomize", "site.execusercustomize"),
    ),
    _FETCHES: ("urllib.request", "webbrowser"),
    _ENDS: (
        *(f"{module}.{name}" for module in ("os", "posix", "nt") for name in _PROCESS_ENDERS),
        "sys.exit",
        "signal.pthread_kill",
        "signal.raise_signal",
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


def private_segment(dotted: str) -> str | None:
    """The first segment of ``dotted`` that is private (``_name``, not a dunder), or None."""
    if "_" not in dotted:
        return None
    for segment in dotted.split("."):
        if segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__")):
            return segment
    return None


def path_bound(dotted: str) -> str | None:
    """Why ``dotted`` is too long to be a Target path; None if it is within the bounds."""
    if len(dotted) > MAX_PATH_LENGTH:
        return f"Target path of {len(dotted)} characters is refused: at most {MAX_PATH_LENGTH}"
    segments = dotted.count(".") + 1
    if segments > MAX_PATH_SEGMENTS:
        return (
            f"Target path of {segments} segments is refused: at most {MAX_PATH_SEGMENTS} "
            f"(it starts {dotted[:40]!r})"
        )
    return None


class AllowList:
    """``allow_targets`` once checked: exact names, the public modules among them (whose
    public callables they admit too), subtree roots (all public), and paths bound to the
    program's own callables."""

    __slots__ = ("names", "_modules", "subtrees", "bound", "shown")

    def __init__(
        self,
        names: frozenset[str],
        subtrees: tuple[str, ...],
        bound: dict[str, Callable[..., Any]],
        shown: str,
    ) -> None:
        self.names = names
        self._modules: frozenset[str] | None = None
        self.subtrees = subtrees
        self.bound = bound
        self.shown = shown

    @property
    def modules(self) -> frozenset[str]:
        """The names that admit a module's public callables too. An entry with a private
        segment, or over someone else's code, names one callable exactly, never a module (a
        module entry over it is refused when the list is read). Found on first need: a
        list whose Targets are all named exactly never asks whose code a package is."""
        if self._modules is None:
            self._modules = frozenset(
                name
                for name in self.names
                if private_segment(name) is None and library_of(name.partition(".")[0]) is None
            )
        return self._modules

    def grant(self, dotted: str) -> str | None:
        """Which entry admits ``dotted``: "bound", "exact", "module", "subtree", or None."""
        if dotted in self.bound:
            return "bound"
        if dotted in self.names:
            return "exact"
        module, _, name = dotted.rpartition(".")
        if module in self.modules and private_segment(name) is None:
            return "module"
        if self.subtree_of(dotted) is not None:
            return "subtree"
        return None

    def subtree_of(self, dotted: str) -> str | None:
        """The subtree root ``dotted`` lies below with no private segment below it."""
        for root in self.subtrees:
            if dotted.startswith(root) and dotted[len(root) : len(root) + 1] == ".":
                if private_segment(dotted[len(root) + 1 :]) is None:
                    return root
        return None

    def admits_real_name(self, module: str, name: str) -> bool:
        """Whether an object whose real ``__module__`` is ``module`` and whose real dotted
        name is ``name`` is trusted by an entry: that exact name, its public module (and a
        public qualname), or a subtree it lies below with no private segment below it."""
        if name in self.names:
            return True
        if module in self.modules and private_segment(name[len(module) + 1 :]) is None:
            return True
        return any(
            (module == root or module.startswith(root + "."))
            and private_segment(name[len(root) + 1 :]) is None
            for root in self.subtrees
        )


NOTHING_ALLOWED = AllowList(frozenset(), (), {}, "allow_targets=()")

# What a program passes as ``allow_targets``: entries (strings, mappings), or one mapping;
# or an AllowList, one checked already (shardplan.api checks it when a rebuild starts).
AllowTargets = (
    Iterable["str | Mapping[str, Callable[..., Any]]"] | Mapping[str, Callable[..., Any]] | AllowList
)


def _entry_error(message: str) -> MetaError:
    """An allow_targets entry that cannot be used: a MetaError (so a ValueError) at
    rebuild, whose message names the entry."""
    return MetaError("", message)


def _check_entry_name(entry: str, shown_entry: str, subtree: bool) -> None:
    if not _MODULE_PREFIX_RE.fullmatch(entry):
        raise _entry_error(
            f"allow_targets entry {shown_entry} is not a dotted name such as "
            "'my_planner.models.fn', 'my_planner.models' or 'my_planner.*' (ASCII, a "
            "wildcard only as a last '.*' segment, no leading or trailing dot)"
        )
    bound = path_bound(entry)
    if bound is not None:
        raise _entry_error(f"allow_targets entry {shown_entry} would allow nothing: {bound}")
    segment = dunder_segment(entry)
    if segment is not None:
        raise _entry_error(
            f"allow_targets entry {shown_entry} has the dunder segment {segment!r}: dunder "
            "paths are always refused, so it would allow nothing"
        )
    refused = refused_name(entry)
    private = private_segment(entry) if subtree else None
    if private is not None:
        if refused is not None:
            instead = (
                f"; and {refused} is always refused (it {ALWAYS_REFUSED[refused]}), so no "
                "entry admits what lies there"
            )
        else:
            instead = (
                ". Name each private callable the program trusts exactly, "
                f'allow_targets=("{entry}.fn",), or bind its path to the program\'s own '
                f'callable: allow_targets={{"{entry}.fn": my_callable}}'
            )
        raise _entry_error(
            f"allow_targets entry {shown_entry} is refused: its segment {private!r} is "
            "private, and a subtree trusts every callable below it, so it would reach a "
            f"library's private internals{instead}"
        )
    # Whose code it opens matters only to an entry that opens a module (a top-level name
    # can only be one) or a subtree; a name that is neither is exact (AllowList.modules).
    top, dot, _ = entry.partition(".")
    library = library_of(top)
    if library is not None and (subtree or not dot or _names_library_module(entry)):
        where = f"below {entry}" if subtree else f"of module {entry}"
        raise _entry_error(
            f"allow_targets entry {shown_entry} is refused: {library}, not the program's own "
            f"code, and a {'subtree' if subtree else 'module'} entry would let an artifact "
            f"call every public callable {where} with arguments it chooses. Name each "
            f'callable the program trusts exactly, allow_targets=("{entry}.fn",), or bind its '
            f'path to the program\'s own callable: allow_targets={{"{entry}.fn": my_callable}}'
        )
    if refused is not None:
        raise _entry_error(
            f"allow_targets entry {shown_entry} would allow nothing: {refused} is always "
            f"refused (it {ALWAYS_REFUSED[refused]})"
        )


@functools.cache
def _names_library_module(entry: str) -> bool:
    # A library's modules do not come and go while a process runs (library_of reads them
    # once a process too), so each name is looked up once: a rebuild's start stays cheap.
    return names_module(entry)


def _bind(bound: dict[str, Callable[..., Any]], mapping: Mapping[Any, Any]) -> None:
    for path, fn in mapping.items():
        if not isinstance(path, str) or not _DOTTED_PATH_RE.fullmatch(path):
            raise _entry_error(
                f"allow_targets binds {shown(path)}: a bound path must be the dotted path an "
                "artifact names, such as 'hyper_parallel.models.x.fn'"
            )
        too_long = path_bound(path)
        if too_long is not None:
            raise _entry_error(f"allow_targets binds a path no artifact may name: {too_long}")
        if not callable(fn):
            raise TypeError(
                f"allow_targets binds {path!r} to {type(fn).__name__} {shown(fn)}: bind it "
                "to the program's own callable"
            )
        bound[path] = fn


def allow_list(allow_targets: object) -> AllowList:
    """``allow_targets`` checked, or TypeError/MetaError naming the bad entry (an
    AllowList is one checked already).

    It is a tuple (or any iterable) of entries, each a string or a mapping
    ``{path: callable}``, or one such mapping. A bare string is refused: iterating it
    would allow its letters.
    """
    if type(allow_targets) is tuple and not allow_targets:
        return NOTHING_ALLOWED
    if isinstance(allow_targets, AllowList):
        return allow_targets
    if isinstance(allow_targets, (str, bytes)):
        raise TypeError(
            "allow_targets must be a tuple of entries, got the "
            f"{type(allow_targets).__name__} {shown(allow_targets)}: write "
            f"allow_targets=({allow_targets!r},)"
        )
    items: list[object]
    if isinstance(allow_targets, Mapping):
        items = [allow_targets]
    elif isinstance(allow_targets, Iterable):
        items = list(allow_targets)
    else:
        raise TypeError(
            "allow_targets must be a tuple of entries such as ('my_planner.models.fn',), "
            "or a mapping {artifact path: callable}, got "
            f"{type(allow_targets).__name__} {shown(allow_targets)}"
        )
    names: set[str] = set()
    subtrees: list[str] = []
    bound: dict[str, Callable[..., Any]] = {}
    for item in items:
        if isinstance(item, Mapping):
            _bind(bound, item)
            continue
        if not isinstance(item, str):
            raise TypeError(
                f"allow_targets holds {type(item).__name__} {shown(item)}: each entry must "
                "be a string such as 'my_planner.models.fn' or a mapping {path: callable}"
            )
        if item.endswith(".*"):
            _check_entry_name(item[:-2], shown(item), subtree=True)
            subtrees.append(item[:-2])
        else:
            _check_entry_name(item, shown(item), subtree=False)
            names.add(item)
    strings = (*sorted(names), *(f"{root}.*" for root in subtrees))
    described = f"allow_targets={strings!r}" if strings else "no string entry"
    if bound:
        described += f" and {len(bound)} bound path{'s' if len(bound) > 1 else ''}"
    return AllowList(frozenset(names), tuple(subtrees), bound, described)


def _how_to_allow(dotted: str) -> str:
    return (
        f"If the program means to call it, allow exactly that callable: rebuild_plan(meta, "
        f'allow_targets=("{dotted}",)), or bind the path to the program\'s own callable, '
        f'and nothing is imported: allow_targets={{"{dotted}": my_callable}}'
    )


def _why_not_allowed(dotted: str, allowed: AllowList) -> str:
    if allowed is NOTHING_ALLOWED:
        return f"Target {dotted!r} is not allowed: no Target is allowed (allow_targets=()). " + (
            _how_to_allow(dotted)
        )
    now = f"no entry admits it ({allowed.shown})"
    module, _, name = dotted.rpartition(".")
    under = [root for root in allowed.subtrees if dotted.startswith(root + ".")]
    if under:
        private = private_segment(dotted[len(under[0]) + 1 :])
        now += (
            f"; the entry '{under[0]}.*' admits only public names below {under[0]}, and "
            f"{private!r} is private: a private callable is admitted only by an exact entry"
        )
    elif module in allowed.names and module not in allowed.modules:
        private = private_segment(module)
        because = (
            f"has the private segment {private!r}"
            if private is not None
            else f"is over someone else's code ({library_of(module.partition('.')[0])})"
        )
        now += (
            f"; the entry {module!r} {because}, so it names that one callable exactly, "
            "not the callables of a module"
        )
    else:
        for entry in sorted(allowed.modules):
            if dotted.startswith(entry + ".") and entry != module:
                now += (
                    f"; the entry {entry!r} admits the callables defined in module {entry} "
                    f"itself ({entry}.name), not those of its submodules"
                )
                break
        else:
            if module in allowed.modules and private_segment(name) is not None:
                now += f"; the entry {module!r} admits only the public names of {module}"
    return f"Target {dotted!r} is not allowed: {now}. {_how_to_allow(dotted)}"


def refusal(dotted: str, allowed: AllowList) -> str | None:
    """Why an artifact may not name ``dotted`` under ``allowed``; None if it may."""
    too_long = path_bound(dotted)
    if too_long is not None:
        return too_long
    segment = dunder_segment(dotted)
    if segment is not None:
        return (
            f"Target {dotted!r} is always refused: its segment {segment!r} is a dunder name, "
            "which reaches Python's internals, not a callable a package exports"
        )
    if dotted in allowed.bound:
        return None  # the program's own callable: nothing the path says is imported
    refused = refused_name(dotted)
    if refused is not None:
        return (
            f"Target {dotted!r} is always refused, whatever allow_targets says: {refused} "
            f"{ALWAYS_REFUSED[refused]}"
        )
    if allowed.grant(dotted) is None:
        return _why_not_allowed(dotted, allowed)
    return None


def check_path(dotted: str, allowed: AllowList, place: str) -> None:
    """Raise UntrustedTarget at ``place`` unless an artifact may name ``dotted``."""
    why = refusal(dotted, allowed)
    if why is not None:
        raise UntrustedTarget(place, why, target=dotted)


# Read without running anything an object defines: these are the C slots of type itself.
_CLASS_MODULE = type.__dict__["__module__"]
_CLASS_QUALNAME = type.__dict__["__qualname__"]
_CLASS_MRO = type.__dict__["__mro__"]
_CLASS_DICT = type.__dict__["__dict__"]


def _class_name(cls: type) -> tuple[str, str]:
    module = _CLASS_MODULE.__get__(cls, type)
    qualname = _CLASS_QUALNAME.__get__(cls, type)
    return str(module), f"{module}.{qualname}"


class _Refused(Exception):
    """One step of a resolution refused: ``why``, and the real name it was about."""

    def __init__(self, why: str, real_name: str) -> None:
        super().__init__(why)
        self.why = why
        self.real_name = real_name


def _step_name(obj: Any, dotted: str) -> tuple[str, str]:
    """``(module, name)`` of an object a path steps through: a plain module (not an
    instance of a ModuleType subclass) or a class; _Refused for anything else."""
    if type(obj) is types.ModuleType:
        return obj.__name__, obj.__name__
    if isinstance(obj, type):
        return _class_name(obj)
    kind = type(obj)
    what = f"an instance of {kind.__module__}.{kind.__qualname__}"
    if isinstance(obj, types.ModuleType):
        what += ", a ModuleType subclass whose attributes may be built on demand"
    raise _Refused(
        f"Target {dotted!r} steps through {what}: a path steps only through plain modules "
        "and classes",
        f"{kind.__module__}.{kind.__qualname__}",
    )


def _attribute(obj: Any, attr: str, dotted: str) -> Any:
    """``obj.attr`` read from the module's or the class's own ``__dict__`` (no
    ``__getattr__``, property or other descriptor runs), or _Refused."""
    if type(obj) is types.ModuleType:
        try:
            return vars(obj)[attr]
        except KeyError:
            raise _Refused(
                f"Target {dotted!r}: module {obj.__name__} defines no {attr!r} (a module's "
                "__getattr__ is not asked)",
                obj.__name__,
            ) from None
    for klass in _CLASS_MRO.__get__(obj, type):
        found = _CLASS_DICT.__get__(klass, type).get(attr, _MISSING)
        if found is _MISSING:
            continue
        if isinstance(found, staticmethod):
            return found.__func__
        if isinstance(found, classmethod):
            return types.MethodType(found.__func__, obj)
        if isinstance(found, types.ClassMethodDescriptorType):
            return found.__get__(None, obj)
        if isinstance(found, (type, types.FunctionType, types.BuiltinFunctionType)):
            return found
        raise _Refused(
            f"Target {dotted!r}: {attr!r} of {_class_name(obj)[1]} is a "
            f"{type(found).__name__}, which runs code of its own to be read",
            _class_name(obj)[1],
        )
    raise _Refused(
        f"Target {dotted!r}: class {_class_name(obj)[1]} defines no {attr!r}", _class_name(obj)[1]
    )


_MISSING = object()


def _callable_name(obj: Any, dotted: str) -> tuple[str, str]:
    """``(module, "module.qualname")`` of a function or class a path reaches; _Refused
    for anything else (an instance's call runs whatever its class says)."""
    if isinstance(obj, type):
        return _class_name(obj)
    if isinstance(obj, types.MethodType) and isinstance(obj.__self__, type):
        obj = obj.__func__  # a classmethod of a class
    if isinstance(obj, types.BuiltinFunctionType):
        owner = obj.__self__
        if (
            owner is not None
            and type(owner) is not types.ModuleType
            and not isinstance(owner, type)
        ):
            obj = None  # a method bound to an instance
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        module, qualname = obj.__module__, obj.__qualname__
        if isinstance(module, str) and isinstance(qualname, str):
            return module, f"{module}.{qualname}"
        raise _Refused(
            f"Target {dotted!r} resolves to {shown(obj)}, which has no __module__ naming where "
            "it lives, so it cannot be checked",
            shown(obj),
        )
    if isinstance(obj, types.ModuleType):
        raise _Refused(
            f"Target {dotted!r} resolves to the module {shown(obj)}, not a function or a class",
            obj.__name__ if type(obj) is types.ModuleType else f"{type(obj).__module__}.module",
        )
    kind = type(obj)
    raise _Refused(
        f"Target {dotted!r} resolves to {shown(obj)}, an instance of {kind.__qualname__}, not a "
        "function or a class: an instance's call runs whatever its class says",
        f"{kind.__module__}.{kind.__qualname__}",
    )


def _import_module(module_name: str) -> Any:
    """``importlib.import_module``, or None when ``module_name`` itself is not a module
    (a missing module that its own code imports is the real error)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            return None
        raise


def _names_submodule(name: str) -> bool:
    """Whether ``name`` is a submodule of its (imported) package, found without importing
    it: imported already or not, the answer is the same."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # in sys.modules without a spec: a module all the same
        return True


def _untrusted_step(dotted: str, name: str, allowed: AllowList) -> _Refused:
    """Why a step through ``name`` (a module's or a class's real name) is refused."""
    why = f"no entry trusts it ({allowed.shown})"
    for root in allowed.subtrees:
        private = private_segment(name[len(root) + 1 :]) if name.startswith(root + ".") else None
        if private is not None:
            why = (
                f"its segment {private!r} below the entry '{root}.*' is private, and a "
                "subtree admits only public names"
            )
            break
    return _Refused(
        f"Target {dotted!r} steps through {name}: {why}; a re-export does not make it trusted",
        name,
    )


def _walk(dotted: str, parts: list[str], grant: str | None, allowed: AllowList) -> Any:
    """The object ``parts`` names, reached top-down. From the package the path has named
    so far, a segment that names a submodule is that submodule, imported (importlib asks
    no module's ``__getattr__``, and the parent imports do not nest): whatever the
    package's namespace holds, so the outcome does not depend on what the process
    imported before. Any other segment is read statically. A module grant (``a.b.name``)
    imports exactly ``a.b`` and reads ``name`` from it, refusing a submodule of that name
    without importing it. An object reached otherwise than by importing the path's own
    module must be a plain module or class, and under a subtree grant trusted by its
    real name."""
    obj = _import_module(parts[0])
    if obj is None:
        raise ImportError(f"cannot import Target path {dotted!r}: no module {parts[0]!r}")
    imported = True  # obj is the module the path names so far
    for index in range(1, len(parts)):
        attr, prefix = parts[index], ".".join(parts[: index + 1])
        module, name = _step_name(obj, dotted)
        if not imported and grant == "subtree" and not allowed.admits_real_name(module, name):
            raise _untrusted_step(dotted, name, allowed)
        last = index == len(parts) - 1
        if imported and type(obj) is types.ModuleType and "__path__" in vars(obj):
            if grant == "module" and last:
                if _names_submodule(prefix):
                    raise _Refused(
                        f"Target {dotted!r} names the submodule {prefix}, not a callable "
                        f"defined in module {module}",
                        prefix,
                    )
            else:
                found = _import_module(prefix)
                if found is not None:
                    obj = found
                    imported = type(found) is types.ModuleType and (
                        vars(found).get("__name__") == prefix
                    )
                    continue
        if grant == "module" and not last:
            raise _Refused(f"Target {dotted!r}: {prefix} is not a module", prefix)
        obj, imported = _attribute(obj, attr, dotted), False
    return obj


def _check_still_own(dotted: str, top: str, place: str) -> None:
    """A module or subtree grant imports ``top``: it must be the program's own source now
    too (a package that no path finder found when the list was read may have appeared
    since, from anywhere), found by the path finders the rule reads."""
    why = refused_at_import(top)
    if why is not None:
        raise UntrustedTarget(
            place,
            f"Target {dotted!r} is admitted only by a module or subtree entry, and {why}, not "
            f"the program's own code; nothing was imported or called. {_how_to_allow(dotted)}",
            target=dotted,
        )


def resolve(dotted: str, allowed: AllowList, place: str) -> Callable[..., Any]:
    """Import the callable an admitted path names, or raise UntrustedTarget at ``place``
    before anything is called.

    The path is checked again (it may have been reassigned). A path admitted as a public
    name of module M imports exactly M; an exact or subtree path imports each segment
    that names a submodule (_walk). Each object stepped through must be a plain module or
    a class; the object reached must be a function or a
    class, not always refused by its real name, and, unless the program named the path
    exactly, trusted by its real name too.
    """
    check_path(dotted, allowed, place)
    grant = allowed.grant(dotted)
    if grant == "bound":
        return allowed.bound[dotted]
    parts = dotted.split(".")
    if grant in ("module", "subtree"):
        _check_still_own(dotted, parts[0], place)
    try:
        obj = _walk(dotted, parts, grant, allowed)
        module, name = _callable_name(obj, dotted)
        refused = refused_name(name)
        if refused is not None:
            raise _Refused(
                f"Target {dotted!r} resolves to {name}, which is always refused: {refused} "
                f"{ALWAYS_REFUSED[refused]}",
                name,
            )
        if grant != "exact" and not allowed.admits_real_name(module, name):
            private = private_segment(name)
            if private is not None and any(
                name.startswith(entry + ".") for entry in (*allowed.modules, *allowed.subtrees)
            ):
                why = f"whose real name has the private segment {private!r}, which no entry "
                why += f"but an exact one admits ({allowed.shown})"
            else:
                why = f"whose module {module!r} no entry trusts ({allowed.shown})"
            raise _Refused(
                f"Target {dotted!r} resolves to {name}, {why}: a re-export does not make a "
                f'callable trusted. Allow the exact path ("{dotted}",) or its real name '
                f'("{name}",) if you trust it, or bind the path',
                name,
            )
    except _Refused as refused_step:
        raise UntrustedTarget(
            place,
            refused_step.why + "; nothing was called",
            target=dotted,
            real_name=refused_step.real_name,
        ) from None
    return obj  # type: ignore[no-any-return]


class Admission:
    """The Targets one rebuild admits: the allow-list its caller passed, checked, and the
    paths admitted so far (an artifact names the same few callables thousands of times:
    each is checked once a rebuild). The rebuild makes it from its ``allow_targets``
    parameter (``admission``) and passes it down to where each Target is built
    (``kinds.rebuild_injected``); every Target keeps the allow-list it was admitted under,
    for its first call. ``allowed`` is None only for ``READ_BACK``."""

    __slots__ = ("allowed", "admitted")

    def __init__(self, allowed: AllowList | None) -> None:
        self.allowed = allowed
        self.admitted: set[str] = set()


# Freeze reading back what a planner built in Python (kinds.admit): trusted code, checked
# for form only. It remembers nothing.
READ_BACK = Admission(None)


def admission(allow_targets: AllowTargets) -> Admission:
    """What a rebuild admits under ``allow_targets`` (checked here, when the rebuild
    starts: TypeError or MetaError naming a bad entry). ``()`` admits no Target."""
    return Admission(allow_list(allow_targets))
