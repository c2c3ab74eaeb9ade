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

def schema(kind: str) -> ArrowSchema: ...
def pull_count(path: str, buffer: Optional[str] = None) -> Tuple[int, float]:
    """Benchmark reference: ``(elements, seconds)`` of the Rust pull API over the snapshot ``path``
    (opening included), no Python object per element."""
    ...
