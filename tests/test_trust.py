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

from shardplan.artifact.meta import CodegenMeta, load_meta, meta_from_dict, meta_to_json
from shardplan.convert import trust
from shardplan.convert.kinds import rebuild_injected
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError, MetaError, UntrustedTarget
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
        ("sub", "subprocess"),
        ("sub.run", "subprocess"),  # refused at the step through subprocess
        ("bound.func", "functools.partial"),  # an instance is not stepped through
    ],
)
def test_a_re_export_does_not_launder_its_real_name(
    okpkg: Path, attribute: str, real_name: str
) -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": f"okpkg.{attribute}", "args": PWNED, "shell": True}),
        allow_targets=("okpkg.*",),
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


def test_a_path_under_an_allowed_subtree_rebuilds_without_importing() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "hyper_parallel.models.x.fn", "k": 1}),
        allow_targets=("hyper_parallel.*",),
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
        rebuild_injected({"_target_": "okpkg.fine"}, PLACE)


def test_outside_a_rebuild_the_rebuild_kind_admits_nothing() -> None:
    with pytest.raises(UntrustedTarget, match="no Target is allowed"):
        rebuild_injected({"_target_": "json.dumps"}, PLACE)
    with trust.allowing_targets(("json",)):
        assert rebuild_injected({"_target_": "json.dumps"}, PLACE) == Target("json.dumps")


def test_another_thread_does_not_inherit_the_allow_list() -> None:
    outcome: list[BaseException] = []

    def rebuild_in_thread() -> None:
        try:
            rebuild_injected({"_target_": "json.dumps"}, PLACE)
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


# ------------------------------------------------------------- what an entry names


segments = st.sampled_from(
    ["a", "ab", "a_b", "b", "_p", "hp", "hp_evil", "__x__", "os", "system", "builtins", "eval"]
)
dotted = st.lists(segments, min_size=1, max_size=4).map(".".join)
entries = st.one_of(dotted, dotted.map(lambda d: d + ".*"))
allow_lists = st.lists(entries, max_size=3).map(tuple)


def is_admitted_as_stated(path: str, entries: tuple[str, ...]) -> bool:
    """The README's rule in words: "a.b.fn" admits that path; "a.b" admits a.b.name for a
    public name; "a.b.*" admits every path below a.b."""
    module, _, name = path.rpartition(".")
    for entry in entries:
        if entry.endswith(".*"):
            if path.split(".")[: len(entry.split(".")) - 1] == entry.split(".")[:-1] and len(
                path.split(".")
            ) >= len(entry.split(".")):
                return True
        elif path == entry or (module == entry and not name.startswith("_")):
            return True
    return False


@given(path=dotted, entries=allow_lists)
def test_a_path_is_admitted_exactly_as_the_entries_name_it(
    path: str, entries: tuple[str, ...]
) -> None:
    """Law: refusal(path, A) is None iff an entry admits the path as stated, it has no
    dunder segment and it lies under no always-refused name."""
    try:
        allowed = trust.allow_list(entries)
    except ValueError:
        return  # an entry that would allow nothing: refused on its own
    parts = path.split(".")
    dunder = any(s.startswith("__") and s.endswith("__") for s in parts)
    refused = any(".".join(parts[:n]) in trust.ALWAYS_REFUSED for n in range(1, len(parts) + 1))
    expected = is_admitted_as_stated(path, entries) and not dunder and not refused
    assert (trust.refusal(path, allowed) is None) is expected


def test_a_module_entry_admits_its_own_callables_not_its_submodules() -> None:
    meta = target_meta({"_target_": "json.decoder.scanstring"})
    with pytest.raises(UntrustedTarget, match="not those of its submodules"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("json",))
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "json.dumps"}), allow_targets=("json",)
    )
    assert compute_fn(plan)([1]) == "[1]"


def test_a_module_entry_refuses_a_callable_defined_elsewhere_at_first_call(okpkg: Path) -> None:
    (okpkg / "okpkg.py").write_text(OKPKG_SOURCE + "from json import dumps\n")
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "okpkg.dumps"}), allow_targets=("okpkg",)
    )
    with pytest.raises(UntrustedTarget, match="real name") as caught:
        compute_fn(plan)([1])
    assert caught.value.real_name == "json.dumps"


