#!/usr/bin/env python3
"""Writes seed corpora for the fuzz targets from snapshot directories.

    python3 fuzz/seeds.py [OUT_DIR] [SNAPSHOT_DIR...]

OUT_DIR defaults to fuzz/corpus; snapshot directories default to the
project's snapshots/*. Each snapshot gives, in the layout of
fuzz/src/lib.rs: one seed per trace source for its protocol's target
(flags, image base, registers, trace), its trace buffer for the
deformatter target (and, formatted, as it is for the paths target), and its .ini files for the snapshot target. The ELF
target gets small hand-made ELF files. Corpora are not committed.
"""

import configparser
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Must match Protocol::registers() and CORES in fuzz/src/lib.rs.
REGISTERS = {
    "etmv4": ["TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8", "TRCIDR9", "TRCIDR10",
              "TRCIDR11", "TRCIDR12", "TRCIDR13"],
    "ete": ["TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8", "TRCDEVARCH"],
    "ptm": ["ETMIDR", "ETMCR", "ETMCCER", "ETMTRACEIDR"],
    "etmv3": ["ETMIDR", "ETMCR", "ETMCCER", "ETMTRACEIDR"],
    "stm": ["STMTCSR"],
    "itm": ["ITMTCR"],
}
DEFAULTS = {"TRCIDR1": 0x4100F403, "TRCDEVARCH": 0x47705A13}
CORES = ["Cortex-A72", "Cortex-A53", "Cortex-M33", "Cortex-A15", "Cortex-A7", "Cortex-A520", "Cortex-X2", "Neoverse-N2"]
MAX_TRACE = 16384


def target_of(device_type):
    t = device_type.upper()
    for prefix, target in (("ETM4", "etmv4"), ("ETE", "ete"), ("PTM", "ptm"), ("PFT", "ptm"), ("ETM3", "etmv3"),
                           ("STM", "stm"), ("ITM", "itm")):
        if t.startswith(prefix):
            return target
    return None


def read_ini(path):
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    with open(path, encoding="utf-8", errors="replace") as f:
        p.read_string(f.read())
    return p


def number(s):
    return int(s, 0)


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def snapshot_seeds(out, ss):
    tag = os.path.basename(os.path.normpath(ss))
    main = read_ini(os.path.join(ss, "snapshot.ini"))
    devices = {}
    files = {"snapshot.ini": open(os.path.join(ss, "snapshot.ini"), "rb").read()}
    for _, f in main.items("device_list"):
        ini = read_ini(os.path.join(ss, f))
        devices[ini.get("device", "name")] = ini
        files[f] = open(os.path.join(ss, f), "rb").read()
    meta_name = main.get("trace", "metadata")
    meta = read_ini(os.path.join(ss, meta_name))
    files[meta_name] = open(os.path.join(ss, meta_name), "rb").read()
    write(out, "snapshot", tag, b"\0".join(n.encode() + b"\1" + t for n, t in files.items()))

    core_of = {src: core for core, src in meta.items("core_trace_sources")} if meta.has_section("core_trace_sources") else {}
    for n, bname in enumerate(b.strip() for b in meta.get("trace_buffers", "buffers").split(",")):
        buf = meta[bname]
        trace = b"".join(open(os.path.join(ss, f.strip()), "rb").read() for f in buf["file"].split(","))[:MAX_TRACE]
        fmt = buf["format"]
        fbits = {"source_data": 0, "coresight": 1, "dstream_coresight": 3}.get(fmt, 0)
        if fbits:
            write(out, "deformatter", f"{tag}-{n}", bytes([fbits & 3, 0]) + b"\xff" * 16 + trace)
            # Formatted trace as it is, for the every-path target.
            if fbits == 1:
                write(out, "paths", f"{tag}-{n}", trace)
            write(out, "deformatter", f"{tag}-{n}-raw", bytes([fbits & 3, 7]) + b"\xff" * 16 + trace)
        for src, b in meta.items("source_buffers"):
            if b != buf["name"] or src not in devices:
                continue
            dev = devices[src]
            target = target_of(dev.get("device", "type"))
            if target is None:
                continue
            regs = {k.split("(")[0].strip().upper(): number(v) for k, v in dev.items("regs")} if dev.has_section("regs") else {}
            base = 0
            core = 0
            if src in core_of and core_of[src] in devices:
                cdev = devices[core_of[src]]
                ctype = cdev.get("device", "type")
                core = CORES.index(ctype) if ctype in CORES else 0
                dumps = [s for s in cdev.sections() if s.lower().startswith("dump")]
                if dumps:
                    base = number(cdev[dumps[0]]["address"])
            head = bytes([fbits | core << 2, 0]) + struct.pack("<Q", base)
            head += b"".join(struct.pack("<I", regs.get(r, DEFAULTS.get(r, 0)) & 0xFFFFFFFF) for r in REGISTERS[target])
            write(out, target, f"{tag}-{src}-{n}", head + trace)
            # The same trace as packets only, with the packet printer and waits.
            write(out, target, f"{tag}-{src}-{n}-pkts", bytes([head[0] | 0xE0]) + head[1:] + trace)


