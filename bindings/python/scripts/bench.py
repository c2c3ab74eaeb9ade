"""Elements per second: the Rust decode alone (Trace.count, no Python objects) against Arrow
batches into pyarrow, and Element objects. Usage: python scripts/bench.py CAPTURE [SYMDIR]"""

import sys
import time

import coresight_decode as csd


def rate(label, fn, n=None):
    start = time.perf_counter()
    got = fn()
    dt = time.perf_counter() - start
    n = n or got
    print(f"{label:<28} {n:>10} elements {dt:7.3f} s {n / dt / 1e6:7.2f} M elements/s")
    return n


trace = csd.open(sys.argv[1], sys.argv[2:])
total = rate("rust decode (count)", lambda: sum(trace.count().values()))
rate("arrow batches (pyarrow)", lambda: sum(b.num_rows for _, b in trace.batches()), None)
rate("Element objects", lambda: sum(1 for _ in trace), None)
