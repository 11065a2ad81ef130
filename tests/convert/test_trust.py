"""Trust (docs/trust.md, docs/contract.md §8): what an allow-list entry admits at rebuild.

Every test runs against both implementations (tests/implementations.py). An artifact
names only callables the calling program allowed: default deny, exact names, a module's
own public callables, an owned subtree's public callables, bound paths; nothing is
imported at rebuild.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from shardplan.artifact.meta import meta_to_dict
from shardplan.convert import owners, trust
from shardplan.convert.targets import Target
from shardplan.errors import FreezeError, MetaError, UntrustedTarget
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.implementations import use_both_implementations
from tests.older_artifacts import frozen_again
from tests.trust_helpers import (
    DANGEROUS,
    OKPKG_SOURCE,
    PLACE,
    PWNED,
    compute_fn,
    meta_with,
    target_meta,
)

impl: Any = None
implementation = use_both_implementations(__name__)


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


# ------------------------------------------------------------- what an entry names


segments = st.sampled_from(
    ["a", "ab", "a_b", "b", "_p", "hp", "hp_evil", "__x__", "os", "system", "builtins", "eval"]
)
dotted = st.lists(segments, min_size=1, max_size=4).map(".".join)
entries = st.one_of(dotted, dotted.map(lambda d: d + ".*"))
allow_lists = st.lists(entries, max_size=3).map(tuple)


def private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def is_admitted_as_stated(path: str, entries: tuple[str, ...]) -> bool:
    """The rule in words (docs/trust.md): "a.b.fn" admits that path; "a.b" (no private
    segment, a not a library) admits a.b.name for a public name; "a.b.*" admits every path
    below a.b with no private segment below it."""
    parts = path.split(".")
    for entry in entries:
        if entry.endswith(".*"):
            root = entry.split(".")[:-1]
            below = parts[len(root) :]
            if parts[: len(root)] == root and below and not any(map(private, below)):
                return True
        elif path == entry:
            return True
        elif ".".join(parts[:-1]) == entry and not any(map(private, entry.split("."))):
            if not private(parts[-1]) and owners.library_of(parts[0]) is None:
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


def test_a_module_entry_admits_its_own_callables_not_its_submodules(my_planner: Path) -> None:
    meta = target_meta({"_target_": "my_planner.models.fn", "k": 1})
    with pytest.raises(UntrustedTarget, match="not those of its submodules"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner",))
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.models",))
    assert compute_fn(plan)("module") == ("models.fn", {"k": 1})


def test_a_module_entry_refuses_a_callable_defined_elsewhere_at_first_call(okpkg: Path) -> None:
    (okpkg / "okpkg.py").write_text(OKPKG_SOURCE + "from json import dumps\n")
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "okpkg.dumps"}), allow_targets=("okpkg",)
    )
    with pytest.raises(UntrustedTarget, match="real name") as caught:
        compute_fn(plan)([1])
    assert caught.value.real_name == "json.dumps"


def test_a_module_entry_does_not_admit_private_names(my_planner: Path) -> None:
    with pytest.raises(UntrustedTarget, match="public names"):
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "my_planner.models._fn"}), allow_targets=("my_planner.models",)
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


@pytest.mark.parametrize(
    "path",
    ["hyper_parallel._x.fn", "hyper_parallel.models._x.fn", "hyper_parallel.models.x._fn"],
)
def test_a_subtree_admits_no_private_segment_below_it(path: str) -> None:
    allowed = ("hyper_parallel.*",)
    with pytest.raises(UntrustedTarget, match="is private") as caught:
        impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=allowed)
    assert caught.value.path == PLACE and f'allow_targets=("{path}",)' in str(caught.value)
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": path}), allow_targets=(*allowed, path)
    )
    assert compute_fn(plan) == Target(path)


@pytest.mark.parametrize("entry", ["my_planner._impl.*", "my_planner.models._util.*"])
def test_a_private_subtree_entry_is_a_meta_error_naming_it_and_the_exact_entry(
    entry: str,
) -> None:
    with pytest.raises(MetaError) as caught:
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": "my_planner.models.fn"}), allow_targets=(entry,)
        )
    message = str(caught.value)
    assert not isinstance(caught.value, UntrustedTarget)
    assert f"allow_targets entry '{entry}' is refused" in message and "is private" in message
    assert f'allow_targets=("{entry[:-2]}.fn",)' in message


# ------------------------------------------------------------------ bound callables


def bound_compute(*args: Any, **kwargs: Any) -> Any:
    return ("bound", args, kwargs)


def test_a_bound_path_calls_the_program_callable_and_imports_nothing() -> None:
    path = "hyper_parallel.models.x.fn"
    meta = target_meta({"_target_": path, "k": 1})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets={path: bound_compute})
    assert compute_fn(plan)("module") == ("bound", ("module",), {"k": 1})
    assert "hyper_parallel" not in sys.modules
    written = frozen_again(meta_to_dict(meta))["injections"]
    assert impl.freeze_plan(plan).injections == written


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
        meta, allow_targets=("json.dumps", {"hp.x.fn": bound_compute})
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
    path = "my_planner" + ".a" * 250
    with pytest.raises(MetaError, match="251 segments") as caught:
        impl.rebuild_live_plan_from_meta(
            target_meta({"_target_": path}), allow_targets=("my_planner.*",)
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
