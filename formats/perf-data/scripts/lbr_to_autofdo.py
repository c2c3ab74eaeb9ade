#!/usr/bin/env python3
"""`perf script -F ip,brstack` lines on standard input to an AutoFDO text profile, counted as
AutoFDO 0.19 counts LBR samples (sample_reader.cc): each sample's address; the newest branch;
for each older branch i, the range from its target to the source of branch i-1 (unless it runs
backwards or spans over 1 MiB) and the branch itself. Addresses are made offsets in the binary
by subtracting BASE (its map's start less its file offset), as create_llvm_prof --profiler=perf
sees them.

    lbr_to_autofdo.py BASE < script.txt > profile.txt
"""
import collections
import sys

base = int(sys.argv[1], 0)
r, a, b = collections.Counter(), collections.Counter(), collections.Counter()
for line in sys.stdin:
    f = line.split()
    if not f:
        continue
    a[int(f[0], 16) - base] += 1
    st = [tuple(int(x, 16) for x in e.split("/")[:2]) for e in f[1:] if e.startswith("0x")]
    if st:
        b[(st[0][0] - base, st[0][1] - base)] += 1
    for i in range(1, len(st)):
        begin, end = st[i][1], st[i - 1][0]
        if end < begin or end - begin > 1 << 20:
            continue
        r[(begin - base, end - base)] += 1
        b[(st[i][0] - base, st[i][1] - base)] += 1
print(len(r))
for (x, y), c in sorted(r.items()):
    print(f"{x:x}-{y:x}:{c}")
print(len(a))
for x, c in sorted(a.items()):
    print(f"{x:x}:{c}")
print(len(b))
for (x, y), c in sorted(b.items()):
    print(f"{x:x}->{y:x}:{c}")
