//! A window of memory as a trace says it stands at a point: each byte of
//! an address range as last written or read by the records up to that
//! point, or unknown when no record has touched it.
//!
//! Reads count as well as writes (a read shows what memory held), as in
//! upstream's tarmac-browser. A write whose data the trace gives as `x`s
//! (or a diagram's `##`) makes its bytes unknown again; such a read leaves
//! them as they were. Values are taken as the reader gives them, a
//! little-endian system's (the reader turns data written in memory order
//! into that).

use super::Record;
use super::record::{DiagramByte, RecordKind};

/// The bytes of `len` addresses from `addr`, fed one record at a time.
/// Feeding allocates nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryWindow {
    addr: u64,
    bytes: Vec<Option<u8>>,
}

impl MemoryWindow {
    /// A window of `len` bytes from `addr`, all unknown (it stops at the
    /// top of the address space).
    pub fn new(addr: u64, len: usize) -> Self {
        let len = len.min((u64::MAX - addr) as usize + 1);
        MemoryWindow {
            addr,
            bytes: vec![None; len],
        }
    }

    /// The window's first address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Each byte from [`addr`](Self::addr) on: its value, or `None` when
    /// unknown.
    pub fn bytes(&self) -> &[Option<u8>] {
        &self.bytes
    }

    /// Forgets every byte.
    pub fn clear(&mut self) {
        self.bytes.fill(None);
    }

    /// Sets the byte at `addr` if the window holds it.
    fn set(&mut self, addr: u64, v: Option<u8>) {
        if let Some(i) = addr.checked_sub(self.addr)
            && let Some(b) = self.bytes.get_mut(i as usize)
        {
            *b = v;
        }
    }

    /// True when `[addr, addr + len)` meets the window.
    fn meets(&self, addr: u64, len: u64) -> bool {
        let end = self.addr.saturating_add(self.bytes.len() as u64);
        addr < end && addr.saturating_add(len) > self.addr
    }

    /// Takes the memory access of `rec`, if it is one.
    pub fn feed(&mut self, rec: &Record) {
        match rec.kind {
            RecordKind::Memory(m) if self.meets(m.addr, m.size as u64) => {
                if m.read && m.value.is_none() {
                    return;
                }
                for i in 0..m.size.min(16) as u64 {
                    let v = m.value.map(|v| (v >> (8 * i)) as u8);
                    self.set(m.addr.wrapping_add(i), v);
                }
            }
            RecordKind::Diagram(d) if self.meets(d.base, 16) => {
                // bytes[0] is the leftmost, at base + 15.
                for (i, b) in d.bytes.iter().enumerate() {
                    let addr = d.base.wrapping_add(15 - i as u64);
                    match *b {
                        DiagramByte::Unused => {}
                        DiagramByte::Unknown if d.read => {}
                        DiagramByte::Unknown => self.set(addr, None),
                        DiagramByte::Known(v) => self.set(addr, Some(v)),
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reader;

    fn window_after(text: &str, addr: u64, len: usize) -> MemoryWindow {
        let mut r = Reader::new(text.as_bytes());
        let mut w = MemoryWindow::new(addr, len);
        while let Some(rec) = r.next_record().unwrap() {
            w.feed(&rec);
        }
        w
    }

    fn hex(w: &MemoryWindow) -> String {
        w.bytes()
            .iter()
            .map(|b| b.map_or("--".to_string(), |b| format!("{b:02x}")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn writes_and_reads_little_endian_unknown_bytes_shown() {
        let t = "1 clk MW4 00001002 11223344\n";
        assert_eq!(hex(&window_after(t, 0x1000, 8)), "-- -- 44 33 22 11 -- --");
        // A read tells what memory held; one past the window is cut.
        let t = "1 clk MR2 00001007 aabb\n";
        assert_eq!(hex(&window_after(t, 0x1000, 8)), "-- -- -- -- -- -- -- bb");
        // A write of unknown data forgets; an unknown read does not.
        let t = "1 clk MW4 00001000 11223344\n2 clk MW2 00001000 xxxx\n3 clk MR2 00001002 xxxx\n";
        assert_eq!(hex(&window_after(t, 0x1000, 4)), "-- -- 22 11");
    }

    #[test]
    fn sixteen_byte_writes_high_half_first() {
        // gem5's MW16: the high 8 bytes, then the low 8.
        let t = "10 cs MW16 00000055008007f0 0000000000400198 0000005500800810\n";
        assert_eq!(
            hex(&window_after(t, 0x55008007f0, 16)),
            "10 08 80 00 55 00 00 00 98 01 40 00 00 00 00 00"
        );
    }

    #[test]
    fn diagrams_rightmost_byte_at_the_base() {
        // Bytes right to left from base: 11, .., 22, 22, then 44 44 44 44 at
        // base + 8; an unknown stored byte forgets, an unknown load does not.
        let t = "1 clk ST 0000000000001000 ........ 44444444 ........ 2222..11 S:0\n\
                 2 clk ST 0000000000001000 ........ ........ ........ ##...... S:0\n\
                 3 clk LD 0000000000001000 ........ ##...... ........ ........ S:0\n";
        assert_eq!(hex(&window_after(t, 0x1000, 12)), "11 -- 22 -- -- -- -- -- 44 44 44 44");
    }

    #[test]
    fn window_at_the_top_of_the_address_space() {
        let w = MemoryWindow::new(u64::MAX - 1, 8);
        assert_eq!(w.bytes().len(), 2);
        let t = "1 clk MW4 fffffffffffffffe 11223344\n";
        let mut r = Reader::new(t.as_bytes());
        let mut w = w;
        while let Some(rec) = r.next_record().unwrap() {
            w.feed(&rec);
        }
        assert_eq!(hex(&w), "44 33");
    }
}
