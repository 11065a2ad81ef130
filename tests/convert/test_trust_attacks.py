"""Trust (docs/trust.md, docs/contract.md §8): the attacks an artifact could carry, and the
names refused whatever the list.

Every test runs against both implementations (tests/implementations.py). None may run,
import or write anything. Real process: only the check that refusing nothing imports
anything, which needs an interpreter that has not imported the dangerous modules already.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shardplan.convert import trust
from shardplan.errors import MetaError, UntrustedTarget
from tests.helpers import REPO
from tests.implementations import use_both_implementations
from tests.trust_helpers import (
    DANGEROUS,
    OKPKG_SOURCE,
    PLACE,
    PWNED,
    target_meta,
)

impl: Any = None
implementation = use_both_implementations(__name__)


# ------------------------------------------------------------------ always refused


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("builtins.eval", "builtins"),
        ("builtins.exec", "builtins"),
        ("builtins.compile", "builtins"),
        ("builtins.getattr", "builtins"),
        ("builtins.setattr", "builtins"),
        ("functools.partial", "functools"),
        ("operator.attrgetter", "operator"),
        ("operator.methodcaller", "operator"),
        ("operator.itemgetter", "operator"),
        ("os.system", "os"),
        ("posix.system", "posix"),
        ("sys.call_tracing", "sys"),
        ("types.FunctionType", "types"),
        ("torch.hub.load", "torch"),
        ("torch.utils.cpp_extension.load_inline", "torch"),
        ("shardplan.convert.targets._import_path", "shardplan"),
    ],
)
def test_a_generic_dispatcher_is_refused_under_any_entry_naming_it(path: str, allowed: str) -> None:
    """Its package as a module or subtree entry is someone else's code, refused when rebuild
    starts; named exactly, it would allow nothing."""
    meta = target_meta({"_target_": path})
    for entries in ((allowed,), (f"{allowed}.*",)):
        with pytest.raises(MetaError, match="not the program's own code") as caught:
            impl.rebuild_live_plan_from_meta(meta, allow_targets=entries)
        assert not isinstance(caught.value, UntrustedTarget)
    with pytest.raises(MetaError, match="would allow nothing"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=(path,))


def test_a_generic_dispatcher_re_exported_by_the_programs_package_is_refused_at_first_call(
    okpkg: Path,
) -> None:
    (okpkg / "okpkg.py").write_text(OKPKG_SOURCE + "from builtins import eval as run_text\n")
    meta = target_meta({"_target_": "okpkg.run_text", "source": "open('pwned.txt', 'w')"})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("okpkg",))
    with pytest.raises(UntrustedTarget, match="always refused") as caught:
        plan.modules["m"].local_compute_fn()
    assert caught.value.real_name == "builtins.eval"
    assert not (okpkg / "pwned.txt").exists()


@pytest.mark.processes
def test_refusing_dangerous_callables_imports_nothing_and_writes_nothing(
    tmp_path: Path, implementation: str
) -> None:
    """In a fresh process, trying both implementations: refusing imports no module and
    writes no file; each row of INTERNALS_AND_WRITERS is refused the same way before and
    after the process imported torch._inductor.metrics and async_compile."""
    if implementation != "generated":
        pytest.skip("one process tries both implementations")
    script = """\
import json, sys
from shardplan import api, reference
from shardplan.artifact.meta import meta_from_dict
from shardplan.convert import trust
from shardplan.errors import MetaError, UntrustedTarget
from tests.helpers import REPO

def meta(target):
    return meta_from_dict({"param_plan": {"m": {}}, "mesh_dim_names": [],
        "injections": [{"match": "m", "local_compute_fn": target}]})

for impl in (api, reference):  # warm up on an artifact that names no Target
    impl.rebuild_live_plan_from_meta(meta("sdpa_qkv"))
