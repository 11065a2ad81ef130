"""Trust (docs/contract.md §8, issue #18): an artifact names only callables the calling
program allowed.

Every test runs against both implementations (tests/implementations.py). The attacks
are tried as an artifact would carry them; none may run, import or write anything.

Real process: only the check that refusing nothing imports anything, which needs an
interpreter that has not imported the dangerous modules already.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardplan.artifact.meta import CodegenMeta, load_meta, meta_from_dict
from shardplan.convert import trust
from shardplan.convert.kinds import rebuild_injection_target
from shardplan.convert.targets import Target
from shardplan.errors import MetaError, UntrustedTarget
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.helpers import QWEN3_MOE, shared_fixture
from tests.implementations import use_both_implementations

impl: Any = None
implementation = use_both_implementations(__name__)

PLACE = "injections[0].local_compute_fn"
PWNED = "echo PWNED > pwned.txt"

# Callables no artifact should make a trainer call; each is refused by default.
DANGEROUS = [
    "os.system",
    "os.popen",
    "os.execv",
    "os.spawnv",
    "os.remove",
    "os.kill",
    "posix.system",
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.call",
    "subprocess.check_output",
    "subprocess.getoutput",
    "builtins.eval",
    "builtins.exec",
    "builtins.compile",
    "builtins.getattr",
    "builtins.open",
    "builtins.__import__",
    "pickle.loads",
    "marshal.loads",
    "runpy.run_path",
    "runpy.run_module",
    "shutil.rmtree",
    "ctypes.CDLL",
    "code.interact",
    "pty.spawn",
    "importlib.import_module",
    "functools.partial",
    "operator.attrgetter",
    "operator.methodcaller",
    "timeit.timeit",
    "logging.config.dictConfig",
    "pydoc.locate",
    "webbrowser.open",
    "torch.hub.load",
    "torch.load",
    "shardplan.convert.targets.Target.from_dict",
]

OKPKG_SOURCE = """\
import functools
import os
import subprocess
from subprocess import run as go

CALLS = []
sub = subprocess
Popen = subprocess.Popen
shell = os.system
bound = functools.partial(subprocess.run, "echo PWNED > pwned.txt", shell=True)


def fine(*args, **kwargs):
    CALLS.append((args, kwargs))
    return kwargs
"""


def meta_with(*rules: dict[str, Any], **top: Any) -> CodegenMeta:
    """A meta with one entry per rule's module and the given rules."""
    param_plan = {rule["match"]: {} for rule in rules}
    return meta_from_dict(
        {"param_plan": param_plan, "mesh_dim_names": [], "injections": list(rules), **top}
    )


def target_meta(target: Any, key: str = "local_compute_fn") -> CodegenMeta:
    return meta_with({"match": "m", key: target})


def compute_fn(plan: ShardingPlan, fqn: str = "m") -> Any:
    return plan.modules[fqn].local_compute_fn


