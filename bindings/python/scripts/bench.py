"""Arrow throughput against the Rust pull API, in elements per second.

Usage: python scripts/bench.py SNAPSHOT_DIR [--repeat N] [--batch-size N]

- rust pull API: ``_native.pull_count`` opens the snapshot with ``coresight_decode::pull::Trace``
  and counts its elements in Rust (no Python object per element, GIL released);
- arrow: ``Trace.batches()`` from Python, every batch imported into ``pyarrow.RecordBatch``
  (zero copy, through the Arrow PyCapsule interface), rows counted;
- elements (information only): ``Element`` objects iterated from Python.

Both main figures time the whole job, from opening the snapshot to the last element, on one
thread each. Runs of the two alternate, ``--repeat`` of each, and the best of each is kept (the
machine may be shared). Prints both rates and their ratio; exits 1 if the ratio is under
``--min-ratio`` (default 0: report only). Also prints, for information, the calling thread's CPU
time of each side (least of the runs), which other processes on a loaded machine disturb less.
"""

import argparse
import sys
import time

import pyarrow as pa

import coresight_decode as csd
from coresight_decode import _native


def best(fn, repeat):
    """(elements, seconds) of the fastest of ``repeat`` runs of ``fn() -> (elements, seconds)``."""
    return min((fn() for _ in range(repeat)), key=lambda r: r[1])


def rust_pull(path):
    """(elements, wall seconds, CPU seconds of this thread)."""
    cpu = time.thread_time()
    n, t = _native.pull_count(path)
    return n, t, time.thread_time() - cpu


def arrow(path, batch_size):
    """(elements, wall seconds, CPU seconds of this thread)."""
    cpu = time.thread_time()
    start = time.perf_counter()
    n = 0
    for _, b in csd.open_snapshot(path).raw_batches(batch_size=batch_size):
        n += pa.record_batch(b).num_rows
    return n, time.perf_counter() - start, time.thread_time() - cpu


def objects(path):
    start = time.perf_counter()
    n = sum(1 for _ in csd.open_snapshot(path))
    return n, time.perf_counter() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=65536)
    ap.add_argument("--objects", action="store_true", help="also time Element objects")
    ap.add_argument("--min-ratio", type=float, default=0.0)
    a = ap.parse_args(argv)

    arrow(a.snapshot, a.batch_size)  # warm: page cache, pyarrow's first import of each type
    # Interleaved, so that both see the same load on a shared machine; the best run of each.
    runs = [(rust_pull(a.snapshot), arrow(a.snapshot, a.batch_size)) for _ in range(a.repeat)]
    n_rust, t_rust, _ = min((r for r, _ in runs), key=lambda r: r[1])
    n_arrow, t_arrow, _ = min((r for _, r in runs), key=lambda r: r[1])
    # CPU time of the calling thread (both decode on it): less sensitive to other processes
    # taking the cores than wall time, given for information.
    c_rust = min(r[2] for r, _ in runs)
    c_arrow = min(r[2] for _, r in runs)
    if n_rust != n_arrow:
        print(f"element counts differ: rust {n_rust}, arrow {n_arrow}", file=sys.stderr)
        return 2
    r_rust, r_arrow = n_rust / t_rust, n_arrow / t_arrow
    print(f"snapshot      {a.snapshot}")
    print(f"rust pull API {n_rust:>10} elements {t_rust:7.3f} s {r_rust / 1e6:7.2f} M elements/s")
    print(f"arrow batches {n_arrow:>10} elements {t_arrow:7.3f} s {r_arrow / 1e6:7.2f} M elements/s")
    if a.objects:
        n, t = best(lambda: objects(a.snapshot), a.repeat)
        print(f"Element objs  {n:>10} elements {t:7.3f} s {n / t / 1e6:7.2f} M elements/s")
    ratio = r_arrow / r_rust
    print(f"ratio arrow / rust = {ratio:.2f} (best of {a.repeat} runs each)")
    print(f"CPU time (this thread): rust {c_rust:.3f} s, arrow {c_arrow:.3f} s, "
          f"ratio of rates {c_rust / c_arrow:.2f} (information)")
    return 0 if ratio >= a.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
