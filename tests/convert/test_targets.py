"""Targets (docs/contract.md §8): dotted import paths plus kwargs, resolved lazily, refused if
not re-importable."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan.convert.targets import Target, target_of_callable
from shardplan.errors import FreezeError

LAZY_MODULE_SOURCE = """\
def scale(x, *, factor=1, offset=0):
    return x * factor + offset
"""


@pytest.fixture
def lazy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of a fresh importable module, not imported yet, defining ``scale``."""
    name = f"shardplan_lazy_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(LAZY_MODULE_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_target_to_dict_holds_path_then_kwargs() -> None:
    data = Target("json.dumps", indent=2, sort_keys=True).to_dict()
    assert data == {"_target_": "json.dumps", "indent": 2, "sort_keys": True}
    assert list(data)[0] == "_target_"


def test_target_round_trips_through_its_dict() -> None:
    target = Target("pkg.mod.fn", use_grouped_gemm=True, sizes=[1, 2], nested={"a": None})
    assert Target.from_dict(target.to_dict()) == target


def test_from_dict_does_not_mutate_its_input() -> None:
    data = {"_target_": "pkg.mod.fn", "k": 1}
    Target.from_dict(data)
    assert data == {"_target_": "pkg.mod.fn", "k": 1}


def test_a_kwarg_named_path_is_kept_as_a_kwarg() -> None:
    target = Target.from_dict({"_target_": "pkg.mod.fn", "path": "x"})
    assert (target.path, target.kwargs) == ("pkg.mod.fn", {"path": "x"})


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (Target("a.b", k=1), Target("a.b", k=1), True),
        (Target("a.b"), Target("a.c"), False),
        (Target("a.b", k=1), Target("a.b", k=2), False),
        (Target("a.b", k=1), Target("a.b"), False),
    ],
    ids=["same", "other_path", "other_kwarg_value", "missing_kwarg"],
)
def test_targets_are_equal_exactly_when_path_and_kwargs_are(
    left: Target, right: Target, equal: bool
) -> None:
    assert (left == right) is equal


def test_equal_targets_hash_alike() -> None:
    assert len({Target("a.b", k=1), Target("a.b", k=1)}) == 1


def test_target_is_not_equal_to_its_dict() -> None:
    assert Target("a.b") != {"_target_": "a.b"}


def test_target_of_a_missing_module_can_be_built_and_rebuilt_without_importing() -> None:
    target = Target.from_dict(Target("no_such_package_xyz.mod.fn", k=1).to_dict())
    assert target.path == "no_such_package_xyz.mod.fn"
    assert "no_such_package_xyz" not in sys.modules


def test_resolving_a_missing_module_is_an_import_error() -> None:
    with pytest.raises(ImportError, match="no_such_package_xyz"):
        Target("no_such_package_xyz.mod.fn").resolve()


def test_constructing_and_rebuilding_a_target_does_not_import_its_module(lazy_module: str) -> None:
    Target.from_dict(Target(f"{lazy_module}.scale", factor=2).to_dict())
    assert lazy_module not in sys.modules


def test_calling_a_target_imports_its_module_and_calls_with_kwargs(lazy_module: str) -> None:
    target = Target.from_dict({"_target_": f"{lazy_module}.scale", "factor": 2})
    assert target(3) == 6
    assert lazy_module in sys.modules


def test_call_kwargs_override_stored_kwargs_and_keep_the_rest(lazy_module: str) -> None:
    target = Target(f"{lazy_module}.scale", factor=2, offset=1)
    assert target(3, factor=5) == 16
    assert target.kwargs == {"factor": 2, "offset": 1}


def test_resolve_returns_the_named_callable(lazy_module: str) -> None:
    assert Target(f"{lazy_module}.scale").resolve() is sys.modules[lazy_module].scale


