"""One element stream on every Python path (issue 49's guard, Python leg): generated captures of
every protocol, clean and with damaged bytes, decoded by the element iterator, Arrow batches and
pandas, each equal to ``trc_decode --format json`` element by element (or kind by kind), and a
decode that stops on an error stops at the same element with the error on every path."""

import json
import random
import shutil
import subprocess

import pytest

import coresight_decode as csd
from test_elements import unhex

PROTOCOLS = ["etmv4", "etmv4m", "ete", "ptm", "etmv3", "tc2", "stm", "itm"]
# (seed, bytes changed): clean, then damaged in one, three and eight places (ETMv3's seed 4
# stops on a fatal error: the error path).
CASES = [(1, 0), (2, 1), (3, 3), (4, 8)]


def damaged(snapshot, seed, n, tmp_path):
    """A copy of ``snapshot`` with ``n`` bytes of its trace buffers changed (seeded)."""
    if n == 0:
        return snapshot
    out = tmp_path / f"{snapshot.name}-damaged-{n}"
    shutil.copytree(snapshot, out)
    rng = random.Random(seed * 7919 + n)
    bins = sorted(out.glob("*.bin"))
    assert bins, f"{snapshot}: no trace buffer"
    for b in bins:
        data = bytearray(b.read_bytes())
        for _ in range(n):
            at = rng.randrange(len(data))
            data[at] ^= rng.randrange(1, 256)
        b.write_bytes(bytes(data))
    return out


def trc_decode_json(tools, snapshot):
    """trc_decode's elements, and whether it stopped on an error (exit status 1)."""
    p = subprocess.run([tools["trc_decode"], str(snapshot), "--format", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode in (0, 1), f"{snapshot}: trc_decode exit status {p.returncode}: {p.stderr}"
    if p.returncode == 1:
        assert "\ntrc_decode: decode stopped by a fatal error" in "\n" + p.stderr, p.stderr
    return [unhex(json.loads(line)) for line in p.stdout.splitlines() if line.strip()], p.returncode == 1


def python_elements(snapshot):
    """The iterator's elements as dicts, and whether it raised DecodeError at the end."""
    got = []
    try:
        for e in csd.open(snapshot):
            got.append(e.to_dict())
    except csd.DecodeError:
        return got, True
    return got, False


@pytest.mark.parametrize("seed,n", CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_python_path_gives_trc_decodes_elements(tools, generated, tmp_path, protocol, seed, n):
    snap = damaged(generated(protocol, seed, "--length", "80"), seed, n, tmp_path)
    ref, ref_stopped = trc_decode_json(tools, snap)
    got, stopped = python_elements(snap)
    assert len(ref) > 0
    assert stopped == ref_stopped
    # Element by element, the first difference shown.
    for i, (a, b) in enumerate(zip(got, ref)):
        assert a == b, f"element {i}"
    assert len(got) == len(ref)

    # Arrow's kinds: those with a table of their own, the rest in "other".
    by_kind = {}
    for e in ref:
        kind = e["type"] if e["type"] in csd.KINDS else "other"
        by_kind.setdefault(kind, []).append(e)
    if stopped:
        # The Arrow path stops on the same error, after the same batches' worth of elements.
        with pytest.raises(csd.DecodeError):
            for _ in csd.open(snap).batches(batch_size=1):
                pass
        return
    # Each kind's Arrow rows are its elements in order (index and trace ID), in batches of 1
    # and of the default size; counts without Python objects agree.
    types = {}
    for e in ref:
        types[e["type"]] = types.get(e["type"], 0) + 1
    assert csd.open(snap).count() == types
    for batch_size in (1, 65536):
        rows = {}
        for kind, batch in csd.open(snap).batches(batch_size=batch_size):
            assert batch.num_rows <= batch_size
            cols = batch.to_pydict()
            r = rows.setdefault(kind, {"index": [], "trace_id": []})
            r["index"] += cols["index"]
            r["trace_id"] += cols["trace_id"]
        assert set(rows) == set(by_kind)
        for kind, r in rows.items():
            assert r["index"] == [e["index"] for e in by_kind[kind]], kind
            assert r["trace_id"] == [e["trace_id"] for e in by_kind[kind]], kind
    # pandas: the instruction ranges' addresses and counts, exactly.
    ranges = by_kind.get("instr_range", [])
    if ranges:
        df = csd.open(snap).to_pandas("instr_range")
        assert list(df["index"]) == [e["index"] for e in ranges]
        assert list(df["start"]) == [e["start"] for e in ranges]
        assert list(df["end"]) == [e["end"] for e in ranges]
        assert list(df["num_instr"]) == [e["num_instr"] for e in ranges]
