"""Shared fixtures: the repository's snapshots and the trc_gen / trc_decode tools.

The tools are built with cargo (release) unless CSD_TOOLS_DIR names a folder holding them."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOTS = ROOT / "snapshots"


def snapshot_dirs():
    return sorted(p for p in SNAPSHOTS.iterdir() if (p / "snapshot.ini").is_file())


@pytest.fixture(scope="session")
def tools():
    """``{"trc_gen": path, "trc_decode": path, "trc_perf": path}``."""
    d = os.environ.get("CSD_TOOLS_DIR")
    if d:
        return {n: str(Path(d) / n) for n in ("trc_gen", "trc_decode", "trc_perf")}
    out = subprocess.run(
        ["cargo", "build", "--release", "-p", "coresight-tools", "--bin", "trc_gen", "--bin", "trc_decode",
         "--bin", "trc_perf",
         "--message-format=json-render-diagnostics"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    exes = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            exes[Path(msg["executable"]).name] = msg["executable"]
    return exes


@pytest.fixture(scope="session")
def generated(tools, tmp_path_factory):
    """Makes captures with trc_gen: ``make(protocol, seed, *extra) -> path``."""
    base = tmp_path_factory.mktemp("gen")

    def make(protocol, seed, *extra, perf=False):
        name = f"{protocol}-{seed}" + ("".join(extra).replace("-", "_") if extra else "")
        if perf:
            out = base / f"{name}.data"
            args = ["--perf-data", str(out)]
        else:
            out = base / name
            args = ["--out", str(out)]
        if not out.exists():
            subprocess.run([tools["trc_gen"], "--protocol", protocol, "--seed", str(seed), *args, *extra],
                           check=True, stdout=subprocess.DEVNULL)
        return out

    return make
