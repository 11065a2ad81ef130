"""A wrong argument type is the public function's own error, naming the type (issue 19,
point 11): MetaError for rebuilding and the artifact's reading and writing, FreezeError
for freezing. Never an AttributeError or TypeError from deep inside."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import shardplan
from shardplan import api, reference
from shardplan.artifact.meta import (
    CodegenMeta,
    dump_meta,
    load_meta,
    meta_from_dict,
    meta_from_json,
    meta_to_bytes,
    meta_to_dict,
    meta_to_json,
)
from shardplan.errors import FreezeError, MetaError

META = CodegenMeta(param_plan={"m": {}})
NOT_A_META: list[Any] = ["nope", {"param_plan": {}}, None, 42]

REBUILDS: dict[str, Callable[..., Any]] = {
    "shardplan.rebuild_plan": shardplan.rebuild_plan,
    "reference.rebuild_plan": reference.rebuild_plan,
    "reference.rebuild_live_plan_from_meta": reference.rebuild_live_plan_from_meta,
}
META_READERS: dict[str, Callable[[Any], Any]] = {
    "meta_to_bytes": meta_to_bytes,
    "meta_to_json": meta_to_json,
    "meta_to_dict": meta_to_dict,
}
FREEZES: dict[str, Callable[[Any], Any]] = {
    "shardplan.freeze_plan": shardplan.freeze_plan,
    "api.freeze_param_plan": api.freeze_param_plan,
    "api.freeze_injections": api.freeze_injections,
    "reference.freeze_plan": reference.freeze_plan,
    "reference.freeze_param_plan": reference.freeze_param_plan,
    "reference.freeze_injections": reference.freeze_injections,
}


def refused(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        call()
    assert type(caught.value) is error
    assert str(caught.value) == message


@pytest.mark.parametrize("value", NOT_A_META, ids=repr)
@pytest.mark.parametrize("name", REBUILDS)
def test_rebuilding_something_else_than_a_meta_is_a_meta_error(name: str, value: Any) -> None:
    refused(
        lambda: REBUILDS[name](value),
        MetaError,
        f"expected a CodegenMeta, got {type(value).__name__} {value!r}",
    )


@pytest.mark.parametrize("strict", ["no", 1, None])
@pytest.mark.parametrize("name", ["shardplan.rebuild_plan", "reference.rebuild_plan"])
def test_a_strict_flag_that_is_not_a_bool_is_a_meta_error(name: str, strict: Any) -> None:
    """``strict="no"`` is truthy: it would have rebuilt strictly without a word."""
    refused(
        lambda: REBUILDS[name](META, strict=strict),
        MetaError,
        f"strict: expected True or False, got {type(strict).__name__} {strict!r}",
    )


@pytest.mark.parametrize("value", NOT_A_META, ids=repr)
@pytest.mark.parametrize("name", META_READERS)
def test_writing_something_else_than_a_meta_is_a_meta_error(name: str, value: Any) -> None:
    refused(
        lambda: META_READERS[name](value),
        MetaError,
        f"expected a CodegenMeta, got {type(value).__name__} {value!r}",
    )


@pytest.mark.parametrize("value", NOT_A_META, ids=repr)
def test_dump_meta_of_something_else_than_a_meta_is_a_meta_error_and_writes_nothing(
    tmp_path: Path, value: Any
) -> None:
    refused(
        lambda: dump_meta(value, tmp_path / "codegen_meta.json"),
        MetaError,
        f"expected a CodegenMeta, got {type(value).__name__} {value!r}",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", [42, None, b"codegen_meta.json", ["codegen_meta.json"]])
def test_dump_meta_to_something_else_than_a_path_is_a_meta_error(path: Any) -> None:
    refused(
        lambda: dump_meta(META, path),
        MetaError,
        f"path: expected a file path (str or os.PathLike), got {type(path).__name__} {path!r}",
    )


@pytest.mark.parametrize("path", [42, None, b"codegen_meta.json"])
def test_load_meta_of_something_else_than_a_path_is_a_meta_error(path: Any) -> None:
    refused(
        lambda: load_meta(path),
        MetaError,
        f"path: expected a file path (str or os.PathLike), got {type(path).__name__} {path!r}",
    )


def test_load_meta_of_a_path_with_a_nul_byte_is_a_meta_error() -> None:
    with pytest.raises(MetaError) as caught:
        load_meta("codegen\0meta.json")
    assert "cannot read" in str(caught.value) and "null byte" in str(caught.value)


@pytest.mark.parametrize("text", [42, None, b'{"param_plan": {}}', {"param_plan": {}}])
def test_meta_from_json_of_something_else_than_text_is_a_meta_error(text: Any) -> None:
    """Bytes too: load_meta reads a file's bytes as UTF-8 only, json.loads would guess."""
    refused(
        lambda: meta_from_json(text),
        MetaError,
        "expected JSON text, a str (load_meta reads a file), got "
        f"{type(text).__name__} {text!r}",
    )


def test_meta_from_json_with_a_source_that_is_not_a_str_is_a_meta_error() -> None:
    refused(
        lambda: meta_from_json('{"param_plan": {}}', source=3),  # type: ignore[arg-type]
        MetaError,
        "source: expected a str, got int 3",
    )


@pytest.mark.parametrize("data", ["{}", [], None])
def test_meta_from_dict_of_something_else_than_an_object_is_a_meta_error(data: Any) -> None:
    with pytest.raises(MetaError, match="a codegen meta must be a JSON object"):
        meta_from_dict(data)


@pytest.mark.parametrize("value", [42, "plan", None, META], ids=repr)
@pytest.mark.parametrize("name", FREEZES)
def test_freezing_something_else_than_a_plan_is_a_freeze_error(name: str, value: Any) -> None:
    with pytest.raises(FreezeError) as caught:
        FREEZES[name](value)
    assert str(caught.value).startswith(f"expected a ShardingPlan, got {type(value).__name__}")


def test_the_right_types_still_work(tmp_path: Path) -> None:
    path = tmp_path / "codegen_meta.json"
    dump_meta(META, str(path))
    assert load_meta(path) == META == meta_from_json(meta_to_json(META), source="x.json")
    assert shardplan.rebuild_plan(META, strict=False).modules.keys() == {"m"}
