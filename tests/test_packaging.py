"""What `pip install .` gives: the wheel's names and data, the runtime as installed, and a
`specgen` that answers --help without the codegen extra.

The wheel is built once (setuptools' build hook, under a second) from a copy of the files
it is built from, so the checkout gets no build/ or egg-info folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO

# Every test here starts fresh interpreters to watch what they import and run.
pytestmark = pytest.mark.processes

BUILT_FROM = ("pyproject.toml", "README.md", "shardplan", "generator", "generated")
DATA = ("codegen_meta.schema.json", "fields.md")
NO_EXTRA = "import sys; sys.modules['black'] = sys.modules['jinja2'] = None; "


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in BUILT_FROM:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, source / name)
    # setuptools' PEP 517 hook, as `pip wheel --no-build-isolation` calls it, without pip.
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_wheel({str(root)!r})",
        ],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (built,) = root.glob("specgen-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """The wheel unpacked: what site-packages holds after `pip install .`."""
    folder = wheel.parent / "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder)
    return folder


def test_the_wheel_installs_no_top_level_generator_or_generated(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read("specgen-0.1.0.dist-info/entry_points.txt").decode()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"shardplan", "specgen"}
    assert "specgen/__init__.py" not in names  # a namespace: only specgen.generator is ours
    assert "specgen/generator/__main__.py" in names
    assert "shardplan/_generated/meta.py" in names
    assert "specgen = specgen.generator.__main__:main" in entry_points


def test_the_wheel_carries_the_schema_and_the_field_reference(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for name in DATA:
            assert (
                archive.read(f"shardplan/_generated/{name}")
                == (REPO / "generated" / name).read_bytes()
            )


def run_installed(installed: Path, statement: str) -> subprocess.CompletedProcess[str]:
    """``statement`` in a fresh interpreter with the unpacked wheel first on the path, run
    outside the checkout (so neither its folders nor `python -m` find them)."""
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(installed)!r}); {statement}"],
        cwd=installed.parent,
        capture_output=True,
        text=True,
    )


def test_the_installed_runtime_reads_and_writes_an_artifact_with_its_own_generated_code(
    installed: Path, tmp_path: Path
) -> None:
    artifact = REPO / "tests" / "corpus" / "older_planner_codegen_meta.json"
    result = run_installed(
        installed,
        "import shardplan; "
        f"shardplan.dump_meta(shardplan.load_meta({str(artifact)!r}), {str(tmp_path / 'a.json')!r}); "
        "print(sys.modules['shardplan._generated.meta'].__file__, 'generated' in sys.modules, "
        "'torch' in sys.modules)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        str(installed / "shardplan" / "_generated" / "meta.py"),
        "False",
        "False",
    ]
    assert (tmp_path / "a.json").read_bytes() == artifact.read_bytes()


def test_the_installed_specgen_answers_help_without_the_codegen_extra(installed: Path) -> None:
    main = "from specgen.generator.__main__ import run; "
    helped = run_installed(installed, NO_EXTRA + main + "sys.exit(run(['--help']))")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: specgen")
    checked = run_installed(installed, NO_EXTRA + main + "sys.exit(run(['check']))")
    assert checked.returncode == 2
    assert checked.stderr == (
        "specgen: check needs the codegen extra (black is not installed): "
        "pip install 'specgen[codegen]'\n"
    )


@pytest.mark.parametrize("command", ["generate", "check", "diff", "table"])
def test_a_command_without_the_codegen_extra_names_it_in_one_line(command: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_EXTRA + "import runpy; runpy.run_module('generator', run_name='__main__')",
        ]
        + [command],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"specgen: {command} needs the codegen extra (black is not installed): "
        "pip install 'specgen[codegen]'\n"
    )


def test_python_m_generator_help_works_without_the_codegen_extra() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_EXTRA + "import runpy; runpy.run_module('generator', run_name='__main__')",
        ]
        + ["--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: specgen")
    assert "check" in result.stdout and result.stderr == ""
