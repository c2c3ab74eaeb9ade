"""The fleet job on a local Dask cluster merges to the serial result and reports failures."""

import pytest

from coresight_decode import fleet


@pytest.fixture(scope="module")
def captures(generated):
    paths = []
    for seed in range(1, 5):
        paths.append(str(generated("etmv4", seed)))
        paths.append(str(generated("ete", seed)))
    paths.append(str(generated("ptm", 1)))
    paths.append(str(generated("etmv3", 1)))
    paths.append(str(generated("etmv4", 7, perf=True)))
    return paths


def single_runs(paths):
    """The sum of single-machine runs, one capture at a time."""
    total = fleet.Profile()
    for p in paths:
        total = total + fleet.profile_capture(p, [str(__import__("os").path.dirname(p))])
    return total


def test_local_cluster_equals_sum_of_single_runs(captures, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "snapshot.ini").write_text("[snapshot]\nversion=1.0\n[device_list]\ndevice0=missing.ini\n")
    symdirs = sorted({str(__import__("os").path.dirname(p)) for p in captures})
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        result = fleet.run(captures + [str(bad)], client, symdirs=symdirs)
    expect = single_runs(captures)
    assert result.profile.captures == len(captures)
    assert result.profile.to_json() == expect.to_json()
    assert result.profile.instructions > 0 and result.profile.branches
    assert sorted(result.done) == sorted(captures)
    assert list(result.failures) == [str(bad)]
    assert "OpenError" in result.failures[str(bad)]
    serial = fleet.run_serial(captures + [str(bad)], symdirs=symdirs)
    assert serial.profile.to_json() == expect.to_json()
    assert serial.failures == result.failures
    out = result.write(str(tmp_path / "out"))
    assert out.endswith("profile.json")


def test_profile_merge_is_associative_and_commutative(captures):
    a, b, c = (fleet.profile_capture(p) for p in captures[:3])
    assert ((a + b) + c).to_json() == (c + (b + a)).to_json()
