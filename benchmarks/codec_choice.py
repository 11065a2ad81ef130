"""`make bench`: why orjson writes and msgspec reads the artifact (artifact/jsoncodec.py).

Each codec runs on the same artifact in a fresh process of its own without torch, so
its peak resident memory (VmHWM, less the process's size before the call) is its own.
Times are the best of three calls, with the collector off (paths.py measures it).
"same bytes" says whether the codec's own output is the documented format
(json.dumps(indent=2, sort_keys=True) + newline) byte for byte, for this artifact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Run in a child: argv = [codec, operation, artifact, decode variant]. Prints one JSON line.
_CHILD = r"""
import gc, json, sys, time
codec, operation, artifact, variant = sys.argv[1:]
data = open(artifact, "rb").read()

def rss_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

import orjson
import msgspec
from shardplan.artifact import jsoncodec
from shardplan.artifact import meta

canonical = lambda doc: json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
decoders = {
    "stdlib, strict hooks (before)": lambda: meta._parse_strictly(data.decode(), artifact),
    "stdlib, plain json.loads": lambda: json.loads(data),
    "msgspec": lambda: msgspec.json.decode(data),
    "msgspec + canonical check": lambda: jsoncodec.decode(data),
    "orjson": lambda: orjson.loads(data),
    "orjson + canonical check": lambda: orjson.dumps(
        orjson.loads(data), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    ) + b"\n" == data,
}
if operation == "decode":
    call = decoders[variant]
else:
    document = json.loads(data)
    encoders = {
        "stdlib, indent=2 (before)": lambda: canonical(document).encode(),
        "msgspec alone": lambda: msgspec.json.format(
            msgspec.json.Encoder(order="sorted").encode(document), indent=2
        ) + b"\n",
        "orjson alone": lambda: orjson.dumps(
            document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
        ) + b"\n",
        "jsoncodec: orjson, checked (1st tier)": lambda: jsoncodec._orjson_bytes(document),
        "jsoncodec: C tokens, msgspec (2nd tier)": lambda: jsoncodec._stdlib_tokens_indented(
            document
        ),
    }
    call = encoders[variant]
gc.collect()
gc.disable()  # the codecs alone: what the collector costs is measured in paths.py
before = rss_kib("VmRSS")
best, out = None, None
for _ in range(3):
    start = time.perf_counter()
    out = call()
    took = time.perf_counter() - start
    best = took if best is None else min(best, took)
    if operation == "decode":
        out = None  # free the decoded document before the next call
result = {"seconds": best, "peak_mib": (rss_kib("VmHWM") - before) / 1024}
if operation == "encode":
    result["same_bytes"] = out == data
print(json.dumps(result))
"""

DECODERS = {
    "stdlib": ["stdlib, strict hooks (before)", "stdlib, plain json.loads"],
    "msgspec": ["msgspec", "msgspec + canonical check"],
    "orjson": ["orjson", "orjson + canonical check"],
}
# Each alone gives the format's bytes only for some documents (neither escapes non-ASCII
# text nor writes every float as float.__repr__, both write NaN as null, msgspec writes
# sets and datetimes): "same bytes" says whether they did for this one. jsoncodec's
# tiers give the format's bytes or decline (shardplan/artifact/jsoncodec.py).
ENCODERS = {
    "stdlib": ["stdlib, indent=2 (before)"],
    "msgspec": ["msgspec alone", "jsoncodec: C tokens, msgspec (2nd tier)"],
    "orjson": ["orjson alone", "jsoncodec: orjson, checked (1st tier)"],
}


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"bench: codec child {args} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(artifact: Path) -> dict[str, Any]:
    """Decode and encode ``artifact`` (a canonical codegen_meta.json) with each codec."""
    results: dict[str, Any] = {
        "artifact_bytes": artifact.stat().st_size,
        "decode": {},
        "encode": {},
    }
    for codec, variants in DECODERS.items():
        for variant in variants:
            results["decode"][variant] = _child(codec, "decode", str(artifact), variant)
    for codec, variants in ENCODERS.items():
        for variant in variants:
            results["encode"][variant] = _child(codec, "encode", str(artifact), variant)
    return results


def report(results: dict[str, Any]) -> None:
    size = results["artifact_bytes"] / 2**20
    print(
        f"JSON codecs on a {size:.1f} MiB artifact (best of 3, collector off; peak RSS above "
        "the process's)"
    )
    for variant, r in results["decode"].items():
        print(
            f"  decode  {variant:<40} {r['seconds'] * 1e3:9.1f} ms  peak {r['peak_mib']:7.1f} MiB"
        )
    for variant, r in results["encode"].items():
        print(
            f"  encode  {variant:<40} {r['seconds'] * 1e3:9.1f} ms  peak {r['peak_mib']:7.1f} MiB"
            f"  same bytes: {r['same_bytes']}"
        )