paths = json.loads(sys.argv[1])
before = set(sys.modules)
refused = []
for impl in (api, reference):
    for path in paths:
        target = {"_target_": path, "args": "echo PWNED > pwned.txt", "shell": True}
        try:
            impl.rebuild_live_plan_from_meta(meta(target), strict=False)
        except UntrustedTarget as exc:
            refused.append(exc.path)
new = sorted(set(sys.modules) - before)
rows = json.loads(sys.argv[2])

def outcomes():
    seen = []
    for impl in (api, reference):
        for allowed, path, kwargs, _ in rows:
            try:
                impl.rebuild_live_plan_from_meta(meta({"_target_": path, **kwargs}),
                                                 allow_targets=tuple(allowed))
            except UntrustedTarget:
                seen.append("refused at rebuild")
            except MetaError:
                seen.append("entry refused")
            else:
                seen.append("admitted")  # never called here: the test fails on it
    return seen

fresh = "torch._inductor" not in sys.modules
before_import = outcomes()
import torch._inductor.async_compile, torch._inductor.metrics
print(json.dumps({"refused": refused, "new": new, "fresh": fresh,
                  "absent": sorted({p.split(".")[0] for p in paths} - before),
                  "before_import": before_import, "after_import": outcomes()}))
"""
    root = REPO
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(DANGEROUS), json.dumps(INTERNALS_AND_WRITERS)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    outcome = json.loads(result.stdout)
    assert outcome["refused"] == [PLACE] * (2 * len(DANGEROUS))
    assert outcome["new"] == []
    assert {"code", "pty", "webbrowser"} <= set(outcome["absent"])  # really not imported
    # The same artifacts and lists, before and after the process imported torch's compiler:
    expected = [row[3] for row in INTERNALS_AND_WRITERS] * 2
    assert outcome["fresh"] and outcome["before_import"] == outcome["after_import"] == expected
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------- private internals and file writers

# A constructor that writes pwned.txt when the library holding it is loaded.
CPP = '#include <cstdio>\nstruct P { P() { std::fopen("pwned.txt", "w"); } } p;\n'
RUN_TEXT = "open('pwned.txt', 'w').write('PWNED')"
VICTIM = "victim.bin"

# (allow_targets, path, kwargs, outcome): a private callable of torch's compiler reached
# through a subtree, and a file writer through a module entry, both refused as entries over
# someone else's code before any path is resolved.
INTERNALS_AND_WRITERS: list[tuple[tuple[str, ...], str, dict[str, Any], str]] = [
    (
        ("torch.*",),
        "torch._inductor.metrics._parse_kernel_fn_code",
        {"kernel_module_code": RUN_TEXT},
        "entry refused",
    ),
    (
        ("torch._inductor.*",),
        "torch._inductor.metrics._parse_kernel_fn_code",
        {"kernel_module_code": RUN_TEXT},
        "entry refused",
    ),
    (
        ("torch.*",),
        "torch._inductor.async_compile.AsyncCompile.cpp",
        {"self": 0, "source_code": CPP},
        "entry refused",
    ),
    (
        ("torch.*",),
        "torch._inductor.async_compile.AsyncCompile.cpp_pybinding",
        {"self": 0, "argtypes": [], "source_code": CPP},
        "entry refused",
    ),
    (
        ("numpy",),
        "numpy.memmap",
        {"filename": VICTIM, "mode": "w+", "shape": [4]},
        "entry refused",
    ),
    (("torch",), "torch.save", {"obj": 1, "f": VICTIM}, "entry refused"),
    (
        ("torch",),
        "torch.from_file",
        {"filename": "new.bin", "shared": True, "size": 4},
        "entry refused",
    ),
    # the same, each named exactly: always refused, so the entry would allow nothing
    (
        ("torch._inductor.metrics._parse_kernel_fn_code",),
        "torch._inductor.metrics._parse_kernel_fn_code",
        {"kernel_module_code": RUN_TEXT},
        "entry refused",
    ),
    (("torch.save",), "torch.save", {"obj": 1, "f": VICTIM}, "entry refused"),
]


def outcome(allowed: tuple[str, ...], path: str, kwargs: dict[str, Any], key: str) -> str:
    """What rebuilding a Target at ``key`` under ``allowed``, then calling it, does."""
    meta = target_meta({"_target_": path, **kwargs}, key)
    try:
        plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=allowed)
    except UntrustedTarget as refused:
        assert refused.path == f"injections[0].{key}" and refused.target == path
        return "refused at rebuild"
    except MetaError as refused_entry:
        assert allowed[0] in str(refused_entry)  # names the entry
        return "entry refused"
    try:
        getattr(plan.modules["m"], key)("module")
    except UntrustedTarget:
        return "refused at first call"
    return "ran"


@pytest.mark.parametrize(
    ("allowed", "path", "kwargs", "expected"),
    INTERNALS_AND_WRITERS,
    ids=[f"{row[1]}-under-{row[0][0]}" for row in INTERNALS_AND_WRITERS],
)
@pytest.mark.parametrize(
    "imported_first", ["as-the-process-stands", "torch._inductor.metrics+async_compile"]
)
def test_a_private_internal_or_a_file_writer_is_refused_whatever_was_imported_first(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    allowed: tuple[str, ...],
    path: str,
    kwargs: dict[str, Any],
    expected: str,
    imported_first: str,
) -> None:
    """Nothing runs, no file changes, and the outcome is the same once torch's compiler
    is imported (the fresh process above tries it with torch._inductor never imported)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / VICTIM).write_bytes(b"keep\n")
    if imported_first != "as-the-process-stands":
        importlib.import_module("torch._inductor.metrics")
        importlib.import_module("torch._inductor.async_compile")
    for key in ("local_compute_fn", "inner_wrapper", "inner_out_src"):
        assert outcome(allowed, path, kwargs, key) == expected
    assert [p.name for p in tmp_path.iterdir()] == [VICTIM]
    assert (tmp_path / VICTIM).read_bytes() == b"keep\n"