def elf_seeds(out):
    """Small ELF files: 64- and 32-bit, one or two loadable segments."""
    for bits in (64, 32):
        for nseg in (1, 2):
            code = bytes(range(64))
            if bits == 64:
                ehsize, phsize = 64, 56
                phoff = ehsize
                data_off = phoff + nseg * phsize
                eh = b"\x7fELF\x02\x01\x01" + b"\0" * 9
                eh += struct.pack("<HHIQQQIHHHHHH", 2, 0xB7, 1, 0x400000, phoff, 0, 0, ehsize, phsize, nseg, 64, 0, 0)
                ph = b"".join(struct.pack("<IIQQQQQQ", 1, 5, data_off, 0x400000 + 0x1000 * i, 0x400000 + 0x1000 * i,
                                          len(code), len(code), 0x1000) for i in range(nseg))
            else:
                ehsize, phsize = 52, 32
                phoff = ehsize
                data_off = phoff + nseg * phsize
                eh = b"\x7fELF\x01\x01\x01" + b"\0" * 9
                eh += struct.pack("<HHIIIIIHHHHHH", 2, 0x28, 1, 0x8000, phoff, 0, 0, ehsize, phsize, nseg, 40, 0, 0)
                ph = b"".join(struct.pack("<IIIIIIII", 1, data_off, 0x8000 + 0x1000 * i, 0x8000 + 0x1000 * i,
                                          len(code), len(code), 5, 0x1000) for i in range(nseg))
            write(out, "elf", f"elf{bits}-{nseg}", eh + ph + code)


def reader_seeds(out):
    """Seeds for the readers and the plug-in: the project's Tarmac and
    gnatcov fixtures (in pieces), and the RISC-V example trace behind a
    header in the layout of run_riscv (trace register, ISA, buffer words,
    write pointer)."""
    fx = os.path.join(ROOT, "formats", "tarmac", "tests", "fixtures")
    for name in sorted(os.listdir(fx)) if os.path.isdir(fx) else []:
        if name.endswith(".tarmac"):
            with open(os.path.join(fx, name), "rb") as f:
                data = f.read()
            for k in range(0, min(len(data), 16384), 4096):
                write(out, "tarmac", f"{name}-{k}", data[k:k + 4096])
    cov = os.path.join(ROOT, "tools", "tests", "fixtures", "cov")
    for name in sorted(os.listdir(cov)) if os.path.isdir(cov) else []:
        if name.endswith(".trace"):
            with open(os.path.join(cov, name), "rb") as f:
                write(out, "gnatcov", name, f.read())
    rv = os.path.join(ROOT, "plugins", "riscv-trace", "snapshots", "qemu-calls", "trace.bin")
    if os.path.exists(rv):
        with open(rv, "rb") as f:
            trace = f.read()
        for emit, isa in ((0x00FF0001, 3), (0x00030001, 1), (0x01FF0001, 2)):
            write(out, "riscv", f"qemu-calls-{emit:x}-{isa}", struct.pack("<IBBB", emit, isa, 32, 0) + trace[:8192])