@pytest.fixture
def okpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An importable package ``okpkg`` re-exporting subprocess.run as ``go``, run in tmp."""
    (tmp_path / "okpkg.py").write_text(OKPKG_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("okpkg", None)
    yield tmp_path
    sys.modules.pop("okpkg", None)


# ------------------------------------------------------------------ the issue's artifact


def test_the_issue_artifact_is_refused_at_rebuild_naming_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    meta = target_meta({"_target_": "subprocess.run", "args": PWNED, "shell": True})
    with pytest.raises(MetaError) as caught:
        impl.rebuild_live_plan_from_meta(meta)
    assert isinstance(caught.value, UntrustedTarget)
    assert caught.value.path == PLACE
    assert "allow_targets" in str(caught.value) and "subprocess.run" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_allowed_package_re_exporting_subprocess_run_rebuilds_but_refuses_at_resolution(
    okpkg: Path,
) -> None:
    meta = meta_with(
        {"match": "m", "local_compute_fn": {"_target_": "okpkg.go", "args": PWNED, "shell": True}},
        {"match": "n", "local_compute_fn": {"_target_": "okpkg.fine", "k": [1, 2]}},
    )
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("okpkg",))
    assert "okpkg" not in sys.modules  # rebuilding imports nothing
    with pytest.raises(UntrustedTarget) as caught:
        compute_fn(plan, "m")("module")
    message = str(caught.value)
    assert caught.value.path == PLACE and "okpkg.go" in message and "subprocess.run" in message
    assert (caught.value.target, caught.value.real_name) == ("okpkg.go", "subprocess.run")
    assert not (okpkg / "pwned.txt").exists()
    assert compute_fn(plan, "n")("module") == {"k": [1, 2]}
    assert sys.modules["okpkg"].CALLS == [(("module",), {"k": [1, 2]})]


# -------------------------------------------------------------------- default deny


@pytest.mark.parametrize("path", DANGEROUS)
def test_a_dangerous_callable_is_refused_by_default(path: str) -> None:
    with pytest.raises(UntrustedTarget) as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path, "args": PWNED}))
    assert caught.value.path == PLACE and caught.value.target == path


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


def test_lenient_rebuild_refuses_untrusted_targets_too() -> None:
    with pytest.raises(UntrustedTarget):
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "os.system", "command": "true"}), strict=False
        )


@pytest.mark.parametrize("key", ["inner_wrapper", "inner_out_src", "local_compute_fn"])
def test_every_target_field_is_checked_at_its_own_place(key: str) -> None:
    with pytest.raises(UntrustedTarget) as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": "os.system"}, key))
    assert caught.value.path == f"injections[0].{key}"


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


@pytest.mark.parametrize(
    "path",
    [
        "okpkg.fine.__globals__",
        "okpkg.__builtins__.eval",
        "okpkg.fine.__call__",
        "okpkg.__init__.fine",
        "okpkg.__loader__.load_module",
        "okpkg.fine.__code__.replace",
        "okpkg.____",
    ],
)
def test_a_dunder_segment_is_always_refused(path: str) -> None:
    with pytest.raises(UntrustedTarget, match="dunder") as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=("okpkg",))
    assert caught.value.path == PLACE


@pytest.mark.parametrize(
    ("attribute", "real_name"),
    [
        ("go", "subprocess.run"),
        ("Popen", "subprocess.Popen"),
        ("shell", "posix.system"),
        ("bound", "functools.partial"),
        ("sub", "<module 'subprocess'"),
        ("sub.run", "subprocess"),  # refused at the step through subprocess
        ("bound.func", "functools.partial("),  # an instance is not stepped through
    ],
)
def test_a_re_export_does_not_launder_its_real_name(
    okpkg: Path, attribute: str, real_name: str
) -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": f"okpkg.{attribute}", "args": PWNED, "shell": True}),
        allow_targets=("okpkg",),
    )
    target = compute_fn(plan)
    for _ in range(2):  # refused again on a second try: nothing was cached
        with pytest.raises(UntrustedTarget, match="nothing was called") as caught:
            target()
        assert caught.value.real_name.startswith(real_name)
    assert not (okpkg / "pwned.txt").exists()


def test_a_rebuilt_target_whose_path_is_reassigned_is_checked_again_at_resolution(
    okpkg: Path,
) -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "okpkg.fine"}), allow_targets=("okpkg",)
    )
    target = compute_fn(plan)
    target.path = "shutil.rmtree"
    with pytest.raises(UntrustedTarget, match="not allowed"):
        target.resolve()


# ----------------------------------------------------------------- prefix tricks


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("hyper_parallel_evil.fn", ("hyper_parallel",)),
        ("hyper_parallelx.models.fn", ("hyper_parallel",)),
        ("hyper.parallel.fn", ("hyper_parallel",)),
        ("Hyper_parallel.fn", ("hyper_parallel",)),
        ("hyper_parallel.fn", ("hyper_parallel.models",)),
        ("hyper_parallel.models_evil.fn", ("hyper_parallel.models",)),
        ("evil.hyper_parallel.fn", ("hyper_parallel",)),
        ("okpkg_fine.fn", ("okpkg", "okpkg.fine")),
    ],
)
def test_a_prefix_matches_only_at_dot_boundaries(path: str, allowed: tuple[str, ...]) -> None:
    with pytest.raises(UntrustedTarget, match="not allowed"):
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=allowed)


def test_a_path_under_an_allowed_prefix_rebuilds_without_importing() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "hyper_parallel.models.x.fn", "k": 1}),
        allow_targets=("hyper_parallel",),
    )
    assert compute_fn(plan) == Target("hyper_parallel.models.x.fn", k=1)
    assert "hyper_parallel" not in sys.modules


@pytest.mark.parametrize(
    "path",
    [
        "\u0455ubprocess.run",  # Cyrillic dze for s
        "\uff4f\uff53.system",  # fullwidth os
        "hyper_par\u0430llel.fn",  # Cyrillic a
        "okpkg.\ufb01ne",  # the fi ligature, "fine" after NFKC
        "okpkg.fi\u200bne",  # zero-width space
        "okpkg.fine\u0301",  # combining accent
        "okpkg.fine\n",
        "okpkg..fine",
        " okpkg.fine",
    ],
    ids=ascii,
)
def test_a_look_alike_path_is_a_meta_error_before_any_trust_decision(path: str) -> None:
    with pytest.raises(MetaError, match="dotted import path") as caught:
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": path}), allow_targets=("okpkg", "hyper_parallel")
        )
    assert caught.value.path == f'{PLACE}["_target_"]'


def test_an_overlong_path_under_an_allowed_prefix_is_refused() -> None:
    path = "okpkg." + "a." * 300 + "fn"
    with pytest.raises(UntrustedTarget, match="at most 512"):
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=("okpkg",))


def test_a_megabyte_path_is_refused_with_a_short_message() -> None:
    path = "evil." + "a" * 2**20
    with pytest.raises(UntrustedTarget) as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}))
    assert len(str(caught.value)) < 300


# ------------------------------------------------------------------- the allow-list


@pytest.mark.parametrize(
    ("allow_targets", "error"),
    [
        ("hyper_parallel", TypeError),
        (b"hyper_parallel", TypeError),
        (3, TypeError),
        (None, TypeError),
        ((3,), TypeError),
        (("",), ValueError),
        (("hyper_parallel.",), ValueError),
        (("*",), ValueError),
        (("hyper_*",), ValueError),
        (("okpkg.__builtins__",), ValueError),
        (("importlib",), ValueError),
        (("builtins.eval",), ValueError),
        (("hyper_par\u0430llel",), ValueError),
    ],
    ids=repr,
)
def test_a_malformed_allow_list_is_refused_clearly(allow_targets: Any, error: type) -> None:
    with pytest.raises(error, match="allow_targets"):
        impl.rebuild_live_plan_from_meta(target_meta("sdpa_qkv"), allow_targets=allow_targets)


def test_a_bare_string_allow_list_says_how_to_write_a_tuple() -> None:
    with pytest.raises(TypeError, match=r"\('hyper_parallel',\)"):
        impl.rebuild_live_plan_from_meta(target_meta("sdpa_qkv"), allow_targets="hyper_parallel")


def test_rebuild_plan_takes_the_allow_list_too() -> None:
    meta = target_meta({"_target_": "okpkg.fine"})
    with pytest.raises(UntrustedTarget):
        impl.rebuild_plan(meta)
    assert compute_fn(impl.rebuild_plan(meta, allow_targets=("okpkg",))) == Target("okpkg.fine")


def test_a_list_allow_list_is_accepted() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "okpkg.fine"}), allow_targets=["okpkg"]
    )
    assert compute_fn(plan) == Target("okpkg.fine")


# ----------------------------------------------------------- what stays as it was


def test_a_registry_name_is_not_a_target_and_needs_no_allow_list() -> None:
    meta = meta_with({"match": "m", "inner_wrapper": "sdpa_qkv", "local_compute_fn": "ep"})
    plan = impl.rebuild_live_plan_from_meta(meta)
    assert (plan.modules["m"].inner_wrapper, compute_fn(plan)) == ("sdpa_qkv", "ep")


def test_a_nested_target_in_kwargs_stays_plain_data() -> None:
    nested = {"_target_": "os.system", "command": PWNED}
    meta = target_meta({"_target_": "okpkg.fine", "inner": nested})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("okpkg",))
    assert compute_fn(plan).kwargs == {"inner": nested}
    assert type(compute_fn(plan).kwargs["inner"]) is dict
    assert impl.freeze_plan(plan).injections == meta.injections


def test_a_rebuilt_target_equals_hashes_and_freezes_like_one_built_in_python() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "okpkg.fine", "k": 1}), allow_targets=("okpkg",)
    )
    built = Target("okpkg.fine", k=1)
    assert compute_fn(plan) == built and hash(compute_fn(plan)) == hash(built)
    assert compute_fn(plan).to_dict() == built.to_dict()


def test_a_plan_built_in_python_freezes_and_resolves_as_before() -> None:
    plan = ShardingPlan(
        modules={"m": ModuleShardingSpec(local_compute_fn=Target("json.dumps", sort_keys=True))}
    )
    meta = impl.freeze_plan(plan)
    assert meta.injections == [
        {"match": "m", "local_compute_fn": {"_target_": "json.dumps", "sort_keys": True}}
    ]
    assert plan.modules["m"].local_compute_fn({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_an_allowed_stdlib_target_resolves_under_its_real_module() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "json.dumps", "sort_keys": True}), allow_targets=("json",)
    )
    assert compute_fn(plan)({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


# ------------------------------------------------------------------- the scope


def test_the_scope_ends_with_the_rebuild_even_when_it_fails() -> None:
    with pytest.raises(MetaError):
        impl.rebuild_live_plan_from_meta(
            meta_with({"match": "m", "bogus": 1}), allow_targets=("okpkg",)
        )
    with pytest.raises(UntrustedTarget):
        rebuild_injection_target({"_target_": "okpkg.fine"}, PLACE)


def test_outside_a_rebuild_the_rebuild_kind_admits_nothing() -> None:
    with pytest.raises(UntrustedTarget, match="no Target is allowed"):
        rebuild_injection_target({"_target_": "json.dumps"}, PLACE)
    with trust.allowing_targets(("json",)):
        assert rebuild_injection_target({"_target_": "json.dumps"}, PLACE) == Target("json.dumps")


def test_another_thread_does_not_inherit_the_allow_list() -> None:
    outcome: list[BaseException] = []

    def rebuild_in_thread() -> None:
        try:
            rebuild_injection_target({"_target_": "json.dumps"}, PLACE)
        except UntrustedTarget as exc:
            outcome.append(exc)

    with trust.allowing_targets(("json",)):
        thread = threading.Thread(target=rebuild_in_thread)
        thread.start()
        thread.join()
    assert len(outcome) == 1


def test_a_functools_partial_target_built_in_python_is_still_trusted_code() -> None:
    target = Target("functools.partial")
    assert target.resolve() is functools.partial


# ------------------------------------------------------------------ the prefix rule


segments = st.sampled_from(
    ["a", "ab", "a_b", "b", "hp", "hp_evil", "_", "__x__", "os", "system", "builtins", "eval"]
)
dotted = st.lists(segments, min_size=1, max_size=4).map(".".join)
allow_lists = st.lists(dotted, max_size=3).map(tuple)


def is_allowed_as_stated(path: str, prefixes: tuple[str, ...]) -> bool:
    """The rule in words: some prefix's segments are the path's first segments."""
    parts = path.split(".")
    return any(parts[: len(p.split("."))] == p.split(".") for p in prefixes)


@given(path=dotted, prefixes=allow_lists)
def test_under_prefix_is_the_dot_boundary_rule(path: str, prefixes: tuple[str, ...]) -> None:
    """Law: under_prefix(path, P) iff some p in P has its segments leading the path's."""
    assert trust.under_prefix(path, prefixes) is is_allowed_as_stated(path, prefixes)


