"""Fleet decode on Dask distributed: decode many captures as tasks and merge their profiles.

Each capture (a snapshot directory or a perf.data file) is decoded by one task into a
:class:`Profile` (AutoFDO-style range and branch counts, instruction and element totals). Profiles
are sums, so merging is associative and commutative: the merged profile of a fleet run equals the
serial merge, whatever the order tasks finish in. A capture that fails is reported in
:attr:`FleetResult.failures` with its error message and the others still merge.

Local cluster (worker processes on this machine)::

    from dask.distributed import Client, LocalCluster
    from coresight_decode import fleet

    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
        result = fleet.run(paths, client)
    result.profile.write_autofdo("merged.afdo.txt")

Branch lists (simpleperf's compact form, as a fleet of devices sends them home): each device's
recordings are decoded by one task into one :class:`~coresight_decode.BranchList`, the lists are
merged on the client and turned into one AutoFDO profile, the same text as ``trc_perf autofdo``
on all the recordings::

    result = fleet.run_branch_lists({"phone-a": [a1, a2], "phone-b": [b1]}, client, symdirs=[syms])
    text = result.autofdo(symdirs=[syms])

Multi-node: start ``dask scheduler`` on one machine and ``dask worker tcp://HOST:8786`` on each
of the others (all with this package installed and the captures at the same paths, e.g. a shared
file system), then ``Client("tcp://HOST:8786")`` in place of the local cluster: no other change.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = [
    "Profile",
    "FleetResult",
    "BranchListResult",
    "profile_capture",
    "run",
    "run_serial",
    "device_branch_list",
    "run_branch_lists",
]


@dataclass
class Profile:
    """Mergeable counts over one or more captures."""

    ranges: Counter = field(default_factory=Counter)
    """``{(start, end): times the range was executed}``"""
    branches: Counter = field(default_factory=Counter)
    """``{(from, to): times the branch was taken}``"""
    instructions: int = 0
    elements: int = 0
    captures: int = 0

    def merge(self, other: "Profile") -> "Profile":
        """Adds ``other`` into this profile and returns it."""
        self.ranges.update(other.ranges)
        self.branches.update(other.branches)
        self.instructions += other.instructions
        self.elements += other.elements
        self.captures += other.captures
        return self

    def __add__(self, other: "Profile") -> "Profile":
        return Profile().merge(self).merge(other)

    @classmethod
    def from_native(cls, d: Dict[str, Any]) -> "Profile":
        return cls(Counter(d["ranges"]), Counter(d["branches"]), d["instructions"], d["elements"], 1)

    def to_json(self) -> Dict[str, Any]:
        """A JSON-ready dict (addresses as hex strings), sorted so equal profiles give equal text."""
        return {
            "captures": self.captures,
            "instructions": self.instructions,
            "elements": self.elements,
            "ranges": [[f"0x{s:x}", f"0x{e:x}", n] for (s, e), n in sorted(self.ranges.items())],
            "branches": [[f"0x{s:x}", f"0x{d:x}", n] for (s, d), n in sorted(self.branches.items())],
        }

    def write_autofdo(self, path: str) -> None:
        """Writes the counts in AutoFDO's text form (range counts, then branch counts; no
        address-to-binary mapping: addresses as traced)."""
        with open(path, "w") as f:
            f.write(f"{len(self.ranges)}\n")
            for (s, e), n in sorted(self.ranges.items()):
                f.write(f"{s:x}-{e:x}:{n}\n")
            f.write("0\n")
            f.write(f"{len(self.branches)}\n")
            for (s, d), n in sorted(self.branches.items()):
                f.write(f"{s:x}->{d:x}:{n}\n")


def profile_capture(path: str, symdirs: Sequence[str] = ()) -> Profile:
    """Decodes one capture (snapshot directory or perf.data) into a :class:`Profile`. Raises
    :class:`coresight_decode.CoreSightError` if it cannot be opened or decoded."""
    import coresight_decode as csd

    return Profile.from_native(csd.open(path, symdirs).profile())


def _task(path: str, symdirs: Tuple[str, ...]) -> Tuple[str, Optional[Profile], Optional[str]]:
    """A task: never raises, so a failed capture is a result, not a lost worker's retry."""
    try:
        return path, profile_capture(path, symdirs), None
    except Exception as e:  # noqa: BLE001 - reported, not raised
        return path, None, f"{type(e).__name__}: {e}"