def perf_data_seeds(out):
    """Seeds for the perf.data reader: a minimal PERFILE2 file with one
    attribute and an empty data section, and the real simpleperf
    recordings when ../shared is beside the project (seeds only; nothing
    of them is committed)."""
    attr_size = 136
    attr = struct.pack("<IIQQQ", 8, attr_size, 0x4000, 0, 0x1c7) + bytes(attr_size - 32)
    header_size = 104
    attrs_off = header_size
    ids_off = attrs_off + attr_size + 16
    data_off = ids_off + 8
    header = b"PERFILE2" + struct.pack("<QQ", header_size, attr_size + 16)
    header += struct.pack("<QQ", attrs_off, attr_size + 16)
    header += struct.pack("<QQ", data_off, 0)
    header += struct.pack("<QQ", 0, 0) + bytes(32)
    entry = attr + struct.pack("<QQ", ids_off, 8)
    write(out, "perf_data", "minimal", header + entry + struct.pack("<Q", 71))
    sp = os.path.join(ROOT, "..", "shared", "corpus", "simpleperf")
    for name in sorted(os.listdir(sp)) if os.path.isdir(sp) else []:
        if name.endswith(".data") and name.startswith("perf_") and name != "perf_inject.data":
            with open(os.path.join(sp, name), "rb") as f:
                write(out, "perf_data", name, f.read())


def capture_hash(data):
    """The library's capture_hash (crate::index): FNV-1a over 8-byte
    little-endian words, then a final mix."""
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for k in range(0, len(data), 8):
        w = data[k:k + 8].ljust(8, b"\0")
        h = ((h ^ struct.unpack("<Q", w)[0]) * 0x100000001b3) & m
    h ^= len(data)
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & m
    return h ^ (h >> 33)


def index_seeds(out):
    """Index files in the saved format (crate::index::file), version 1:
    a single-source one and a formatted one with a source index, both
    with a stream of each entry kind."""
    def stream(tid, name, entries):
        b = struct.pack("<BB", tid, len(name)) + name + struct.pack("<Q", len(entries))
        return b + b"".join(struct.pack("<QBQ", i, k, v) for i, k, v in entries)
    entries = [(4 * n, 1 + n % 12, n * 1000) for n in range(24)]
    for tag, fmt, source in (
        ("single", b"\0\0\0\0", b"\0"),
        ("formatted", b"\1\1\0\0",
         b"\1" + struct.pack("<IQ", 64, 2) + (1 << 0x10).to_bytes(16, "little") + struct.pack("<QB", 0, 0x10)
         + (1 << 0x11).to_bytes(16, "little") + struct.pack("<QB", 64, 0x11) + struct.pack("<QQ", 1, 32) + struct.pack("<Q", 0)),
    ):
        body = b"CSDIDX\r\n" + struct.pack("<IQQ", 1, 128, 0x1234) + fmt + struct.pack("<QQ", 0, 128) + source
        body += struct.pack("<I", 2) + stream(0x10, b"ETMV4I", entries) + stream(0x11, b"STM", entries[:5])
        write(out, "index", tag, body + struct.pack("<Q", capture_hash(body)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus")
    dirs = sys.argv[2:] or sorted(os.path.join(ROOT, "snapshots", d) for d in os.listdir(os.path.join(ROOT, "snapshots"))
                                  if os.path.isdir(os.path.join(ROOT, "snapshots", d)))
    for d in dirs:
        snapshot_seeds(out, d)
    elf_seeds(out)
    reader_seeds(out)
    perf_data_seeds(out)
    index_seeds(out)
    for t in sorted(os.listdir(out)):
        print(f"{t}: {len(os.listdir(os.path.join(out, t)))} seeds")


if __name__ == "__main__":
    main()