@given(path=dotted, prefixes=allow_lists)
def test_a_path_is_admitted_exactly_when_allowed_and_not_always_refused(
    path: str, prefixes: tuple[str, ...]
) -> None:
    """Law: refusal(path, P) is None iff the path is under P, has no dunder segment and
    lies under no always-refused name."""
    dunder = any(s.startswith("__") and s.endswith("__") for s in path.split("."))
    parts = path.split(".")
    refused = any(".".join(parts[:n]) in trust.ALWAYS_REFUSED for n in range(1, len(parts) + 1))
    expected = is_allowed_as_stated(path, prefixes) and not dunder and not refused
    assert (trust.refusal(path, prefixes) is None) is expected


# ------------------------------------------------------------ the upstream artifact


def test_the_shared_fixture_round_trips_with_only_its_package_allowed() -> None:
    meta = load_meta(shared_fixture(QWEN3_MOE))
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("hyper_parallel",))
    again = impl.freeze_plan(plan)
    assert json.dumps(again.param_plan, indent=2, sort_keys=True) == json.dumps(
        meta.param_plan, indent=2, sort_keys=True
    )
    assert {r["match"]: r for r in again.injections} == {r["match"]: r for r in meta.injections}
    with pytest.raises(UntrustedTarget, match="hyper_parallel"):
        impl.rebuild_live_plan_from_meta(meta)