@dataclass
class FleetResult:
    """A merged profile and the captures that failed."""

    profile: Profile
    done: List[str]
    failures: Dict[str, str]
    """``{path: error message}``"""

    def write(self, out_dir: str) -> str:
        """Writes ``profile.json`` and ``failures.json`` into ``out_dir``; returns the profile's path."""
        os.makedirs(out_dir, exist_ok=True)
        p = os.path.join(out_dir, "profile.json")
        with open(p, "w") as f:
            json.dump(self.profile.to_json(), f)
        with open(os.path.join(out_dir, "failures.json"), "w") as f:
            json.dump(self.failures, f, indent=1, sort_keys=True)
        return p


def run_serial(paths: Iterable[str], symdirs: Sequence[str] = ()) -> FleetResult:
    """Decodes and merges the captures one after the other in this process."""
    total, done, failures = Profile(), [], {}
    for p in paths:
        path, prof, err = _task(os.fspath(p), tuple(symdirs))
        if prof is None:
            failures[path] = err or "failed"
        else:
            total.merge(prof)
            done.append(path)
    return FleetResult(total, done, failures)


def _group_task(paths: Tuple[str, ...], symdirs: Tuple[str, ...]) -> FleetResult:
    """A task: decodes a few captures and merges them on the worker (fewer tasks for the scheduler,
    less to send and merge on the client). Never raises: a failed capture is in ``failures``."""
    return run_serial(paths, symdirs)


