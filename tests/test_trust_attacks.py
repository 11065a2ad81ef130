"""Trust (docs/trust.md, docs/contract.md §8): the attacks an artifact could carry, and the
names refused whatever the list.

Every test runs against both implementations (tests/implementations.py). None may run,
import or write anything. Real process: only the check that refusing nothing imports
anything, which needs an interpreter that has not imported the dangerous modules already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shardplan.errors import UntrustedTarget
from tests.implementations import use_both_implementations
from tests.trust_helpers import (
    DANGEROUS,
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
def test_a_generic_dispatcher_is_refused_even_when_its_package_is_allowed(
    path: str, allowed: str
) -> None:
    with pytest.raises(UntrustedTarget, match="always refused") as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=(allowed,))
    assert caught.value.path == PLACE


def test_refusing_dangerous_callables_imports_nothing_and_writes_nothing(
    tmp_path: Path, implementation: str
) -> None:
    """In a fresh process, trying both implementations: refusing imports no module and
    writes no file."""
    if implementation != "generated":
        pytest.skip("one process tries both implementations")
    script = """\
import json, sys
from shardplan import api, reference
from shardplan.artifact.meta import meta_from_dict
from shardplan.errors import UntrustedTarget

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
print(json.dumps({"refused": refused, "new": sorted(set(sys.modules) - before),
                  "absent": sorted({p.split(".")[0] for p in paths} - before)}))
"""
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(DANGEROUS)],
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
    assert list(tmp_path.iterdir()) == []


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
            except ValueError as refused_entry:  # an entry naming it would allow nothing
                assert "always refused" in str(refused_entry) and entries == (path,)
                continue
            with pytest.raises(UntrustedTarget):  # pragma: no cover - none gets here
                getattr(plan.modules["m"], key)("module")
            raise AssertionError(f"{path} under {entries} was admitted at rebuild")
    assert not (tmp_path / "pwned.txt").exists() and list(tmp_path.iterdir()) == []
    assert set(sys.modules) - before == set()
