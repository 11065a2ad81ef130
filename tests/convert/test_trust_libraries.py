"""Trust (docs/trust.md, "Whose code an entry opens"): module and subtree entries only over
the program's own code.

A module entry ("a.b") or a subtree entry ("a.b.*") lets an artifact call every public
callable there with arguments it chooses. Over the standard library, this runtime, or a
distribution installed from an index (torch, numpy, ...: tests/convert/test_trust_provenance.py
tests the rule itself), that is refused when rebuild starts, as a MetaError naming the entry; exact entries and mappings remain. Every test runs against
both implementations (tests/implementations.py); none may run, import or write anything
it refuses.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan.convert import owners, trust
from shardplan.errors import MetaError, UntrustedTarget, shown
from tests.implementations import use_both_implementations
from tests.trust_helpers import OKPKG_SOURCE, PWNED, compute_fn, example_artifact_with, target_meta

impl: Any = None
implementation = use_both_implementations(__name__)

RUN_TEXT = "open('pwned.txt', 'w').write('PWNED')\n"
CPP = '#include <cstdio>\nstruct P { P() { std::fopen("pwned.txt", "w"); } } p;\n'
VICTIM = "victim.bin"

# The table: a public callable that runs code, a command or a pickle, or changes a
# file; the allow-lists that used to admit it; the arguments that made it do so.
ATTACKS: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    (
        "torch.fx.graph_module.reduce_graph_module",
        ("torch.fx.graph_module", "torch.fx.*", "torch.*"),
        {"body": {"code": RUN_TEXT}, "import_block": ""},
    ),
    (
        "torch.distributed.run.main",
        ("torch.distributed.*", "torch.*"),
        {"args": ["--standalone", "--nproc-per-node", "1", "--no-python", "sh", "-c", PWNED]},
    ),
    (
        "torch.utils.benchmark.utils.cpp_jit.compile_timeit_template",
        ("torch.utils.*",),
        {"stmt": "", "setup": "", "global_setup": CPP},
    ),
    (
        "torch.distributed.checkpoint.format_utils.torch_save_to_dcp",
        ("torch.distributed.*",),
        {"torch_save_path": VICTIM, "dcp_checkpoint_dir": "dcp"},
    ),
    ("torch.PyTorchFileWriter", ("torch",), {"file_name": VICTIM}),
    ("os.renames", ("os",), {"old": VICTIM, "new": "moved/victim.bin"}),
    ("os.makedirs", ("os",), {"name": "made/dirs"}),
    ("io.open", ("io",), {"file": VICTIM, "mode": "w"}),
    ("shutil.copyfile", ("shutil",), {"src": __file__, "dst": VICTIM}),
    ("zipfile.ZipFile", ("zipfile",), {"file": VICTIM, "mode": "w"}),
    ("logging.FileHandler", ("logging.*",), {"filename": VICTIM, "mode": "w"}),
    ("pathlib.Path.touch", ("pathlib.*",), {"self": "touched.txt"}),
]
IDS = [attack[0] for attack in ATTACKS]


@pytest.fixture
def victim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder holding one file to keep; afterwards it holds just that, unchanged (and the
    program's own okpkg.py, where a test wrote one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / VICTIM).write_bytes(b"keep\n")
    yield tmp_path
    assert {p.name for p in tmp_path.iterdir()} - {"okpkg.py"} == {VICTIM}
    assert (tmp_path / VICTIM).read_bytes() == b"keep\n"


@pytest.mark.parametrize(("path", "entries", "kwargs"), ATTACKS, ids=IDS)
def test_each_attack_is_refused_when_rebuild_starts_under_every_list_that_admitted_it(
    victim: Path, path: str, entries: tuple[str, ...], kwargs: dict[str, Any]
) -> None:
    """Under its module or subtree entry: the entry is refused, naming it, why, and the two
    ways that remain. Named exactly: the entry would allow nothing (always refused)."""
    before = set(sys.modules)
    for key in ("local_compute_fn", "inner_wrapper", "inner_out_src"):
        meta = target_meta({"_target_": path, **kwargs}, key)
        for entry in entries:
            with pytest.raises(MetaError) as caught:
                impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
            message = str(caught.value)
            assert not isinstance(caught.value, UntrustedTarget)
            assert f"allow_targets entry '{entry}' is refused" in message
            assert "not the program's own code" in message
            assert "exactly" in message and "my_callable" in message  # the two ways left
        with pytest.raises(MetaError, match="would allow nothing.*always refused"):
            impl.rebuild_live_plan_from_meta(meta, allow_targets=(path,))
    assert set(sys.modules) - before == set()


def re_export(path: str) -> str:
    """okpkg's source with ``keep``, the callable ``path`` names, re-exported."""
    parts = path.split(".")
    prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
    module = next(prefix for prefix in prefixes if owners.names_module(prefix))
    return f"{OKPKG_SOURCE}import {module}\nkeep = {path}\n"