def test_a_module_entry_does_not_admit_private_names() -> None:
    with pytest.raises(UntrustedTarget, match="public names"):
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "json._default_encoder"}), allow_targets=("json",)
        )


def test_an_exact_entry_admits_that_one_callable() -> None:
    allowed = ("json.decoder.scanstring",)
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "json.decoder.scanstring"}), allow_targets=allowed
    )
    assert compute_fn(plan)('"a"', 1) == ("a", 3)
    with pytest.raises(UntrustedTarget, match="not allowed"):
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "json.decoder.JSONDecoder"}), allow_targets=allowed
        )


@pytest.mark.parametrize("entry", ["*", "hyper_*", "a.*.b", ".*", "a.**"])
def test_a_wildcard_is_only_a_last_dot_star_segment(entry: str) -> None:
    with pytest.raises(ValueError, match="allow_targets entry"):
        trust.allow_list((entry,))


# ------------------------------------------------------------------ bound callables


def bound_compute(*args: Any, **kwargs: Any) -> Any:
    return ("bound", args, kwargs)


def test_a_bound_path_calls_the_program_callable_and_imports_nothing() -> None:
    path = "hyper_parallel.models.x.fn"
    meta = target_meta({"_target_": path, "k": 1})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets={path: bound_compute})
    assert compute_fn(plan)("module") == ("bound", ("module",), {"k": 1})
    assert "hyper_parallel" not in sys.modules
    assert impl.freeze_plan(plan).injections == meta.injections


def test_a_bound_path_is_called_even_where_the_path_names_a_dangerous_callable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    meta = target_meta({"_target_": "os.system", "command": PWNED})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets={"os.system": bound_compute})
    assert compute_fn(plan)() == ("bound", (), {"command": PWNED})
    assert list(tmp_path.iterdir()) == []


def test_bound_paths_mix_with_string_entries() -> None:
    meta = meta_with(
        {"match": "m", "local_compute_fn": {"_target_": "hp.x.fn"}},
        {"match": "n", "local_compute_fn": {"_target_": "json.dumps"}},
    )
    plan = impl.rebuild_live_plan_from_meta(
        meta, allow_targets=("json", {"hp.x.fn": bound_compute})
    )
    assert compute_fn(plan, "m")() == ("bound", (), {})
    assert compute_fn(plan, "n")([2]) == "[2]"


@pytest.mark.parametrize(
    ("allow_targets", "error"),
    [
        ({"hp.x.fn": 3}, TypeError),
        ({"hp": bound_compute}, ValueError),
        ({3: bound_compute}, ValueError),
        ({"hp." + "a." * 40 + "fn": bound_compute}, ValueError),
    ],
    ids=["not callable", "not a dotted path", "not a string", "too many segments"],
)
def test_a_malformed_binding_is_refused_clearly(allow_targets: Any, error: type) -> None:
    with pytest.raises(error, match="allow_targets"):
        impl.rebuild_live_plan_from_meta(target_meta("sdpa_qkv"), allow_targets=allow_targets)


# --------------------------------------------------------------- bounds and messages


def test_a_path_of_too_many_segments_is_a_meta_error_at_rebuild() -> None:
    path = "torch" + ".a" * 250
    with pytest.raises(MetaError, match="251 segments") as caught:
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": path}), allow_targets=("torch.*",)
        )
    assert caught.value.path == PLACE


def test_freeze_refuses_a_path_no_rebuild_would_accept() -> None:
    plan = ShardingPlan(
        modules={"m": ModuleShardingSpec(local_compute_fn=Target("okpkg" + ".a" * 40))}
    )
    with pytest.raises(FreezeError, match="segments"):
        impl.freeze_plan(plan)


def test_the_refusal_suggests_the_exact_path_or_a_binding_never_the_package() -> None:
    with pytest.raises(UntrustedTarget) as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": "torch.nn.functional.gelu"}))
    message = str(caught.value)
    assert 'allow_targets=("torch.nn.functional.gelu",)' in message
    assert '{"torch.nn.functional.gelu": my_callable}' in message
    assert "('torch',)" not in message and '("torch",)' not in message