def run(
    paths: Iterable[str],
    client: Any = None,
    symdirs: Sequence[str] = (),
    retries: int = 2,
    per_task: Optional[int] = None,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> FleetResult:
    """Decodes the captures as tasks on a Dask ``distributed.Client`` (default: the current one)
    and merges their profiles as they complete.

    Each task decodes at most ``per_task`` captures (default: enough for about 8 tasks per worker, at most
    16 captures a task) and merges them on its worker; the client adds up the partial profiles.
    Task keys are derived from the capture paths, so submitting the same captures twice runs them
    once. A worker lost mid-task (killed, out of memory) has its tasks run again on the others,
    ``retries`` times; a capture whose task still fails is reported in ``failures``, as is a
    capture that cannot be opened or decoded, and the others still merge. ``on_progress(done,
    total)`` is called on the client as tasks complete."""
    from dask.distributed import as_completed, get_client

    client = client or get_client()
    paths = [os.fspath(p) for p in paths]
    if per_task is None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        per_task = max(1, min(16, len(paths) // (8 * workers)))
        # As many tasks as a multiple of the workers, of sizes differing by one at most: the
        # last round of tasks does not leave a worker idle while another finishes a full task.
        tasks = -(-len(paths) // per_task)
        tasks = min(len(paths), -(-tasks // workers) * workers) if paths else 0
    else:
        tasks = -(-len(paths) // per_task)
    # Captures dealt out in turn, so each task has its share of every kind and size.
    groups = [tuple(paths[i::tasks]) for i in range(tasks)]
    sym = tuple(os.fspath(d) for d in symdirs)
    futures = []
    for i, g in enumerate(groups):
        digest = hashlib.sha1("\n".join(g + ("",) + sym).encode()).hexdigest()[:16]
        futures.append(client.submit(_group_task, g, sym, key=f"coresight-profile-{digest}-{i}", retries=retries, pure=False))
    group_of = {f.key: g for f, g in zip(futures, groups)}
    total, done, failures = Profile(), [], {}
    finished = 0
    for fut in as_completed(futures):
        group = group_of[fut.key]
        try:
            # Waits if the result was lost with its worker and is being computed again.
            part = fut.result()
        except Exception as e:  # noqa: BLE001 - the task failed on every try: reported
            for path in group:
                failures[path] = f"task failed: {type(e).__name__}: {e}"
        else:
            total.merge(part.profile)
            done.extend(part.done)
            failures.update(part.failures)
        fut.release()
        finished += 1
        if on_progress is not None:
            on_progress(finished, len(futures))
    done.sort()
    return FleetResult(total, done, failures)


@dataclass
class BranchListResult:
    """The branch lists of a fleet run: per device, merged, and the recordings that failed."""

    merged: Any
    """The :class:`~coresight_decode.BranchList` of all devices."""
    devices: Dict[str, Any]
    """``{device: its BranchList}``"""
    done: List[str]
    failures: Dict[str, str]
    """``{path: error message}``"""
    warnings: List[str]

    def autofdo(self, symdirs: Sequence[str] = (), binary: Optional[str] = None) -> str:
        """The AutoFDO text profile of the merged lists (binaries' code found under ``symdirs``,
        then at their recorded paths), as ``trc_perf autofdo`` writes it."""
        return self.merged.to_autofdo([os.fspath(d) for d in symdirs], binary)

    def write(self, out_dir: str, symdirs: Sequence[str] = (), binary: Optional[str] = None) -> str:
        """Writes ``merged.branch_list``, ``failures.json`` and ``autofdo.txt`` (the profile)
        into ``out_dir``; returns the profile's path."""
        os.makedirs(out_dir, exist_ok=True)
        self.merged.write(os.path.join(out_dir, "merged.branch_list"))
        with open(os.path.join(out_dir, "failures.json"), "w") as f:
            json.dump(self.failures, f, indent=1, sort_keys=True)
        p = os.path.join(out_dir, "autofdo.txt")
        with open(p, "w") as f:
            f.write(self.autofdo(symdirs, binary))
        return p


def device_branch_list(
    device: str, paths: Tuple[str, ...], symdirs: Tuple[str, ...], binary: Optional[str]
) -> Tuple[str, Any, List[str], Dict[str, str], List[str]]:
    """A task: one device's recordings into one branch list, as the device would send it home.
    Never raises: a recording that fails is in the failures and the others still count.
    Returns ``(device, list, done, failures, warnings)``."""
    import coresight_decode as csd

    merged, done, failures, warnings = csd.BranchList(), [], {}, []
    for p in paths:
        try:
            one = csd.BranchList.from_perf([p], list(symdirs), binary)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            failures[p] = f"{type(e).__name__}: {e}"
            continue
        merged.merge(one)
        done.append(p)
    warnings.extend(merged.warnings)
    return device, merged, done, failures, warnings


def run_branch_lists(
    devices: Any,
    client: Any = None,
    symdirs: Sequence[str] = (),
    binary: Optional[str] = None,
    retries: int = 2,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> BranchListResult:
    """Decodes each device's perf.data recordings into a branch list, one task per device on a
    Dask ``distributed.Client`` (default: the current one; ``client=False``: in this process),
    and merges the lists as they complete.

    ``devices``: ``{device name: [recording paths]}``, or a list of paths (each its own device,
    named by its path). ``binary``: keep only binaries whose path this regular expression
    matches. A recording that cannot be read or decoded is reported in ``failures``; a task lost
    with its worker runs again, ``retries`` times, then its recordings are reported."""
    if isinstance(devices, dict):
        groups = {str(d): tuple(os.fspath(p) for p in ps) for d, ps in devices.items()}
    else:
        groups = {os.fspath(p): (os.fspath(p),) for p in devices}
    sym = tuple(os.fspath(d) for d in symdirs)
    import coresight_decode as csd

    merged, per_device, done, failures, warnings = csd.BranchList(), {}, [], {}, []

    def take(part: Tuple[str, Any, List[str], Dict[str, str], List[str]]) -> None:
        device, bl, d, f, w = part
        per_device[device] = bl
        merged.merge(bl)
        done.extend(d)
        failures.update(f)
        warnings.extend(w)

    if client is False:
        for i, (device, paths) in enumerate(groups.items()):
            take(device_branch_list(device, paths, sym, binary))
            if on_progress is not None:
                on_progress(i + 1, len(groups))
    else:
        from dask.distributed import as_completed, get_client

        client = client or get_client()
        futures = []
        for device, paths in groups.items():
            digest = hashlib.sha1("\n".join((device,) + paths + ("",) + sym + (binary or "",)).encode()).hexdigest()[:16]
            futures.append(client.submit(device_branch_list, device, paths, sym, binary,
                                         key=f"coresight-branch-list-{digest}", retries=retries, pure=False))
        group_of = {f.key: d for f, d in zip(futures, groups)}
        finished = 0
        for fut in as_completed(futures):
            device = group_of[fut.key]
            try:
                part = fut.result()
            except Exception as e:  # noqa: BLE001 - the task failed on every try: reported
                for path in groups[device]:
                    failures[path] = f"task failed: {type(e).__name__}: {e}"
            else:
                take(part)
            fut.release()
            finished += 1
            if on_progress is not None:
                on_progress(finished, len(futures))
    done.sort()
    return BranchListResult(merged, per_device, done, failures, warnings)