@pytest.mark.parametrize(("path", "entries", "kwargs"), ATTACKS, ids=IDS)
def test_a_package_of_the_programs_re_exporting_an_attack_is_refused_at_first_call(
    victim: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    entries: tuple[str, ...],
    kwargs: dict[str, Any],
) -> None:
    """The second line: admitted at rebuild by the program's own entry, refused by its
    real name, always refused, before it is called."""
    (victim / "okpkg.py").write_text(re_export(path))
    monkeypatch.syspath_prepend(str(victim))
    monkeypatch.delitem(sys.modules, "okpkg", raising=False)
    for entry in ("okpkg", "okpkg.*"):
        meta = target_meta({"_target_": "okpkg.keep", **kwargs})
        plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        with pytest.raises(UntrustedTarget, match="always refused") as caught:
            compute_fn(plan)("module")
        assert trust.refused_name(caught.value.real_name) is not None


# ------------------------------------------------------------------ the rule, as a rule


def installed_modules(package: str) -> list[str]:
    """Every module and package of ``package``'s installed tree, read from its folders
    (pkgutil.walk_packages would import each package to find its children)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations is not None
    return _walk_tree(package, list(spec.submodule_search_locations))


def _walk_tree(package: str, locations: list[str]) -> list[str]:
    found = [package]
    for info in pkgutil.iter_modules(locations):
        name = f"{package}.{info.name}"
        if info.ispkg:
            found += _walk_tree(name, [str(Path(location) / info.name) for location in locations])
        else:
            found.append(name)
    return found


def library_entries() -> list[str]:
    """Module and subtree entries over the standard library's top-level modules and over
    every module and package of torch's and numpy's installed trees."""
    modules = [*sorted(sys.stdlib_module_names), *installed_modules("torch")]
    modules += installed_modules("numpy")
    return [entry for module in modules for entry in (module, f"{module}.*")]


def test_every_module_and_subtree_entry_over_a_library_is_refused_naming_it() -> None:
    entries = library_entries()
    assert len(entries) > 2000  # the trees were read, not a list in the test
    before = set(sys.modules)
    admitted = []
    for entry in entries:
        try:
            trust.allow_list((entry,))
        except MetaError as refused:
            assert shown(entry) in str(refused)  # the entry, cut short past 60 characters
        else:
            admitted.append(entry)
    assert admitted == []
    assert set(sys.modules) - before == set()  # decided without importing what they name


def test_an_entry_over_this_runtime_or_a_distribution_it_depends_on_is_refused() -> None:
    """This runtime's packages and those of the distributions it requires, as the installed
    metadata lists them."""
    from importlib import metadata

    required = {
        re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement)[0]).lower()  # type: ignore[index]
        for requirement in metadata.requires("specgen") or ()
        if "extra" not in requirement
    }
    tops = {"shardplan", "specgen"}
    for name in required:
        tops |= set((metadata.distribution(name).read_text("top_level.txt") or name).split())
    assert {"torch", "msgspec", "orjson"} <= tops
    for top in sorted(tops):
        for entry in (top, f"{top}.*"):
            with pytest.raises(MetaError, match="not the program's own code"):
                trust.allow_list((entry,))


def test_module_and_subtree_entries_over_the_programs_own_package_admit_and_call(
    my_planner: Path,
) -> None:
    meta = target_meta({"_target_": "my_planner.models.fn", "k": 1})
    for entry in ("my_planner.models", "my_planner.*", "my_planner.models.*"):
        plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        assert compute_fn(plan)("module") == ("models.fn", {"k": 1})


def test_an_exact_entry_over_a_library_still_rebuilds_and_calls() -> None:
    meta = target_meta({"_target_": "json.dumps", "sort_keys": True})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
    assert compute_fn(plan)({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


# ------------------------------------------------------------- through apply_plan


@pytest.mark.parametrize(("path", "entries", "kwargs"), ATTACKS, ids=IDS)
def test_apply_plan_never_calls_an_attack(
    victim: Path,
    monkeypatch: pytest.MonkeyPatch,
    mesh: Any,
    path: str,
    entries: tuple[str, ...],
    kwargs: dict[str, Any],
) -> None:
    """As the issue ran it: the rule on model.layers.0.mlp, rebuilt, then apply_plan.
    Under the library entries rebuild refuses; a re-export the program's own entry admits
    reaches apply_plan and is refused there, before it is called."""
    from shardplan import apply_plan
    from shardplan.artifact.meta import meta_from_dict
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM

    def apply(document: dict[str, Any], allow: tuple[str, ...]) -> None:
        plan = impl.rebuild_live_plan_from_meta(meta_from_dict(document), allow_targets=allow)
        apply_plan(LlamaForCausalLM(LlamaConfig(n_layers=1)), plan, mesh)

    rule = {"match": "model.layers.0.mlp", "local_compute_fn": {"_target_": path, **kwargs}}
    for entry in entries:
        with pytest.raises(MetaError, match="not the program's own code"):
            apply(example_artifact_with(rule), (entry,))
    (victim / "okpkg.py").write_text(re_export(path))
    monkeypatch.syspath_prepend(str(victim))
    monkeypatch.delitem(sys.modules, "okpkg", raising=False)
    rule["local_compute_fn"] = {"_target_": "okpkg.keep", **kwargs}
    with pytest.raises(UntrustedTarget, match="always refused"):
        apply(example_artifact_with(rule), ("okpkg.*",))
