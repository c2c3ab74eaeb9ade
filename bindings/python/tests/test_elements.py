"""Elements from Python equal the Rust decoder's (trc_decode --format json), element for element."""

import json
import subprocess
import threading
import time

import pytest

import coresight_decode as csd
from conftest import snapshot_dirs


def unhex(v):
    """trc_decode writes 64-bit values as hex strings; Python gives integers."""
    if isinstance(v, str) and v.startswith("0x"):
        return int(v, 16)
    if isinstance(v, dict):
        return {k: unhex(x) for k, x in v.items()}
    return v


def reference(tools, snapshot):
    out = subprocess.run([tools["trc_decode"], str(snapshot), "--format", "json"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return [unhex(json.loads(line)) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("snapshot", snapshot_dirs(), ids=lambda p: p.name)
def test_elements_equal_trc_decode_json(tools, snapshot):
    ref = reference(tools, snapshot)
    got = [e.to_dict() for e in csd.open(snapshot)]
    assert len(ref) > 0
    assert got == ref


@pytest.mark.parametrize("snapshot", snapshot_dirs(), ids=lambda p: p.name)
def test_counts_and_arrow_rows_equal_elements(snapshot):
    t = csd.open(snapshot)
    elements = list(t)
    by_kind = {}
    for e in elements:
        by_kind[e.kind] = by_kind.get(e.kind, 0) + 1
    assert t.count() == by_kind
    rows = {}
    for kind, batch in t.batches(batch_size=7):
        assert 0 < batch.num_rows <= 7
        assert batch.schema == csd.schema(kind)
        rows[kind] = rows.get(kind, 0) + batch.num_rows
    assert sum(rows.values()) == len(elements)
    for kind in ("instr_range", "pe_context", "exception", "timestamp"):
        assert rows.get(kind, 0) == by_kind.get(kind, 0)


@pytest.mark.parametrize("snapshot", snapshot_dirs(), ids=lambda p: p.name)
def test_instr_range_batches_equal_elements(snapshot):
    t = csd.open(snapshot)
    ranges = [e for e in t if e.kind == "instr_range"]
    table = t.to_arrow("instr_range", batch_size=16)
    assert table.num_rows == len(ranges)
    cols = table.to_pydict()
    assert cols["index"] == [e.index for e in ranges]
    assert cols["trace_id"] == [e.trace_id for e in ranges]
    assert cols["start"] == [e.start for e in ranges]
    assert cols["end"] == [e.end for e in ranges]
    assert cols["num_instr"] == [e.num_instr for e in ranges]
    assert cols["isa"] == [e.isa for e in ranges]
    assert cols["last_type"] == [e.last["kind"] for e in ranges]
    assert cols["last_subtype"] == [e.last["subtype"] for e in ranges]
    assert cols["last_size"] == [e.last["size"] for e in ranges]
    assert cols["cycle_count"] == [e.fields.get("cycle_count") for e in ranges]
    assert cols["taken"] == [e.last["executed"] and e.last["kind"] != "other" for e in ranges]
    assert cols["conditional"] == [e.last["conditional"] for e in ranges]


def test_context_and_timestamp_columns(generated):
    snap = generated("etmv4", 3, "--opt", "ts", "--opt", "ctxt")
    t = csd.open(snap)
    ctx, ts, expect = {}, {}, []
    for e in t:
        if e.kind == "pe_context":
            ctx[e.trace_id] = e.fields.get("context_id")
        elif e.kind == "timestamp":
            ts[e.trace_id] = e.timestamp
        elif e.kind == "instr_range":
            expect.append((ctx.get(e.trace_id), ts.get(e.trace_id)))
    cols = t.to_arrow("instr_range").to_pydict()
    assert list(zip(cols["context_id"], cols["timestamp"])) == expect
    assert any(c is not None for c, _ in expect)


def test_pandas_and_other_kinds():
    t = csd.open(csd_snapshot("stm-messages"))
    df = t.to_pandas("other")
    kinds = set(df["kind"])
    assert "swtrace" in kinds
    assert all(isinstance(x, str) and x for x in df["text"])


def csd_snapshot(name):
    from conftest import SNAPSHOTS
    return SNAPSHOTS / name


def test_element_attributes():
    e = next(e for e in csd.open(csd_snapshot("etmv4-a64")) if e.kind == "instr_range")
    assert e.end > e.start and e.num_instr > 0
    assert e.fields["start"] == e.start
    assert "INSTR_RANGE" in e.text
    with pytest.raises(AttributeError, match="instr_range element has no field 'number'"):
        e.number


def test_open_errors_have_the_library_message(tmp_path):
    with pytest.raises(csd.OpenError, match="snapshot.ini"):
        csd.open(tmp_path / "missing")
    with pytest.raises(csd.OpenError, match="no trace buffer named 'NOPE'"):
        csd.open_snapshot(csd_snapshot("etmv4-a64"), buffer="NOPE")
    bad = tmp_path / "bad.data"
    bad.write_bytes(b"PERFILE2" + b"\0" * 40)
    with pytest.raises(csd.OpenError, match="bad.data"):
        csd.open(bad)
    assert issubclass(csd.OpenError, csd.CoreSightError)
    assert issubclass(csd.DecodeError, csd.CoreSightError)
    with pytest.raises(ValueError, match="no element kind 'bogus'"):
        list(csd.open(csd_snapshot("etmv4-a64")).batches(["bogus"]))


ETM = {
    "protocol": "ETMV4I",
    "core": "Cortex-A53",
    "registers": {
        "TRCCONFIGR": 0x1, "TRCTRACEIDR": 0x10, "TRCIDR0": 0x280006E1, "TRCIDR1": 0x4100F421,
        "TRCIDR2": 0x00000488, "TRCIDR8": 0, "TRCIDR9": 0, "TRCIDR10": 0, "TRCIDR11": 0,
        "TRCIDR12": 0, "TRCIDR13": 0,
    },
}


def test_raw_buffer_with_configuration():
    t = csd.from_bytes(b"", [ETM], formatted=False, memory=[(0x8000_0000, bytes([0x1F, 0x20, 0x03, 0xD5]))])
    kinds = [e.kind for e in t]
    assert kinds == ["eo_trace"]
    with pytest.raises(csd.OpenError, match="unknown core type"):
        csd.from_bytes(b"", [dict(ETM, core="NotACore")])
    with pytest.raises(csd.OpenError):
        csd.from_bytes(b"", [dict(ETM, protocol="NOSUCH")])


def test_raw_buffer_equals_snapshot(generated):
    """The generated snapshot's trace and memory, given as bytes and registers."""
    import configparser

    snap = generated("etmv4", 5, "--unformatted")
    ini = configparser.ConfigParser()
    ini.optionxform = str
    ini.read(snap / "etm_0.ini")
    regs = {k.split("(")[0]: int(v, 0) for k, v in ini["regs"].items()}
    core = configparser.ConfigParser()
    core.read(snap / "cpu_0.ini")
    mem = []
    for sec in core.sections():
        if sec.lower().startswith("dump"):
            s = core[sec]
            mem.append((int(s["address"], 0), (snap / s["file"]).read_bytes()))
    core_type = core["device"]["type"]
    data = (snap / "trace.bin").read_bytes()
    t = csd.from_bytes(data, [{"protocol": "ETMV4I", "registers": regs, "core": core_type}],
                       formatted=False, memory=mem)
    assert [e.to_dict() for e in t] == [e.to_dict() for e in csd.open(snap)]
    # Arrow batches of a raw buffer are filled by its decode tree, as a snapshot's are.
    for kind in ("instr_range", "pe_context", "timestamp"):
        raw = t.to_arrow(kind, batch_size=5).to_pydict()
        assert raw == csd.open(snap).to_arrow(kind).to_pydict()
    ranges = [e for e in t if e.kind == "instr_range"]
    assert ranges
    assert t.to_arrow("instr_range", batch_size=5).to_pydict()["start"] == [e.start for e in ranges]


def test_perf_data(generated):
    rec = generated("etmv4", 2, perf=True)
    t = csd.open(rec, symdirs=[rec.parent])
    els = list(t)
    ranges = [e for e in els if e.kind == "instr_range"]
    assert ranges and all(e.cpu == 0 for e in ranges)
    assert t.count() == {k: sum(1 for e in els if e.kind == k) for k in {e.kind for e in els}}
    cols = t.to_arrow("instr_range").to_pydict()
    assert cols["start"] == [e.start for e in ranges]
    assert set(cols["cpu"]) == {0}


def test_decoding_releases_the_gil(generated):
    """A Python thread keeps running while the decode runs."""
    rec = generated("etmv4", 9, "--size", "8M", perf=True)
    t = csd.open(rec, symdirs=[rec.parent])
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.05)
    before = ticks[0]
    start = time.perf_counter()
    n = sum(t.count().values())
    elapsed = time.perf_counter() - start
    during = ticks[0] - before
    stop.set()
    th.join()
    assert n > 100_000
    assert elapsed > 0.05
    # With the GIL held for the whole call the thread would not have run at all.
    assert during > 1000, (during, elapsed)


@pytest.mark.parametrize("batch_size", [7, 65536])
@pytest.mark.parametrize("snapshot", snapshot_dirs(), ids=lambda p: p.name)
def test_state_columns_follow_each_source(snapshot, batch_size):
    """context_id, vmid, exception_level, security and timestamp of each instr_range row are those
    of its own source's latest pe_context and timestamp, across sources and batch boundaries."""
    t = csd.open(snapshot)
    ctx, ts, expect = {}, {}, []
    for e in t:
        if e.kind == "pe_context":
            f = e.fields
            ctx[e.trace_id] = (f.get("context_id"), f.get("vmid"), f.get("exception_level"), f.get("security"))
        elif e.kind == "timestamp":
            ts[e.trace_id] = e.timestamp
        elif e.kind == "instr_range":
            expect.append(ctx.get(e.trace_id, (None,) * 4) + (ts.get(e.trace_id),))
    cols = t.to_arrow("instr_range", batch_size=batch_size).to_pydict()
    names = ["context_id", "vmid", "exception_level", "security", "timestamp"]
    assert list(zip(*(cols[n] for n in names))) == expect


def test_pandas_integer_columns_stay_exact_and_nullable():
    """Nullable integer columns are pandas' nullable dtypes, not float64 (which rounds 64-bit values)."""
    import pandas as pd

    t = csd.open(csd_snapshot("etmv4-a64-all-options"))
    table = t.to_arrow("instr_range")
    df = t.to_pandas("instr_range")
    assert None in table.column("cpu").to_pylist()
    for col, dtype in (("timestamp", "UInt64"), ("context_id", "UInt32"), ("cycle_count", "UInt32"),
                       ("start", "UInt64"), ("cpu", "Int32"), ("pid", "Int32"), ("tid", "Int32")):
        assert str(df[col].dtype) == dtype, col
        assert [None if v is pd.NA else int(v) for v in df[col]] == table.column(col).to_pylist(), col
    # A value past 2**53 survives (float64 would make it 2**64).
    import pyarrow as pa
    got = pa.table({"ts": pa.array([2**64 - 1, None], pa.uint64())}).to_pandas(types_mapper=csd._pandas_int_dtype)
    assert got["ts"][0] == 2**64 - 1 and got["ts"][1] is pd.NA


def test_unsupported_etmv4_configuration_is_refused():
    """TRCCONFIGR.INSTP0 (load/store P0 elements) is not decoded: opening says so, naming the field."""
    regs = dict(ETM["registers"], TRCCONFIGR=0x3)
    with pytest.raises(csd.OpenError, match=r"TRCCONFIGR = 0x00000003: INSTP0 \(bits \[2:1\]\) = 0b01 traces loads"):
        csd.from_bytes(b"", [dict(ETM, registers=regs)], formatted=False)


def test_overlapping_memory_is_refused_naming_both_ranges():
    with pytest.raises(csd.OpenError, match=r"image at 0x80000002-0x80000005 \(Any\) overlaps the image at "
                                            r"0x80000000-0x80000003 \(Any\) already mapped"):
        csd.from_bytes(b"", [ETM], formatted=False, memory=[(0x8000_0000, bytes(4)), (0x8000_0002, bytes(4))])
