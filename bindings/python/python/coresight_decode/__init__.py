"""Decode Arm CoreSight trace (ETMv4, ETE, PTM, ETMv3, STM, ITM) from Python.

Open a capture, then iterate its elements or get them as Arrow record batches::

    import coresight_decode as csd

    trace = csd.open("snapshots/etmv4-a64")      # a snapshot directory or a perf.data file
    for e in trace:                               # Element objects, decoded with the GIL released
        if e.kind == "instr_range":
            print(hex(e.start), hex(e.end), e.num_instr, e.last["kind"])

    df = trace.to_pandas("instr_range")           # one table per element kind

Errors are :class:`OpenError` (the capture cannot be opened) and :class:`DecodeError` (the
decode stopped), both :class:`CoreSightError`, with the library's message.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _native
from ._native import KINDS, BranchList, CoreSightError, DecodeError, Element, OpenError

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import pyarrow

__all__ = [
    "KINDS",
    "BranchList",
    "CoreSightError",
    "DecodeError",
    "Element",
    "OpenError",
    "Trace",
    "open",
    "open_perf",
    "open_snapshot",
    "from_bytes",
    "schema",
]

PathLike = Union[str, "os.PathLike[str]"]


class Trace:
    """A capture to decode: a snapshot's trace buffer, a raw buffer with its configuration, or a
    perf.data recording. Each decode (iteration, :meth:`batches`, :meth:`profile`...) starts from
    the beginning of the capture and runs with the GIL released."""

    def __init__(self, native: "_native.Trace") -> None:
        self._t = native

    def __repr__(self) -> str:
        return repr(self._t)

    def __iter__(self) -> Iterator[Element]:
        return iter(self._t.elements())

    def elements(self) -> Iterator[Element]:
        """The elements as :class:`Element` objects; raises :class:`DecodeError` at the end if
        the decode stopped on an error."""
        return iter(self._t.elements())

    def count(self) -> Dict[str, int]:
        """The number of elements of each kind (no Python object per element)."""
        return dict(self._t.count())

    def profile(self) -> Dict[str, Any]:
        """AutoFDO-style counts: ``{"ranges": {(start, end): n}, "branches": {(from, to): n},
        "instructions": n, "elements": n}``. Counts of several captures add up (see
        :mod:`coresight_decode.fleet`)."""
        return self._t.profile()

    def raw_batches(self, kinds: Optional[Sequence[str]] = None, batch_size: int = 65536) -> Iterator[Tuple[str, "_native.ArrowBatch"]]:
        """``(kind, batch)`` pairs where each batch implements the Arrow PyCapsule interface
        (``__arrow_c_array__``), for any Arrow library; no pyarrow needed."""
        return iter(self._t.batches(list(kinds) if kinds is not None else None, batch_size))

    def batches(self, kinds: Optional[Sequence[str]] = None, batch_size: int = 65536) -> Iterator[Tuple[str, "pyarrow.RecordBatch"]]:
        """``(kind, pyarrow.RecordBatch)`` pairs of at most ``batch_size`` rows, streamed: memory
        does not grow with the capture. ``kinds`` limits them to those kinds (see ``KINDS``)."""
        import pyarrow as pa

        for kind, b in self.raw_batches(kinds, batch_size):
            yield kind, pa.record_batch(b)

    def record_batch_reader(self, kind: str, batch_size: int = 65536) -> "pyarrow.RecordBatchReader":
        """A ``pyarrow.RecordBatchReader`` over the batches of one kind (for
        ``pyarrow.parquet.ParquetWriter``, ``polars.from_arrow``, DuckDB...)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_batches(schema(kind), (b for _, b in self.batches([kind], batch_size)))

    def to_arrow(self, kind: str, batch_size: int = 65536) -> "pyarrow.Table":
        """All the elements of one kind as a ``pyarrow.Table``."""
        return self.record_batch_reader(kind, batch_size).read_all()

    def to_pandas(self, kind: str) -> "pandas.DataFrame":
        """All the elements of one kind as a ``pandas.DataFrame``. Integer columns are pandas'
        nullable integer dtypes (``UInt64``, ``Int32``...): a missing value is ``pd.NA``, and a
        64-bit timestamp or address is exact (numpy's float64, pandas' default for an integer
        column with nulls, rounds past 2**53). Dictionary columns are categoricals."""
        return self.to_arrow(kind).to_pandas(types_mapper=_pandas_int_dtype)

    def to_polars(self, kind: str) -> Any:
        """All the elements of one kind as a ``polars.DataFrame`` (polars must be installed)."""
        import polars as pl

        return pl.from_arrow(self.to_arrow(kind))


def _pandas_int_dtype(arrow_type: Any) -> Any:
    """The pandas nullable dtype of an Arrow integer type; None (pyarrow's default) for others."""
    import pandas as pd
    import pyarrow as pa

    if not pa.types.is_integer(arrow_type):
        return None
    return {
        pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(),
    }[arrow_type]


def schema(kind: str) -> "pyarrow.Schema":
    """The ``pyarrow.Schema`` of the batches of element kind ``kind``."""
    import pyarrow as pa

    return pa.schema(_native.schema(kind))


def open_snapshot(path: PathLike, buffer: Optional[str] = None) -> Trace:
    """Opens a snapshot directory (``snapshot.ini``) and its trace buffer ``buffer`` (default: the
    first). Raises :class:`OpenError`."""
    return Trace(_native.Trace.snapshot(os.fspath(path), buffer))


def open_perf(path: PathLike, symdirs: Iterable[PathLike] = ()) -> Trace:
    """Opens a perf.data recording of CoreSight trace (Linux perf or simpleperf); the traced
    binaries are looked for under ``symdirs`` (by build id, path, name), then at their recorded
    paths. Raises :class:`OpenError`."""
    return Trace(_native.Trace.perf(os.fspath(path), [os.fspath(d) for d in symdirs]))


def from_bytes(
    data: bytes,
    sources: Sequence[Dict[str, Any]],
    formatted: bool = True,
    memory: Sequence[Tuple[int, bytes]] = (),
    elfs: Sequence[PathLike] = (),
) -> Trace:
    """A raw trace buffer with its configuration.

    ``sources``: dicts ``{"protocol": "ETMV4I" | "ETE" | "PTM" | "ETMV3" | "STM" | "ITM",
    "registers": {"TRCCONFIGR": ..., ...}, "core": "Cortex-A53", "name": "etm0"}`` (``core`` for
    PE trace); ``formatted``: CoreSight 16-byte frames, else one unformatted source; ``memory``:
    ``(address, bytes)`` program images; ``elfs``: ELF files mapped at their addresses."""
    return Trace(_native.Trace.raw(data, list(sources), formatted, list(memory), [os.fspath(e) for e in elfs]))


def is_perf_data(path: PathLike) -> bool:
    """True if ``path`` is a file starting with perf.data's magic."""
    try:
        with builtins_open(os.fspath(path), "rb") as f:
            return f.read(8) in (b"PERFILE2", b"2ELIFREP")
    except OSError:
        return False


def open(path: PathLike, symdirs: Iterable[PathLike] = ()) -> Trace:
    """Opens a capture: a snapshot directory, or a perf.data file. Raises :class:`OpenError`."""
    p = os.fspath(path)
    if os.path.isdir(p) or not is_perf_data(p):
        return open_snapshot(p)
    return open_perf(p, symdirs)


import builtins as _builtins  # noqa: E402

builtins_open = _builtins.open