def test_a_stdlib_function_target_resolves_and_works() -> None:
    target = Target("json.dumps", sort_keys=True)
    assert target.resolve() is json.dumps
    assert target({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_a_class_attribute_path_resolves() -> None:
    assert Target("json.encoder.JSONEncoder.encode").resolve() is json.JSONEncoder.encode


def test_a_missing_dependency_of_the_target_module_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user module exists but imports a missing module whose name is a string prefix
    # of its own: the error must name that dependency, not claim the path has no module.
    stem = f"shardplan_dep_{uuid.uuid4().hex}"
    (tmp_path / f"{stem}_user.py").write_text(f"import {stem}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as caught:
        Target(f"{stem}_user.fn").resolve()
    assert caught.value.name == stem


@pytest.mark.parametrize(
    "path",
    [
        "",
        "json",
        "json.",
        ".json",
        "json..dumps",
        "1json.dumps",
        "json.dumps ",
        " json.dumps",
        "json-x.dumps",
        "json/dumps",
        3,
        None,
    ],
    ids=repr,
)
def test_target_refuses_a_path_that_is_not_dotted(path: Any) -> None:
    with pytest.raises(ValueError, match="dotted import path"):
        Target(path)


def test_target_refuses_a_kwarg_that_would_overwrite_its_path() -> None:
    with pytest.raises(ValueError, match="_target_"):
        Target("json.dumps", _target_="os.system")


def test_from_dict_without_target_key_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="_target_"):
        Target.from_dict({"indent": 2})


def module_level_function() -> str:
    return "here"


class Holder:
    def method(self) -> None:
        pass

    @staticmethod
    def static() -> None:
        pass


def test_target_of_a_module_level_function_is_its_module_qualname() -> None:
    target = target_of_callable(module_level_function, "p")
    assert target == Target(f"{__name__}.module_level_function")
    assert target.resolve() is module_level_function


def test_target_of_a_stdlib_function_is_its_defining_module() -> None:
    assert target_of_callable(json.dumps, "p") == Target("json.dumps")


def test_target_of_a_static_method_names_it_through_its_class() -> None:
    assert target_of_callable(Holder.static, "p") == Target(f"{__name__}.Holder.static")


def _local_function() -> Callable[[], None]:
    def local() -> None:
        pass

    return local


def _main_module_function() -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec("def main_fn():\n    pass\n", namespace)
    return namespace["main_fn"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "fn",
    [lambda: None, _local_function(), Holder().method, _main_module_function(), "text".upper],
    ids=[
        "lambda",
        "local_function",
        "bound_method",
        "main_module_function",
        "builtin_bound_method",
    ],
)
def test_target_of_a_callable_that_cannot_be_reimported_is_a_freeze_error(
    fn: Callable[..., Any],
) -> None:
    path = 'modules["m"].inner_wrapper'
    with pytest.raises(FreezeError) as caught:
        target_of_callable(fn, path)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


# ------------------------------------------------ freezing many Targets (frozen_target)


def test_a_valid_path_frozen_once_does_not_admit_a_path_reassigned_later() -> None:
    """Valid paths are remembered by value: a Target whose path is reassigned after a
    freeze is checked again, and refused at its place."""
    from shardplan.convert.targets import frozen_target

    target = Target("json.dumps")
    assert frozen_target(target, "injections[0].inner_wrapper") == {"_target_": "json.dumps"}
    target.path = "json.dumps; rm -rf"
    with pytest.raises(FreezeError) as caught:
        frozen_target(target, "injections[0].inner_wrapper")
    assert caught.value.path == "injections[0].inner_wrapper"
    assert "must be a dotted import path" in str(caught.value)


def test_frozen_kwargs_keep_their_order_share_no_container_and_name_the_first_bad_one() -> None:
    from shardplan.convert.targets import frozen_target

    nested = {"a": [1, 2]}
    target = Target("json.dumps", ring=True, size=2**62, name="x", none=None, nested=nested)
    frozen = frozen_target(target, "m.inner_wrapper")
    assert list(frozen) == ["_target_", "ring", "size", "name", "none", "nested"]
    assert frozen["nested"] == nested and frozen["nested"] is not nested
    assert frozen["nested"]["a"] is not nested["a"]
    target.kwargs = {"ok": 1, "big": 2**64}
    assert frozen_target(target, "m.inner_wrapper")["big"] == 2**64
    target.kwargs = {"ok": 1, "bad": float("nan"), "worse": {1, 2}}
    with pytest.raises(FreezeError) as caught:
        frozen_target(target, "m.inner_wrapper")
    assert caught.value.path == "m.inner_wrapper.bad"


def test_a_rebuilt_target_copies_its_kwargs_and_names_the_first_too_deep() -> None:
    """Rebuild copies each kwarg (none shared with the meta) and, for one nested deeper
    than freeze writes, names that kwarg's place: the path is built only for the error."""
    from shardplan.convert import trust
    from shardplan.convert.json_values import MAX_DEPTH
    from shardplan.convert.targets import target_from_frozen
    from shardplan.errors import MetaError

    deep: Any = 0
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    data = {"_target_": "json.dumps", "indent": 2, "nested": {"a": [1]}, "none": None}
    targets = trust.admission(("json.dumps",))
    target = target_from_frozen(data, "injections[0].inner_wrapper", targets)
    assert target == Target("json.dumps", indent=2, nested={"a": [1]}, none=None)
    assert target.kwargs["nested"] is not data["nested"]
    assert target._place == "injections[0].inner_wrapper" and target._resolved is None
    with pytest.raises(MetaError) as caught:
        target_from_frozen({**data, "deep": deep, "deeper": [deep]}, "injections[3].x", targets)
    assert caught.value.path == "injections[3].x.deep"
    assert "which freeze never writes" in str(caught.value)


@pytest.mark.parametrize("admitted_first", [False, True])
def test_a_rebuilt_targets_key_not_a_string_is_named_whether_its_path_was_admitted(
    admitted_first: bool,
) -> None:
    """A path a rebuild admitted is not checked again (an artifact names the same few
    callables thousands of times), but every Target's keys still are: a meta built in
    Python may hold a key that is no string, and it is named, not passed to **."""
    from shardplan.convert import trust
    from shardplan.convert.targets import target_from_frozen
    from shardplan.errors import MetaError

    targets = trust.admission(("json.dumps",))
    if admitted_first:
        target_from_frozen({"_target_": "json.dumps", "indent": 2}, "injections[0].x", targets)
        assert targets.admitted == {"json.dumps"}
    with pytest.raises(MetaError) as caught:
        target_from_frozen({"_target_": "json.dumps", 3: "v"}, "injections[1].x", targets)
    deep: Any = 0
    for _ in range(600):
        deep = [deep]
    with pytest.raises(MetaError) as deep_first:  # the key, whichever kwarg comes first
        target_from_frozen(
            {"_target_": "json.dumps", "d": deep, 4: "v"}, "injections[3].x", targets
        )
    # Checked before the allow-list names the path, admitted or not.
    with pytest.raises(MetaError) as untrusted:
        target_from_frozen({"_target_": "json.loads", 3: "v"}, "injections[2].x", targets)
    assert caught.value.path == "injections[1].x[3]"
    assert "object key 3 must be a string" in str(caught.value)
    assert untrusted.value.path == "injections[2].x[3]"
    assert deep_first.value.path == "injections[3].x[4]"
