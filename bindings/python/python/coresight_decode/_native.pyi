"""Type stubs of the extension module ``coresight_decode._native``."""

from os import PathLike
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

_Path = Union[str, PathLike[str]]

KINDS: List[str]
"""The element kinds with an Arrow schema: instr_range, i_range_nopath, pe_context, exception,
timestamp, addr_nacc, other (every other kind: its name and OpenCSD text)."""

class CoreSightError(Exception):
    """Base class of the errors of coresight_decode."""

class OpenError(CoreSightError):
    """A capture could not be opened (snapshot, configuration or perf.data file)."""

class DecodeError(CoreSightError):
    """A decode stopped on an error (the elements before it were delivered)."""

class Element:
    """One decoded element. Kind-specific fields are attributes (``e.start``), and in
    :attr:`fields`; accessing a field the kind does not have raises ``AttributeError``."""

    @property
    def index(self) -> int:
        """Trace index: byte offset of the packet (or frame) in the buffer."""
    @property
    def trace_id(self) -> int:
        """Trace ID of the source (0 for an unformatted single source)."""
    @property
    def kind(self) -> str:
        """``instr_range``, ``pe_context``, ``exception``, ``timestamp``, ``no_sync``..."""
    @property
    def text(self) -> str:
        """The element as OpenCSD's listing prints it."""
    @property
    def cpu(self) -> Optional[int]:
        """CPU (perf.data only)."""
    @property
    def buffer(self) -> Optional[int]:
        """AUX buffer index (perf.data only)."""
    @property
    def pid(self) -> Optional[int]:
        """Process, -1 when unknown (perf.data only)."""
    @property
    def tid(self) -> Optional[int]:
        """Thread, -1 when unknown (perf.data only)."""
    @property
    def fields(self) -> Dict[str, Any]:
        """The kind's fields, as in ``trc_decode --format json`` but with integers."""
    def to_dict(self) -> Dict[str, Any]:
        """``{"index", "trace_id", "type", **fields}``."""
    def __getattr__(self, name: str) -> Any: ...

class ElementIter(Iterator[Element]):
    def __iter__(self) -> ElementIter: ...
    def __next__(self) -> Element: ...

class ArrowBatch:
    """A record batch implementing the Arrow PyCapsule interface."""

    @property
    def kind(self) -> str: ...
    @property
    def num_rows(self) -> int: ...
    def __arrow_c_array__(self, requested_schema: Optional[object] = None) -> Tuple[object, object]: ...
    def __arrow_c_schema__(self) -> object: ...

class ArrowSchema:
    def __arrow_c_schema__(self) -> object: ...

class BatchIter(Iterator[Tuple[str, ArrowBatch]]):
    def __iter__(self) -> BatchIter: ...
    def __next__(self) -> Tuple[str, ArrowBatch]: ...

class Trace:
    """A capture to decode; each decode starts from its beginning, with the GIL released."""

    @staticmethod
    def snapshot(path: _Path, buffer: Optional[str] = None) -> Trace: ...
    @staticmethod
    def perf(path: _Path, symdirs: Sequence[_Path] = ...) -> Trace: ...
    @staticmethod
    def raw(
        data: bytes,
        sources: Sequence[Dict[str, Any]],
        formatted: bool = True,
        memory: Sequence[Tuple[int, bytes]] = ...,
        elfs: Sequence[_Path] = ...,
    ) -> Trace: ...
    def elements(self) -> ElementIter: ...
    def __iter__(self) -> ElementIter: ...
    def batches(self, kinds: Optional[Sequence[str]] = None, batch_size: int = 65536) -> BatchIter: ...
    def profile(self) -> Dict[str, Any]: ...
    def count(self) -> Dict[str, int]: ...

class BranchList:
    """simpleperf's ETM branch list file: per binary, start addresses and the taken (1) / not
    taken (0) outcomes of the branches met from each, with counts. Mergeable; pickled as its
    file's bytes."""

    def __init__(self) -> None: ...
    @staticmethod
    def from_bytes(data: bytes) -> BranchList:
        """Raises :class:`OpenError` if ``data`` is not a branch list file."""
    @staticmethod
    def read(path: _Path) -> BranchList:
        """Raises :class:`OpenError` naming ``path`` if it cannot be read or is not one."""
    @staticmethod
    def from_perf(paths: Sequence[_Path], symdirs: Sequence[_Path] = ..., binary: Optional[str] = None) -> BranchList:
        """The branch lists of perf.data recordings, as ``trc_perf autofdo --output branch-list``;
        ``binary``: keep binaries whose path this regular expression matches."""
    def to_bytes(self) -> bytes: ...
    def write(self, path: _Path) -> None: ...
    def merge(self, other: BranchList) -> None:
        """Adds ``other``'s counts into this list."""
    def to_autofdo(self, symdirs: Sequence[_Path] = ..., binary: Optional[str] = None) -> str:
        """The AutoFDO text profile, as ``trc_perf autofdo`` writes it; a binary whose code is not
        found is left out with a ``UserWarning``."""
    def binaries(self) -> List[Dict[str, Any]]:
        """``[{"path", "build_id", "kind", "branches": {start: {"0110": count}}}]``"""
    @property
    def overflows(self) -> int: ...
    @property
    def warnings(self) -> List[str]: ...
    def __len__(self) -> int: ...

def schema(kind: str) -> ArrowSchema: ...
def pull_count(path: str, buffer: Optional[str] = None) -> Tuple[int, float]:
    """Benchmark reference: ``(elements, seconds)`` of the Rust pull API over the snapshot ``path``
    (opening included), no Python object per element."""
    ...