def test_following_the_refusal_advice_resolves_the_callable() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "torch.nn.functional.gelu"}),
        allow_targets=("torch.nn.functional.gelu",),
    )
    import torch

    assert compute_fn(plan).resolve() is torch.nn.functional.gelu


# ------------------------------------------------------- what a path steps through

ODD_SOURCE = """\
import types

MARK = []


class Lazy(types.ModuleType):
    def __getattr__(self, name):
        MARK.append(name)
        return print


class Dynamic:
    def __getattr__(self, name):
        MARK.append(name)
        return print


class Holder:
    @property
    def fn(self):
        MARK.append("property")
        return print


lazy = Lazy("oddpkg.lazy")
dynamic = Dynamic()


def __getattr__(name):
    MARK.append(name)
    return print
"""


@pytest.fixture
def oddpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``oddpkg``: a ModuleType subclass, an object with __getattr__, a property and a
    module __getattr__, each recording in MARK when it runs."""
    (tmp_path / "oddpkg.py").write_text(ODD_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("oddpkg", None)
    yield tmp_path
    sys.modules.pop("oddpkg", None)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("oddpkg.lazy.anything", "ModuleType subclass"),
        ("oddpkg.dynamic.anything", "steps only through plain modules and classes"),
        ("oddpkg.Holder.fn", "runs code of its own"),
        ("oddpkg.missing", "__getattr__ is not asked"),
    ],
)
def test_a_path_runs_no_getattr_or_descriptor_of_anything_it_steps_through(
    oddpkg: Path, path: str, why: str
) -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": path}), allow_targets=("oddpkg.*",)
    )
    with pytest.raises(UntrustedTarget, match=why):
        compute_fn(plan)()
    assert sys.modules["oddpkg"].MARK == []


def test_torch_ops_is_not_stepped_through_under_any_entry() -> None:
    import torch

    before = set(sys.modules)
    for allowed in (("torch.*",), ("torch.ops.aten.relu",)):
        plan = impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "torch.ops.aten.relu"}), allow_targets=allowed
        )
        with pytest.raises(UntrustedTarget, match="ModuleType subclass"):
            compute_fn(plan)(torch.zeros(1))
    assert set(sys.modules) - before == set()


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


# ------------------------------------------------------------ the upstream artifact

FIXTURE_TARGETS = (
    "hyper_parallel.models.qwen3_moe.adapter.distributed.context_parallel."
    "qwen3_moe_flash_attention_cp_wrapper",
    "hyper_parallel.models.qwen3_moe.adapter.distributed.expert_parallel.qwen3moe_ep_compute_fn",
)


def local_cp_wrapper(*args: Any, **kwargs: Any) -> Any:
    return ("cp", args, kwargs)


def local_ep_compute(*args: Any, **kwargs: Any) -> Any:
    return ("ep", args, kwargs)


@pytest.mark.parametrize(
    "allow_targets",
    [
        FIXTURE_TARGETS,
        ("hyper_parallel.*",),
        dict(zip(FIXTURE_TARGETS, (local_cp_wrapper, local_ep_compute), strict=True)),
    ],
    ids=["exact paths", "subtree", "mapping"],
)
def test_the_shared_fixture_round_trips_byte_for_byte(allow_targets: Any) -> None:
    source = shared_fixture(QWEN3_MOE)
    meta = load_meta(source)
    for strict in (True, False):
        plan = impl.rebuild_live_plan_from_meta(meta, strict=strict, allow_targets=allow_targets)
        again = impl.freeze_plan(plan)
        document = json.loads(meta_to_json(again))
        document["injections"] = sorted(document["injections"], key=json.dumps)
        original = json.loads(source.read_text())
        original["injections"] = sorted(original["injections"], key=json.dumps)
        assert json.dumps(document, indent=2, sort_keys=True) == json.dumps(
            original, indent=2, sort_keys=True
        )
    if isinstance(allow_targets, dict):
        specs = plan.modules.values()
        computed = [s.local_compute_fn("x") for s in specs if s.local_compute_fn]
        assert computed == [("ep", ("x",), {"use_grouped_gemm": True})] * 4
        assert {s.inner_wrapper("x")[0] for s in specs if s.inner_wrapper} == {"cp"}
    assert "hyper_parallel" not in sys.modules
    with pytest.raises(UntrustedTarget, match="hyper_parallel"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("hyper_parallel",))
