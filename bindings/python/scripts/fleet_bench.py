"""The fleet job on a local Dask cluster: 1 worker process against 2, and both against the serial
merge.

Usage: python scripts/fleet_bench.py [--dir DIR] [--count 200] [--length 60000] [--repeat 3]

Makes ``--count`` captures with ``trc_gen`` (seeds 1..count, protocols in turn: etmv4, ete, ptm,
etmv3, etmv4m) in ``--dir`` unless they are there, decodes them serially in this process
(``fleet.run_serial``, the reference), then with ``fleet.run`` on a ``LocalCluster`` of 1 and of 2
worker processes (one thread each). Each job reads its captures from disk in the workers (loading
included); the figures are the best of ``--repeat`` jobs on a running cluster, and the cluster's
start-up time apart. The default length (60000 waypoints, about 3.5 MB and 100,000 elements a
capture, 700 MB in all) makes the decode outweigh Dask's fixed cost per job (about 0.4 CPU second
in the client and scheduler); with short captures that cost, which does not shrink with more
workers, shows in the ratio. Checks that every merged profile equals the serial one (exit 1 if not) and
prints the 2-worker / 1-worker ratio of wall times, with the load average and the share of their
cores the workers had (their CPU time over wall time x workers: the 2-worker run needs 2 free
cores). ``trc_gen`` is taken from ``--trc-gen``, ``$CSD_TOOLS_DIR``, or built with cargo.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from coresight_decode import fleet

PROTOCOLS = ["etmv4", "ete", "ptm", "etmv3", "etmv4m"]
ROOT = Path(__file__).resolve().parents[3]


def find_trc_gen(given):
    if given:
        return given
    d = os.environ.get("CSD_TOOLS_DIR")
    if d:
        return str(Path(d) / "trc_gen")
    out = subprocess.run(
        ["cargo", "build", "--release", "-p", "coresight-tools", "--bin", "trc_gen", "--message-format=json-render-diagnostics"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            return msg["executable"]
    raise SystemExit("trc_gen not built")


def make_captures(trc_gen, out_dir, count, length):
    """``count`` snapshots in ``out_dir``, made once (a name holds its protocol, seed and length)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(1, count + 1):
        proto = PROTOCOLS[seed % len(PROTOCOLS)]
        p = out_dir / f"{proto}-s{seed}-l{length}"
        if not (p / "snapshot.ini").is_file():
            subprocess.run([trc_gen, "--protocol", proto, "--seed", str(seed), "--length", str(length), "--out", str(p)],
                           check=True, stdout=subprocess.DEVNULL)
        paths.append(str(p))
    return paths


def load():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def on_cluster(paths, workers, repeat, expect):
    from dask.distributed import Client, LocalCluster

    start = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(workers)
        client.run(lambda: __import__("coresight_decode.fleet"))  # the package imported in every worker
        startup = time.perf_counter() - start
        times, cpu, here = [], [], []
        for _ in range(repeat):
            c0 = sum(client.run(time.process_time).values())
            t0, h0 = time.perf_counter(), time.process_time()
            r = fleet.run(paths, client)
            times.append(time.perf_counter() - t0)
            here.append(time.process_time() - h0)
            cpu.append(sum(client.run(time.process_time).values()) - c0)
            if r.failures or r.profile.to_json() != expect:
                print(f"{workers} workers: merged profile differs from the serial one, failures {r.failures}")
                sys.exit(1)
    # CPU seconds the workers got during the fastest job: against wall time x workers, the share of
    # the cores they had (under 1: other processes on the machine took the rest).
    i = times.index(min(times))
    return startup, times, cpu[i] / (times[i] * workers), here[i]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/csd-fleet-captures-60k")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--length", type=int, default=60000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trc-gen")
    a = ap.parse_args(argv)

    paths = make_captures(find_trc_gen(a.trc_gen), a.dir, a.count, a.length)
    size = sum(f.stat().st_size for p in paths for f in Path(p).iterdir())
    print(f"{len(paths)} captures, {size / 1e6:.0f} MB, protocols {', '.join(PROTOCOLS)}; {os.cpu_count()} CPUs, {load()}")

    serial_times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        serial = fleet.run_serial(paths)
        serial_times.append(time.perf_counter() - t0)
    assert not serial.failures, serial.failures
    expect = serial.profile.to_json()
    print(f"serial (this process)  best {min(serial_times):6.2f} s  runs {' '.join(f'{t:.2f}' for t in serial_times)}"
          f"  ({serial.profile.elements} elements, {serial.profile.instructions} instructions)")

    best = {}
    for workers in (1, 2):
        startup, times, share, here = on_cluster(paths, workers, a.repeat, expect)
        best[workers] = min(times)
        print(f"{workers} worker{'s' if workers > 1 else ' '}  job best {min(times):6.2f} s  runs "
              f"{' '.join(f'{t:.2f}' for t in times)}  cluster start {startup:.2f} s  merged = serial; "
              f"workers had {share:.0%} of {workers} core{'s' if workers > 1 else ''}, client and scheduler "
              f"{here:.2f} CPU s; {load()}")
    ratio = best[2] / best[1]
    print(f"2 workers / 1 worker = {ratio:.2f} (target <= 0.60)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
