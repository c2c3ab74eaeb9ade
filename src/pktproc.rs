//! Pieces the packet processors (ITM, STM, PTM, ETMv3) share: their
//! processing states, packet errors and how they are logged, the input
//! block cursor, and Gray-coded timestamps.

use crate::datapath::TrcIndex;
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::logger::ErrLink;

/// Where a packet processor is (OpenCSD's processing states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcState {
    /// Looking for the first synchronisation packet.
    WaitSync,
    /// Expecting a header.
    ProcHdr,
    /// Reading the current packet's payload.
    ProcData,
    /// A packet is complete and goes out.
    SendPkt,
}

/// A packet error: OpenCSD's code and message.
pub(crate) struct PktError {
    pub code: ErrCode,
    pub msg: &'static str,
}

impl PktError {
    /// A reserved or unexpected header.
    pub(crate) fn header(msg: &'static str) -> PktError {
        PktError {
            code: ErrCode::InvalidPcktHdr,
            msg,
        }
    }

    /// A malformed packet.
    pub(crate) fn bad_sequence(msg: &'static str) -> PktError {
        PktError {
            code: ErrCode::BadPacketSeq,
            msg,
        }
    }

    /// Logs the error against the packet at `index` from source `trace_id`.
    pub(crate) fn log(&self, link: &ErrLink, index: TrcIndex, trace_id: u8) {
        link.log(
            &TraceError::new(Severity::Error, self.code)
                .at(index)
                .on_id(trace_id)
                .with_message(self.msg),
        );
    }
}

/// An input block being processed: its bytes, how many are used, and the
/// trace index of its first byte.
pub(crate) struct Input<'a> {
    pub data: &'a [u8],
    pub used: usize,
    pub base: TrcIndex,
}

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8], base: TrcIndex) -> Self {
        Input { data, used: 0, base }
    }

    /// Whether bytes are left.
    pub(crate) fn more(&self) -> bool {
        self.used < self.data.len()
    }

    /// Trace index of the next byte.
    pub(crate) fn index(&self) -> TrcIndex {
        self.base + self.used as TrcIndex
    }
}

fn low_bits(size: u32) -> u64 {
    if size >= 64 { u64::MAX } else { (1u64 << size) - 1 }
}

/// Binary to Gray code over `size` bits.
pub(crate) fn bin_to_gray(v: u64, size: u32) -> u64 {
    let v = v & low_bits(size);
    v ^ (v >> 1)
}

/// Gray code to binary over `size` bits.
pub(crate) fn gray_to_bin(g: u64, size: u32) -> u64 {
    let mut b = g & low_bits(size);
    let mut shift = 1;
    while shift < 64 {
        b ^= b >> shift;
        shift <<= 1;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gray_code_round_trip() {
        for v in [0u64, 1, 2, 3, 0x58e90bb867, 0xffff_ffff_ffff, u64::MAX] {
            assert_eq!(gray_to_bin(bin_to_gray(v, 64), 64), v);
            assert_eq!(gray_to_bin(bin_to_gray(v, 48), 48), v & 0xffff_ffff_ffff);
        }
        assert_eq!(bin_to_gray(2, 48), 3);
        assert_eq!(gray_to_bin(3, 48), 2);
    }
}
