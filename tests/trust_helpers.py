"""What the trust tests share (tests/convert/test_trust*.py): artifacts naming one Target, the
callables no artifact may make a trainer call, and tiny packages installed in tmp."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan.artifact.meta import CodegenMeta, meta_from_dict
from shardplan.table.spec import ShardingPlan

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

# A package a program owns: my_planner.models.fn, its private helper my_planner._impl.fn,
# and public aliases of the helper (my_planner.models.helper) and of its module
# (my_planner.models.internals).
MY_PLANNER = {
    "my_planner/__init__.py": "",
    "my_planner/models.py": (
        "from my_planner import _impl as internals\n"
        "from my_planner._impl import fn as helper\n\n\n"
        "def fn(*args, **kwargs):\n    return ('models.fn', kwargs)\n"
    ),
    "my_planner/_impl.py": (
        "CALLS = []\n\n\n"
        "def fn(*args, **kwargs):\n    CALLS.append(kwargs)\n    return ('_impl.fn', kwargs)\n"
    ),
}


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


def installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> Iterator[Path]:
    """Write ``files`` (relative path -> source) under ``tmp_path``, put it first on
    sys.path and run there; their top-level modules are imported afresh and forgotten
    after (a generator for a fixture to ``yield from``)."""
    for relative, source in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source)
    tops = {relative.split("/")[0].removesuffix(".py") for relative in files}
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)

    def forget() -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in tops:
                del sys.modules[name]

    forget()
    yield tmp_path
    forget()


def example_artifact_with(rule: dict[str, Any]) -> dict[str, Any]:
    """The example plan's artifact, as a document, with ``rule``'s keys on its module: in
    the rule the artifact has for it, if it has one (a table may write a rule for every
    module), else in a new one."""
    import shardplan
    from shardplan.artifact.meta import meta_to_json
    from shardplan.examples.llama import LlamaConfig
    from shardplan.examples.plan import tensor_parallel_plan

    document: dict[str, Any] = json.loads(
        meta_to_json(shardplan.freeze_plan(tensor_parallel_plan(LlamaConfig(n_layers=1))))
    )
    rules = document.setdefault("injections", [])
    same = [existing for existing in rules if existing["match"] == rule["match"]]
    if same:
        same[0].update(rule)
    else:
        rules.append(rule)
    return document
