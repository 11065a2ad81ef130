"""Starting and hosting the demos' ranks: a free port, torchrun's environment, the
working folder a run removes, and the rank processes a one-command run launches
(shardplan/examples/demo.py and artifact_demo.py share them)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TEMP_PREFIX = "specgen-demo-"
INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"
# What torchrun (and other launchers of torch.distributed) set for each rank.
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> int:
    """A TCP port free on the loopback address now, for a rank group's store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def under_torchrun() -> bool:
    """Whether this process is a rank a launcher started (torchrun's environment)."""
    return all(name in os.environ for name in TORCHRUN_ENV)


@contextmanager
def folder(out: Path | None) -> Iterator[Path]:
    """``out`` (created if missing), or a new temporary folder removed when the run ends,
    whether it succeeded or not, with torch's compile cache in it."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        yield out
        return
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as temporary:
        # torch keeps a compile cache in TMPDIR (torchinductor_<user>), made when a rank
        # shards: kept in the folder too, so the run leaves nothing behind.
        cache = os.environ.setdefault(INDUCTOR_CACHE, str(Path(temporary) / "torchinductor"))
        try:
            yield Path(temporary)
        finally:
            if os.environ.get(INDUCTOR_CACHE) == cache and cache.startswith(temporary):
                del os.environ[INDUCTOR_CACHE]


def run_ranks(commands: list[list[str]], env: dict[str, str], timeout: float) -> list[int] | str:
    """Run the rank processes; returns their exit statuses, or why they were stopped. Every
    process has ended when it returns: none outlives the folder it works in."""
    procs = [subprocess.Popen(command, env=env) for command in commands]
    deadline = time.monotonic() + timeout
    try:
        return [p.wait(timeout=max(0.1, deadline - time.monotonic())) for p in procs]
    except subprocess.TimeoutExpired:
        return f"the ranks did not finish within {timeout:g} s; stopped them"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def launch_ranks(
    out: Path, port: int, flags: list[str], world: int, timeout: float
) -> list[Any] | None:
    """Start ``world`` demo ranks on this machine (``python -m shardplan.examples.demo --out
    OUT --port PORT *flags RANK``, gloo on loopback), wait for them and read the report each
    writes (``rank{r}.json`` in ``out``); None, with why printed, when one failed or they
    ran out of time."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "shardplan.examples.demo", "--out", str(out)]
    command += ["--port", str(port), *flags]
    codes = run_ranks([[*command, str(rank)] for rank in range(world)], env, timeout)
    if isinstance(codes, str):
        print(f"demo: {codes}", file=sys.stderr)
        return None
    if any(codes):
        print(f"demo: a rank failed (exit statuses {codes})", file=sys.stderr)
        return None
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(world)]
