"""Trust (docs/trust.md, docs/contract.md §8): what a rebuilt Target reaches when first
called.

Every test runs against both implementations (tests/implementations.py). A path steps
only through plain modules and classes, each submodule it names imported whatever the
process imported before; what it reaches is trusted by its real name, or refused before
anything is called.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan import api, reference
from shardplan.artifact.meta import load_meta, meta_to_json
from shardplan.convert import trust
from shardplan.convert.kinds import rebuild_injected
from shardplan.convert.targets import Target
from shardplan.errors import MetaError, UntrustedTarget
from shardplan.staleness import generated_modules
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.helpers import QWEN3_MOE, REPO, shared_fixture
from tests.implementations import use_both_implementations
from tests.older_artifacts import frozen_again
from tests.trust_helpers import (
    PLACE,
    PWNED,
    compute_fn,
    installed,
    meta_with,
    target_meta,
)

(generated_rebuild,) = generated_modules("rebuild")
impl: Any = None
implementation = use_both_implementations(__name__)


# --------------------------------------------------------------- what a re-export reaches


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
    with pytest.raises(UntrustedTarget, match="always refused"):
        target.resolve()
    target.path = "json.dumps"
    with pytest.raises(UntrustedTarget, match="not allowed"):
        target.resolve()


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
    assert (
        impl.freeze_plan(plan).injections
        == frozen_again(json.loads(meta_to_json(meta)))["injections"]
    )


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
    rule = {"match": "m", "local_compute_fn": {"_target_": "json.dumps", "sort_keys": True}}
    written = frozen_again({"param_plan": {"m": {}}, "injections": [rule]})
    assert meta.injections == written["injections"]
    assert plan.modules["m"].local_compute_fn({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_an_exactly_allowed_stdlib_target_resolves_under_its_real_module() -> None:
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "json.dumps", "sort_keys": True}), allow_targets=("json.dumps",)
    )
    assert compute_fn(plan)({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


# ------------------------------------------------- the allow-list is a parameter


def test_the_rebuild_called_with_no_list_admits_no_target() -> None:
    """As a producer's runtime calls the generated rebuild, _rebuild_live_plan_from_meta(meta):
    no Target is admitted, whatever rebuild ran before with another list."""
    meta = target_meta({"_target_": "json.dumps"})
    impl.rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
    module = generated_rebuild if impl is api else reference
    with pytest.raises(UntrustedTarget, match="no Target is allowed"):
        module._rebuild_live_plan_from_meta(meta)
    plan = module._rebuild_live_plan_from_meta(meta, allow_targets=("json.dumps",))
    assert compute_fn(plan)({"a": 1}) == '{"a": 1}'


def test_the_rebuild_kind_admits_what_it_is_passed_and_nothing_else() -> None:
    with pytest.raises(UntrustedTarget, match="no Target is allowed"):
        rebuild_injected({"_target_": "json.dumps"}, PLACE, trust.admission(()))
    admitted = rebuild_injected({"_target_": "json.dumps"}, PLACE, trust.admission(("json.dumps",)))
    assert admitted == Target("json.dumps")


def test_a_target_keeps_the_list_it_was_admitted_under_for_its_first_call(
    my_planner: Path,
) -> None:
    """Rebuilt under one list, called after a rebuild under another (or under none): it is
    resolved under its own list, not whatever list is current."""
    meta = target_meta({"_target_": "my_planner.models.fn", "k": 1})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.*",))
    with pytest.raises(UntrustedTarget):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=())
    assert compute_fn(plan)() == ("models.fn", {"k": 1})
    helper = target_meta({"_target_": "my_planner.models.helper"})
    narrow = impl.rebuild_live_plan_from_meta(helper, allow_targets=("my_planner.*",))
    exact = impl.rebuild_live_plan_from_meta(helper, allow_targets=("my_planner.models.helper",))
    assert compute_fn(exact)() == ("_impl.fn", {})
    with pytest.raises(UntrustedTarget, match="private"):
        compute_fn(narrow)()  # its list admits my_planner.* only: the helper's real name is private


def test_no_context_variable_carries_trust() -> None:
    """The allow-list reaches the Targets as an argument: no module on the trust path holds
    a context variable (or any other ambient state) for it."""
    root = REPO
    for relative in (
        "shardplan/api.py",
        "shardplan/reference.py",
        "shardplan/convert/trust.py",
        "shardplan/convert/targets.py",
        "shardplan/convert/kinds.py",
        "generated/rebuild.py",
    ):
        source = (root / relative).read_text()
        assert "contextvars" not in source and "ContextVar" not in source, relative
    generated = (root / "generated/rebuild.py").read_text()
    assert "targets = admission(allow_targets)" in generated
    assert ", targets)" in generated  # passed down to each Target's rebuild


def test_a_functools_partial_target_built_in_python_is_still_trusted_code() -> None:
    target = Target("functools.partial")
    assert target.resolve() is functools.partial


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


def test_torch_ops_is_not_stepped_through_even_when_named_exactly() -> None:
    import torch

    before = set(sys.modules)
    plan = impl.rebuild_live_plan_from_meta(
        target_meta({"_target_": "torch.ops.aten.relu"}), allow_targets=("torch.ops.aten.relu",)
    )
    with pytest.raises(UntrustedTarget, match="ModuleType subclass"):
        compute_fn(plan)(torch.zeros(1))
    assert set(sys.modules) - before == set()


# ------------------------------------------------- a subtree the program owns, privately


def test_an_owned_subtree_admits_its_public_callables(my_planner: Path) -> None:
    meta = target_meta({"_target_": "my_planner.models.fn", "k": 1})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.*",))
    assert compute_fn(plan)("module") == ("models.fn", {"k": 1})


def test_an_owned_subtree_refuses_its_private_helper_unless_named_exactly(
    my_planner: Path,
) -> None:
    meta = target_meta({"_target_": "my_planner._impl.fn", "k": 1})
    with pytest.raises(UntrustedTarget) as caught:
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.*",))
    message = str(caught.value)
    assert caught.value.path == PLACE and "'_impl' is private" in message
    assert 'allow_targets=("my_planner._impl.fn",)' in message
    assert "my_planner" not in sys.modules  # refused at rebuild: nothing imported
    allowed = ("my_planner.*", "my_planner._impl.fn")
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=allowed)
    assert compute_fn(plan)("module") == ("_impl.fn", {"k": 1})


def test_a_public_alias_of_a_private_helper_or_module_is_refused_at_first_call(
    my_planner: Path,
) -> None:
    meta = target_meta({"_target_": "my_planner.models.helper"})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.*",))
    with pytest.raises(UntrustedTarget, match="private segment '_impl'") as caught:
        compute_fn(plan)("module")
    assert caught.value.real_name == "my_planner._impl.fn"
    meta = target_meta({"_target_": "my_planner.models.internals.fn"})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner.*",))
    with pytest.raises(UntrustedTarget, match="'_impl' below the entry 'my_planner.[*]'"):
        compute_fn(plan)("module")
    assert sys.modules["my_planner._impl"].CALLS == []


def test_a_private_module_entry_names_one_callable_not_a_module(my_planner: Path) -> None:
    meta = target_meta({"_target_": "my_planner._impl.fn"})
    with pytest.raises(UntrustedTarget, match="names that one callable exactly"):
        impl.rebuild_live_plan_from_meta(meta, allow_targets=("my_planner._impl",))


def test_an_exact_entry_admits_a_library_callable_no_module_or_subtree_entry_may() -> None:
    import torch

    meta = target_meta({"_target_": "torch.nn.functional.gelu", "approximate": "tanh"})
    plan = impl.rebuild_live_plan_from_meta(meta, allow_targets=("torch.nn.functional.gelu",))
    x = torch.tensor([1.0])
    assert torch.equal(compute_fn(plan)(x), torch.nn.functional.gelu(x, approximate="tanh"))
    for entry in ("torch.*", "torch.nn.functional", "torch.nn.*"):
        with pytest.raises(MetaError, match="not the program's own code") as caught:
            impl.rebuild_live_plan_from_meta(meta, allow_targets=(entry,))
        assert f"'{entry}'" in str(caught.value)


# ---------------------------------------------- what the process imported before

SHADOW = {
    "shadow/__init__.py": "def tool(*args, **kwargs):\n    return 'package function'\n",
    "shadow/tool.py": "def run(*args, **kwargs):\n    return 'submodule'\n",
}


@pytest.fixture
def shadow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package whose function ``tool`` has the name of its submodule ``shadow.tool``,
    which replaces it in the package's namespace once imported."""
    yield from installed(tmp_path, monkeypatch, SHADOW)


def outcome(path: str, allowed: tuple[str, ...]) -> object:
    plan = impl.rebuild_live_plan_from_meta(target_meta({"_target_": path}), allow_targets=allowed)
    try:
        return compute_fn(plan)()
    except UntrustedTarget as refused:
        return refused.real_name


@pytest.mark.parametrize("imported_first", [False, True], ids=["fresh", "submodule-imported"])
def test_resolution_does_not_depend_on_what_the_process_imported(
    shadow: Path, imported_first: bool
) -> None:
    if imported_first:
        importlib.import_module("shadow.tool")
    assert outcome("shadow.tool.run", ("shadow.*",)) == "submodule"
    assert outcome("shadow.tool", ("shadow.*",)) == "shadow.tool"  # a module, not called
    assert outcome("shadow.tool", ("shadow",)) == "shadow.tool"  # a submodule of the entry


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
        original = frozen_again(json.loads(source.read_text()))
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
