"""Branch lists from Python: the same bytes and AutoFDO text as trc_perf, merged per device and
across devices by the fleet job into the profile the direct route gives.

The real recordings are the simpleperf ones of the shared corpus (../shared/corpus/simpleperf,
beside the repository); trc_gen's perf.data recordings add a second binary."""

import pickle
import subprocess
import warnings
from pathlib import Path

import pytest

import coresight_decode as csd
from coresight_decode import fleet

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "simpleperf"
if not (CORPUS / "perf_etm.data").is_file():
    pytest.skip(f"the simpleperf recordings are not in {CORPUS}", allow_module_level=True)
ETM = str(CORPUS / "perf_etm.data")
UNFORMATTED = str(CORPUS / "perf_with_unformatted_trace.data")


def trc_perf_autofdo(tools, tmp_path, inputs, symdirs, *extra):
    """What ``trc_perf autofdo`` writes for ``inputs`` (recordings or branch list files)."""
    out = tmp_path / f"autofdo-{len(list(tmp_path.iterdir()))}"
    args = [tools["trc_perf"], "autofdo", *map(str, inputs), "-o", str(out), *extra]
    for d in symdirs:
        args += ["--symdir", str(d)]
    subprocess.run(args, check=True)
    return out.read_bytes()


def test_bytes_and_profile_are_trc_perfs(tools, tmp_path):
    bl = tmp_path / "etm.branch_list"
    subprocess.run([tools["trc_perf"], "autofdo", ETM, "--symdir", str(CORPUS), "--output", "branch-list",
                    "-o", str(bl)], check=True)
    mine = csd.BranchList.from_perf([ETM], [str(CORPUS)])
    assert mine.to_bytes() == bl.read_bytes()
    assert csd.BranchList.read(bl) == mine
    assert len(mine) == 1 and mine.overflows == 0 and mine.warnings == []
    (b,) = mine.binaries()
    assert (b["path"], b["build_id"], b["kind"]) == ("/data/local/tmp/etm_test_loop",
                                                    "0c9a20bf9c009d0e4e8bbf9fad0300ae00000000", "elf")
    assert sorted(b["branches"]) == [0x1000, 0x108c, 0x10a4]
    assert b["branches"][0x1000] == {"111": 1} and b["branches"][0x10a4] == {"1": 1}
    assert b["branches"][0x108c] == {"1" * 201 + "011": 1}
    mine.write(tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == bl.read_bytes()
    # The AutoFDO text of the list equals trc_perf's from the recording, and simpleperf's.
    direct = trc_perf_autofdo(tools, tmp_path, [ETM], [CORPUS])
    assert mine.to_autofdo([str(CORPUS)]).encode() == direct
    assert direct == (CORPUS / "perf_inject.data").read_bytes()
    assert pickle.loads(pickle.dumps(mine)) == mine


def test_merge_adds_counts_as_trc_perf_does(tools, tmp_path):
    a = csd.BranchList.from_perf([ETM], [str(CORPUS)])
    b = csd.BranchList.from_perf([UNFORMATTED], [str(CORPUS)])
    both = csd.BranchList.from_perf([ETM, UNFORMATTED], [str(CORPUS)])
    assert a != both
    a.merge(b)
    assert a == both
    assert a.binaries()[0]["branches"][0x1000] == {"111": 2}
    direct = trc_perf_autofdo(tools, tmp_path, [ETM, UNFORMATTED], [CORPUS])
    assert a.to_autofdo([str(CORPUS)]).encode() == direct
    # simpleperf's test: both recordings add up to this branch count.
    assert b"106c->1074:200\n" in direct
    assert a.to_autofdo([str(CORPUS)], binary="no_etm_test_loop") == ""
    assert csd.BranchList.from_perf([ETM], [str(CORPUS)], binary="no_etm_test_loop").binaries() == []


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(csd.OpenError, match="not a branch list file"):
        csd.BranchList.from_bytes(b"PERFILE2 is not a protocol buffer")
    missing = tmp_path / "missing.branch_list"
    with pytest.raises(csd.OpenError, match=f"^{missing}: No such file"):
        csd.BranchList.read(missing)
    bl = tmp_path / "etm.branch_list"
    csd.BranchList.from_perf([ETM], [str(CORPUS)]).write(bl)
    with pytest.raises(csd.OpenError, match=f"^{bl}: not a perf.data file: the magic at offset 0"):
        csd.BranchList.from_perf([str(bl)])
    with pytest.raises(ValueError, match="binary"):
        csd.BranchList.from_perf([ETM], binary="(")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        text = csd.BranchList.read(bl).to_autofdo([str(tmp_path)])
    assert text == ""
    assert [str(x.message) for x in w] == [
        "branch lists of /data/local/tmp/etm_test_loop not used: its code is needed (not found)"]


@pytest.fixture(scope="module")
def fleet_devices(generated, tmp_path_factory):
    """Three devices' recordings (one of them also a corrupt one), and the symbol folders."""
    g1 = str(generated("etmv4", 7, perf=True))
    g2 = str(generated("ete", 3, perf=True))
    bad = tmp_path_factory.mktemp("bad") / "corrupt.data"
    bad.write_bytes(b"PERFILE2" + bytes(200))
    devices = {
        "phone-a": [ETM, g1],
        "phone-b": [UNFORMATTED, ETM],
        "phone-c": [g2, str(bad)],
    }
    symdirs = [str(CORPUS), str(Path(g1).parent)]
    return devices, symdirs, str(bad)


def check_fleet_result(result, devices, symdirs, bad, tools, tmp_path):
    good = [p for ps in devices.values() for p in ps if p != bad]
    # The merged lists give the AutoFDO text trc_perf writes from all the recordings directly.
    direct = trc_perf_autofdo(tools, tmp_path, good, symdirs)
    assert result.autofdo(symdirs).encode() == direct
    assert direct.startswith(b"// Please split this file.")
    assert sorted(result.done) == sorted(good)
    assert list(result.failures) == [bad]
    assert result.failures[bad].startswith(f"OpenError: {bad}: ")
    # Each device's list is what its recordings give, and they add up to the merged list.
    assert sorted(result.devices) == sorted(devices)
    total = csd.BranchList()
    for name, paths in devices.items():
        assert result.devices[name] == csd.BranchList.from_perf([p for p in paths if p != bad], symdirs)
        total.merge(result.devices[name])
    assert total == result.merged
    out = result.write(str(tmp_path / "out"), symdirs)
    assert Path(out).read_bytes() == direct
    assert csd.BranchList.read(tmp_path / "out" / "merged.branch_list") == result.merged


def test_fleet_branch_lists_on_local_cluster_give_the_direct_profile(fleet_devices, tools, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    devices, symdirs, bad = fleet_devices
    progress = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        result = fleet.run_branch_lists(devices, client, symdirs=symdirs,
                                        on_progress=lambda d, t: progress.append((d, t)))
    assert progress == [(1, 3), (2, 3), (3, 3)]
    check_fleet_result(result, devices, symdirs, bad, tools, tmp_path)


def test_fleet_branch_lists_in_process(fleet_devices, tools, tmp_path):
    devices, symdirs, bad = fleet_devices
    result = fleet.run_branch_lists(devices, False, symdirs=symdirs)
    check_fleet_result(result, devices, symdirs, bad, tools, tmp_path)
    # A list of paths: each recording its own device.
    single = fleet.run_branch_lists([ETM, UNFORMATTED], False, symdirs=[str(CORPUS)])
    assert sorted(single.devices) == sorted([ETM, UNFORMATTED])
    assert single.merged == csd.BranchList.from_perf([ETM, UNFORMATTED], [str(CORPUS)])