def test_a_private_subtree_entry_of_torch_is_a_meta_error_naming_it() -> None:
    meta = target_meta({"_target_": "torch._inductor.metrics._parse_kernel_fn_code"})
    with pytest.raises(MetaError) as caught:
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("torch._inductor.*",))
    message = str(caught.value)
    assert not isinstance(caught.value, UntrustedTarget)
    assert "'torch._inductor.*'" in message and "'_inductor' is private" in message
    assert "torch._inductor is always refused" in message


WRITERS = [
    "numpy.memmap",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.savetxt",
    "torch.save",
    "torch.from_file",
]


@pytest.mark.parametrize("path", WRITERS)
def test_a_file_writer_is_refused_by_its_real_name_under_any_entry(path: str, okpkg: Path) -> None:
    module, _, name = path.rpartition(".")
    writer = getattr(importlib.import_module(module), name)
    real_name = f"{writer.__module__}.{writer.__qualname__}"  # on the installed version
    assert trust.refused_name(real_name) is not None, real_name
    meta = target_meta({"_target_": path})
    for entries in ((module,), (f"{module}.*",)):
        with pytest.raises(MetaError, match="not the program's own code"):
            impl.rebuild_live_plan_from_meta(meta, allow_targets=entries)
    with pytest.raises(MetaError, match="would allow nothing"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=(path,))
    (okpkg / "okpkg.py").write_text(OKPKG_SOURCE + f"from {module} import {name} as keep\n")
    for entries in (("okpkg",), ("okpkg.*",)):
        plan = impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "okpkg.keep"}), allow_targets=entries
        )
        # refused by its real name, or (numpy's dispatchers) as an instance, never called
        with pytest.raises(UntrustedTarget, match="always refused|not a function or a class"):
            plan.modules["m"].local_compute_fn()


