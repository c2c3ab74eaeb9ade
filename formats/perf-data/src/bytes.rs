//! Bounds-checked reading of little- or big-endian values out of a byte slice that knows
//! where it sits in the file, so that every error can name a file offset.

use crate::error::{Error, Result};

/// Byte order of a perf.data file, told by its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endian {
    /// `PERFILE2` as bytes: written by a little-endian machine (Arm64 Linux and Android).
    Little,
    /// `2ELIFREP` as bytes: written by a big-endian machine.
    Big,
}

impl Endian {
    pub(crate) fn to_reader(self) -> linux_perf_data::Endianness {
        match self {
            Endian::Little => linux_perf_data::Endianness::LittleEndian,
            Endian::Big => linux_perf_data::Endianness::BigEndian,
        }
    }

    pub(crate) fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }

    pub(crate) fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }

    pub(crate) fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
}

/// A cursor over `data`, whose first byte is at file offset `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    pub(crate) endian: Endian,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], base: u64, endian: Endian) -> Self {
        Reader {
            data,
            pos: 0,
            base,
            endian,
        }
    }

    /// File offset of the next byte to be read.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                offset: self.offset(),
                what,
                needed: n as u64,
                available: self.remaining() as u64,
            });
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.bytes(N, what)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16> {
        let a = self.array(what)?;
        Ok(self.endian.u16(a))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32> {
        let a = self.array(what)?;
        Ok(self.endian.u32(a))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64> {
        let a = self.array(what)?;
        Ok(self.endian.u64(a))
    }

    /// perf's length-prefixed string (`u32` length including padding, then NUL-padded bytes).
    pub(crate) fn perf_string(&mut self, what: &'static str) -> Result<String> {
        let len = self.u32(what)? as usize;
        let b = self.bytes(len, what)?;
        Ok(until_nul(b))
    }
}

/// The bytes up to the first NUL, as (lossy) UTF-8.
pub(crate) fn until_nul(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `data[offset..offset + len]`, or an error naming the offset and what was expected there.
pub(crate) fn slice_at<'a>(data: &'a [u8], offset: u64, len: u64, what: &'static str) -> Result<&'a [u8]> {
    let file_len = data.len() as u64;
    if offset > file_len {
        // The error names where reading stopped (the end of the file), and
        // the offset that pointed past it.
        return Err(Error::malformed(
            file_len,
            what,
            format!("starts at {offset:#x}, past the end of the file ({file_len} bytes)"),
        ));
    }
    let available = file_len - offset;
    if len > available {
        return Err(Error::Truncated {
            offset,
            what,
            needed: len,
            available,
        });
    }
    Ok(&data[offset as usize..(offset + len) as usize])
}
