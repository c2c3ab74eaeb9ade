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


def test_killed_worker_others_merge_and_failure_reported(generated, tmp_path):
    """A smaller fleet_bench: 40 captures of 4 protocols and a corrupt one on 2 worker processes;
    one worker is killed (SIGKILL) as the first task completes. Its tasks run again on the other
    worker, the merged profile equals the serial merge, and the corrupt capture is reported."""
    import os
    import signal

    distributed = pytest.importorskip("dask.distributed")
    protocols = ["etmv4", "ete", "ptm", "etmv3"]
    paths = [str(generated(protocols[s % 4], s, "--length", "3000")) for s in range(100, 140)]
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "snapshot.ini").write_text("[snapshot]\nversion=1.0\n[device_list]\ndevice0=missing.ini\n")
    paths.insert(17, str(bad))
    serial = fleet.run_serial(paths)
    killed = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        pids = client.run(os.getpid)

        def kill_one(done, total):
            if killed or done == total:
                return
            busy = [w for w, keys in client.processing().items() if keys and w in pids]
            victim = busy[0] if busy else sorted(pids)[0]
            os.kill(pids[victim], signal.SIGKILL)
            killed.append((victim, done, total))

        result = fleet.run(paths, client, per_task=1, on_progress=kill_one)
    assert killed and killed[0][1] < killed[0][2], "no worker was killed mid-run"
    assert list(result.failures) == [str(bad)], result.failures
    assert result.profile.to_json() == serial.profile.to_json()
    assert result.profile.captures == 40
    assert sorted(result.done) == sorted(p for p in paths if p != str(bad))
    assert list(result.failures) == [str(bad)]
    assert "OpenError" in result.failures[str(bad)]