def test_a_file_writer_named_exactly_by_another_path_is_refused_at_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / VICTIM).write_bytes(b"keep\n")
    path = "numpy._core.memmap.memmap"
    kwargs = {"filename": VICTIM, "mode": "w+", "shape": [4]}
    meta = target_meta({"_target_": path, **kwargs})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=(path,))
    with pytest.raises(UntrustedTarget, match="always refused") as caught:
        plan.modules["m"].local_compute_fn()
    assert caught.value.real_name == "numpy.memmap"
    assert (tmp_path / VICTIM).read_bytes() == b"keep\n"


# ------------------------------------------------------------ the documented list


def refused_table() -> str:
    """docs/trust.md's table of ALWAYS_REFUSED: one row per reason, in the list's order."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in trust.ALWAYS_REFUSED.items():
        by_reason.setdefault(reason, []).append(f"`{name}`")
    rows = ["| Refused because it | Names |", "|---|---|"]
    rows += [f"| {reason} | {', '.join(names)} |" for reason, names in by_reason.items()]
    return "\n".join(rows) + "\n"


def test_docs_trust_lists_every_always_refused_name_with_its_reason() -> None:
    page = (REPO / "docs" / "trust.md").read_text()
    assert refused_table() in page, (
        "docs/trust.md's table of always-refused names differs from "
        "shardplan.convert.trust.ALWAYS_REFUSED; paste the output of "
        "`python -c 'from tests.convert.test_trust_attacks import refused_table; "
        "print(refused_table())'`"
    )


# ------------------------------------------------------------- the issue's attacks


ATTACKS = [
    (("torch",), "torch.utils.collect_env.run", {"command": PWNED}),
    (("torch",), "torch.fx.graph_module._exec_with_source", {"src": "open('pwned.txt','w')"}),
    (("torch",), "torch.fx.graph_module._method_from_src", {"method_name": "f", "src": "x"}),
    (("torch",), "torch._inductor.codecache.PyCodeCache.load", {"source_code": "x"}),
    (("torch",), "torch._inductor.cpp_builder.run_compile_cmd", {"cmd_line": PWNED}),
    (("torch",), "torch.ops.load_library", {"path": "libpwned.so"}),
    (
        ("torch.distributed",),
        "torch.distributed.elastic.multiprocessing.subprocess_handler.SubprocessHandler",
        {"entrypoint": "sh", "args": ["-c", PWNED]},
    ),
    (("numpy",), "numpy.testing.runstring", {"astr": "open('pwned.txt','w')"}),
    (("numpy",), "numpy.load", {"file": "evil.npy", "allow_pickle": True}),
    (("numpy",), "numpy.ctypeslib.load_library", {"libname": "pwned", "loader_path": "."}),
]


@pytest.mark.parametrize(("allowed", "path", "kwargs"), ATTACKS, ids=[a[1] for a in ATTACKS])
@pytest.mark.parametrize("strict", [True, False])
def test_each_attack_of_the_issue_is_refused_and_nothing_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    allowed: tuple[str, ...],
    path: str,
    kwargs: dict[str, Any],
    strict: bool,
) -> None:
    """Under the allow-list the issue shows and under the exact path itself: refused at
    rebuild (the first line), or at the first call, before anything runs or imports."""
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    for entries in (allowed, (path,), (f"{allowed[0]}.*",)):
        for key in ("local_compute_fn", "inner_wrapper", "inner_out_src"):
            meta = target_meta({"_target_": path, **kwargs}, key)
            try:
                plan = impl.rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=entries)
            except UntrustedTarget as refused:
                assert refused.path == f"injections[0].{key}"
                continue
            except ValueError as refused_entry:  # someone else's module, or always refused
                message = str(refused_entry)
                if entries == (path,):
                    assert "would allow nothing" in message and "always refused" in message
                else:
                    assert "not the program's own code" in message
                continue
            with pytest.raises(UntrustedTarget):  # pragma: no cover - none gets here
                getattr(plan.modules["m"], key)("module")
            raise AssertionError(f"{path} under {entries} was admitted at rebuild")
    assert not (tmp_path / "pwned.txt").exists() and list(tmp_path.iterdir()) == []
    assert set(sys.modules) - before == set()
