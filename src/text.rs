//! A text buffer that listing lines are written straight into.
//!
//! A listing is millions of short lines of literals, hex and decimal
//! numbers. [`TextBuf`] writes them without the formatting machinery: a
//! literal of known length is a few moves, a number is converted with
//! table-free bit arithmetic (hex) or a two-digit table (decimal) into a
//! fixed-size block that is stored whole, the write position then moving
//! on by the number's width. Every buffer keeps [`TextBuf::SLACK`] bytes
//! beyond its end for those whole-block stores, so no write needs a copy
//! of variable length.
//!
//! Everything written is ASCII or comes from a `&str`, so the bytes are
//! always UTF-8.

use std::fmt;

/// A string literal padded to `N` bytes, with its length: copied as one
/// block of `N` bytes (no copy of variable length).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pad<const N: usize> {
    bytes: [u8; N],
    len: u8,
}

impl<const N: usize> Pad<N> {
    /// `s` padded; `s` must fit (checked when the constant is built).
    pub(crate) const fn new(s: &str) -> Self {
        let b = s.as_bytes();
        assert!(b.len() <= N && b.len() < 256, "Pad::new: text longer than the pad");
        let mut bytes = [0u8; N];
        let mut i = 0;
        while i < b.len() {
            bytes[i] = b[i];
            i += 1;
        }
        Pad {
            bytes,
            len: b.len() as u8,
        }
    }

    /// `a`, `b` and `c` one after the other, padded.
    pub(crate) const fn join(a: &str, b: &str, c: &str) -> Self {
        let parts = [a.as_bytes(), b.as_bytes(), c.as_bytes()];
        let mut bytes = [0u8; N];
        let mut len = 0;
        let mut p = 0;
        while p < parts.len() {
            let part = parts[p];
            let mut i = 0;
            while i < part.len() {
                assert!(len < N && len < 255, "Pad::join: text longer than the pad");
                bytes[len] = part[i];
                len += 1;
                i += 1;
            }
            p += 1;
        }
        Pad { bytes, len: len as u8 }
    }
}

/// Two ASCII digits for each of 0..100.
const PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// 10^i for i in 0..20.
const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// The 8 nibbles of `x` one per byte, the most significant in the top byte.
#[inline(always)]
fn spread_nibbles(x: u32) -> u64 {
    let x = x as u64;
    let x = ((x & 0xFFFF_0000) << 16) | (x & 0xFFFF);
    let x = ((x & 0x0000_FF00_0000_FF00) << 8) | (x & 0x0000_00FF_0000_00FF);
    ((x & 0x00F0_00F0_00F0_00F0) << 4) | (x & 0x000F_000F_000F_000F)
}

/// Nibbles one per byte (each 0..16) to ASCII hex digits; `gap` is what
/// takes `'9' + 1` to the digit for 10 (`'a'` or `'A'`).
#[inline(always)]
fn nibbles_to_ascii(x: u64, gap: u64) -> u64 {
    // 0x06 added to a nibble carries into bit 4 exactly when it is 10..15.
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    x + 0x3030_3030_3030_3030 + letters * gap
}

/// The 16 hex digits of `v`, most significant first.
#[inline(always)]
fn hex16(v: u64, upper: bool) -> [u8; 16] {
    let gap = if upper { 7 } else { 39 };
    let hi = nibbles_to_ascii(spread_nibbles((v >> 32) as u32), gap).to_be_bytes();
    let lo = nibbles_to_ascii(spread_nibbles(v as u32), gap).to_be_bytes();
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hi);
    out[8..].copy_from_slice(&lo);
    out
}

/// Number of hex digits of `v` without leading zeros (1 for 0).
#[inline(always)]
fn hex_digits(v: u64) -> usize {
    ((67 - (v | 1).leading_zeros()) / 4) as usize
}

/// Number of decimal digits of `v` (1 for 0).
#[inline(always)]
fn dec_digits(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros();
    // bits * log10(2), rounded down, is the digit count or one less.
    let t = ((bits * 1233) >> 12) as usize;
    t + 1 - ((v | 1) < POW10[t]) as usize
}

/// The low `n` (1..=16) hex digits of `v`, left-aligned in 16 bytes.
#[inline(always)]
fn hex_left(v: u64, n: usize, upper: bool) -> [u8; 16] {
    hex16(if n >= 16 { v } else { v << (64 - 4 * n) }, upper)
}

/// The decimal digits of `v`, left-aligned in 20 bytes, and how many.
#[inline]
fn dec_left(mut v: u64) -> ([u8; 20], usize) {
    let n = dec_digits(v);
    let mut d = [b'0'; 20];
    let mut i = n;
    while v >= 100 {
        let r = (v % 100) as usize;
        v /= 100;
        i -= 2;
        d[i..i + 2].copy_from_slice(&PAIRS[r]);
    }
    if v >= 10 {
        d[i - 2..i].copy_from_slice(&PAIRS[v as usize]);
    } else {
        d[i - 1] = b'0' + v as u8;
    }
    (d, n)
}

/// A growable text buffer written with literals and numbers; see the
/// [module docs](self).
#[derive(Clone)]
pub struct TextBuf {
    /// Storage: the text is `buf[..pos]`; `buf.len()` is the capacity
    /// plus [`SLACK`](Self::SLACK).
    buf: Vec<u8>,
    pos: usize,
    start: IdxStart,
}

impl Default for TextBuf {
    fn default() -> Self {
        TextBuf::with_capacity(0)
    }
}

impl fmt::Debug for TextBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextBuf").field("text", &self.as_str()).finish()
    }
}

impl TextBuf {
    /// Bytes kept beyond the capacity, for whole-block stores.
    pub(crate) const SLACK: usize = 64;

    /// An empty buffer with room for `cap` bytes.
    pub(crate) fn with_capacity(cap: usize) -> Self {
        TextBuf {
            buf: vec![0; cap + Self::SLACK],
            pos: 0,
            start: IdxStart::EMPTY,
        }
    }

    /// Bytes written.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.pos
    }

    /// The text written.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// The text written, as a string.
    pub(crate) fn as_str(&self) -> &str {
        // Only strings and ASCII are ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// Empties the buffer, keeping its storage.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.pos = 0;
    }

    /// Makes sure `n` more bytes (plus the slack) fit.
    #[inline(always)]
    fn room(&mut self, n: usize) {
        if self.pos + n + Self::SLACK > self.buf.len() {
            self.grow(n);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let want = (self.pos + n + Self::SLACK).max(self.buf.len() * 2).max(256);
        self.buf.resize(want, 0);
    }

    /// Makes sure `n` more bytes fit without growing later.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.room(n);
    }

    /// A window for one line of up to [`LINE_MAX`] bytes at the end of
    /// the text; see [`Line`].
    #[inline]
    pub(crate) fn line(&mut self) -> Line<'_> {
        self.room(LINE_MAX);
        let pos = self.pos;
        let win = self.buf[pos..]
            .first_chunk_mut::<WINDOW>()
            .expect("room() leaves a line and the slack");
        Line {
            win,
            end: &mut self.pos,
            start: &mut self.start,
            pos: 0,
            full: false,
        }
    }

    /// Appends a literal of known length (a few moves).
    #[inline(always)]
    pub(crate) fn put<const N: usize>(&mut self, s: &[u8; N]) {
        self.room(N);
        self.buf[self.pos..self.pos + N].copy_from_slice(s);
        self.pos += N;
    }

    /// Appends a padded literal (one block copy).
    #[inline(always)]
    pub(crate) fn put_pad<const N: usize>(&mut self, s: &Pad<N>) {
        self.room(N);
        self.buf[self.pos..self.pos + N].copy_from_slice(&s.bytes);
        self.pos += s.len as usize;
    }

    /// Appends one ASCII character.
    #[inline(always)]
    pub(crate) fn ascii(&mut self, c: u8) {
        debug_assert!(c.is_ascii());
        self.room(1);
        self.buf[self.pos] = c & 0x7f;
        self.pos += 1;
    }

    /// Appends a string.
    #[inline]
    pub(crate) fn put_str(&mut self, s: &str) {
        let b = s.as_bytes();
        self.room(b.len());
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    /// Appends bytes `from..to` of another buffer's text (clamped to it).
    pub(crate) fn put_range(&mut self, other: &TextBuf, from: usize, to: usize) {
        let b = other.as_bytes();
        let b = &b[from.min(b.len())..to.min(b.len()).max(from.min(b.len()))];
        self.room(b.len());
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    /// Appends `v` in lower-case hex without leading zeros (`{:x}`).
    #[inline]
    pub(crate) fn hex(&mut self, v: u64) {
        let n = hex_digits(v);
        self.hex_n(v, n, false);
    }

    /// Appends `v` in hex, at least `width` digits with leading zeros
    /// (`{:0width$x}`, or `X` when `upper`); `width` above 16 is 16.
    #[inline]
    pub(crate) fn hex_width(&mut self, v: u64, width: usize, upper: bool) {
        let n = hex_digits(v).max(width.min(16));
        self.hex_n(v, n, upper);
    }

    /// Appends the low `n` (1..=16) hex digits of `v`.
    #[inline(always)]
    fn hex_n(&mut self, v: u64, n: usize, upper: bool) {
        let d = hex_left(v, n, upper);
        self.room(16);
        self.buf[self.pos..self.pos + 16].copy_from_slice(&d);
        self.pos += n;
    }

    /// Appends `v` as two lower-case hex digits (`{:02x}`).
    #[inline(always)]
    pub(crate) fn hex2(&mut self, v: u8) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.put(&[DIGITS[(v >> 4) as usize], DIGITS[(v & 0xf) as usize]]);
    }

    /// Appends `v` in decimal (`{}`).
    #[inline]
    pub(crate) fn dec(&mut self, v: u64) {
        if v < 10 {
            self.ascii(b'0' + v as u8);
        } else {
            self.dec_long(v);
        }
    }

    fn dec_long(&mut self, v: u64) {
        let (d, n) = dec_left(v);
        self.room(20);
        self.buf[self.pos..self.pos + 20].copy_from_slice(&d);
        self.pos += n;
    }

    /// Appends `v` in decimal right-aligned in `width` characters
    /// (`{:width$}`).
    pub(crate) fn dec_right(&mut self, v: u64, width: usize) {
        for _ in dec_digits(v)..width {
            self.ascii(b' ');
        }
        self.dec(v);
    }
}

/// What listing text is written to: a [`TextBuf`], or a [`Line`] of one.
/// Text is written with [`put`](Self::put) (literals), numbers with the
/// number methods, and anything else with `write!`.
pub(crate) trait TextOut: fmt::Write {
    /// Appends a literal of known length.
    fn put<const N: usize>(&mut self, s: &[u8; N]);
    /// Appends a padded literal.
    fn put_pad<const N: usize>(&mut self, s: &Pad<N>);
    /// Appends one ASCII character.
    fn ascii(&mut self, c: u8);
    /// Appends a string.
    fn put_str(&mut self, s: &str);
    /// Appends `v` in hex, at least `width` digits (`{:0width$x}`, `X`
    /// when `upper`; `width` above 16 is 16).
    fn hex_width(&mut self, v: u64, width: usize, upper: bool);
    /// Appends `v` in decimal.
    fn dec(&mut self, v: u64);

    /// Appends `v` in lower-case hex without leading zeros (`{:x}`).
    #[inline(always)]
    fn hex(&mut self, v: u64) {
        self.hex_width(v, 0, false);
    }
    /// Appends `v` as two lower-case hex digits (`{:02x}`).
    #[inline(always)]
    fn hex2(&mut self, v: u8) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.put(&[DIGITS[(v >> 4) as usize], DIGITS[(v & 0xf) as usize]]);
    }
    /// Appends a byte in hex without leading zeros (a trace ID).
    #[inline(always)]
    fn hex_u8(&mut self, v: u8) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        if v < 16 {
            self.ascii(DIGITS[v as usize]);
        } else {
            self.hex2(v);
        }
    }
    /// Appends `v` (signed) in decimal.
    #[inline]
    fn dec_i64(&mut self, v: i64) {
        if v < 0 {
            self.ascii(b'-');
        }
        self.dec(v.unsigned_abs());
    }
}

/// The longest text a [`Line`] is sure to take.
pub(crate) const LINE_MAX: usize = 320;
/// A line's window: what it can take, some writes storing a block
/// longer than the text they add.
const WINDOW: usize = LINE_MAX + TextBuf::SLACK;

/// One line written into a fixed window of a [`TextBuf`]: its position
/// stays in a register and every write is checked against a constant, so
/// a line costs little more than its stores. Text beyond
/// [`LINE_MAX`] bytes is not written: [`finish`](Self::finish) then says
/// so, and the caller writes the line into the buffer itself.
pub struct Line<'a> {
    win: &'a mut [u8; WINDOW],
    end: &'a mut usize,
    start: &'a mut IdxStart,
    pos: usize,
    full: bool,
}

/// The last `Idx:<index>; ID:<id>;` written: the lines of one packet and
/// its elements share it, so it is converted once.
#[derive(Clone, Copy)]
struct IdxStart {
    key: Option<(u64, u8)>,
    text: [u8; 32],
    len: usize,
}

impl IdxStart {
    const EMPTY: IdxStart = IdxStart {
        key: None,
        text: [0; 32],
        len: 0,
    };
}

impl Line<'_> {
    /// Writes `Idx:<index>; ID:<id>;` (the trace ID in hex).
    #[inline(always)]
    pub(crate) fn idx_start(&mut self, index: u64, trace_id: u8) {
        if self.start.key != Some((index, trace_id)) {
            self.new_start(index, trace_id);
        }
        let (text, len) = (self.start.text, self.start.len);
        self.store(&text, len);
    }

    #[inline(never)]
    fn new_start(&mut self, index: u64, trace_id: u8) {
        // 4 + 20 + 5 + 2 + 1 bytes at most.
        let mut t = [0u8; 32];
        t[..4].copy_from_slice(b"Idx:");
        let (d, n) = dec_left(index);
        t[4..24].copy_from_slice(&d);
        let mut p = 4 + n;
        t[p..p + 5].copy_from_slice(b"; ID:");
        p += 5;
        let (h, hn) = if trace_id < 16 {
            (hex_left(trace_id as u64, 1, false), 1)
        } else {
            (hex_left(trace_id as u64, 2, false), 2)
        };
        t[p..p + 2].copy_from_slice(&h[..2]);
        p += hn;
        t[p] = b';';
        *self.start = IdxStart {
            key: Some((index, trace_id)),
            text: t,
            len: p + 1,
        };
    }

    /// Commits the line to its buffer; false (nothing committed) when it
    /// did not fit.
    #[inline(always)]
    pub(crate) fn finish(self) -> bool {
        if self.full {
            return false;
        }
        *self.end += self.pos;
        true
    }

    /// Stores `d` whole if it fits, moving on `n` bytes.
    #[inline(always)]
    fn store<const K: usize>(&mut self, d: &[u8; K], n: usize) {
        // n <= K: the line stays in the window, which the buffer has room for.
        if self.pos + K <= WINDOW {
            self.win[self.pos..self.pos + K].copy_from_slice(d);
            self.pos += n;
        } else {
            self.full = true;
        }
    }
}

impl TextOut for Line<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, s: &[u8; N]) {
        self.store(s, N);
    }
    #[inline(always)]
    fn put_pad<const N: usize>(&mut self, s: &Pad<N>) {
        self.store(&s.bytes, s.len as usize);
    }
    #[inline(always)]
    fn ascii(&mut self, c: u8) {
        self.store(&[c & 0x7f], 1);
    }
    #[inline]
    fn put_str(&mut self, s: &str) {
        let b = s.as_bytes();
        if self.pos + b.len() <= WINDOW {
            self.win[self.pos..self.pos + b.len()].copy_from_slice(b);
            self.pos += b.len();
        } else {
            self.full = true;
        }
    }
    #[inline(always)]
    fn hex_width(&mut self, v: u64, width: usize, upper: bool) {
        let n = hex_digits(v).max(width.min(16));
        self.store(&hex_left(v, n, upper), n);
    }
    #[inline(always)]
    fn dec(&mut self, v: u64) {
        if v < 10 {
            self.ascii(b'0' + v as u8);
        } else {
            let (d, n) = dec_left(v);
            self.store(&d, n);
        }
    }
}

impl fmt::Write for Line<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.put_str(s);
        Ok(())
    }
}

impl TextOut for TextBuf {
    #[inline(always)]
    fn put<const N: usize>(&mut self, s: &[u8; N]) {
        TextBuf::put(self, s);
    }
    #[inline(always)]
    fn put_pad<const N: usize>(&mut self, s: &Pad<N>) {
        TextBuf::put_pad(self, s);
    }
    #[inline(always)]
    fn ascii(&mut self, c: u8) {
        TextBuf::ascii(self, c);
    }
    #[inline]
    fn put_str(&mut self, s: &str) {
        TextBuf::put_str(self, s);
    }
    #[inline]
    fn hex_width(&mut self, v: u64, width: usize, upper: bool) {
        TextBuf::hex_width(self, v, width, upper);
    }
    #[inline]
    fn dec(&mut self, v: u64) {
        TextBuf::dec(self, v);
    }
}

impl fmt::Write for TextBuf {
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.put_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    /// Values around every digit-count boundary, in both bases.
    fn samples() -> Vec<u64> {
        let mut v = vec![
            0,
            1,
            9,
            10,
            15,
            16,
            99,
            100,
            255,
            256,
            u64::MAX,
            u64::MAX - 1,
            0x8000_0000_0000_0000,
        ];
        for s in 0..64 {
            v.push(1 << s);
            v.push((1 << s) - 1);
            v.push((1u64 << s).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        for p in POW10 {
            v.extend([p - 1, p, p + 1]);
        }
        v
    }

    #[test]
    fn numbers_as_format_writes_them() {
        for v in samples() {
            let mut t = TextBuf::default();
            let mut s = String::new();
            t.hex(v);
            t.put(b"|");
            t.dec(v);
            t.put(b"|");
            t.dec_i64(v as i64);
            write!(s, "{v:x}|{v}|{}", v as i64).unwrap();
            for w in [0, 1, 2, 4, 8, 12, 16] {
                t.put(b"|");
                t.hex_width(v, w, false);
                t.put(b"|");
                t.hex_width(v, w, true);
                t.put(b"|");
                t.dec_right(v, w);
                write!(s, "|{v:0w$x}|{v:0w$X}|{v:w$}").unwrap();
            }
            t.put(b"|");
            t.hex2(v as u8);
            write!(s, "|{:02x}", v as u8).unwrap();
            assert_eq!(t.as_str(), s, "value {v:#x}");
        }
    }

    #[test]
    fn grows_past_its_capacity_and_keeps_the_text() {
        const WORD: Pad<16> = Pad::new("word");
        let mut t = TextBuf::with_capacity(3);
        let mut s = String::new();
        for i in 0..1000u64 {
            t.put_pad(&WORD);
            t.put_str("é");
            t.hex(i);
            t.ascii(b'\n');
            writeln!(s, "wordé{i:x}").unwrap();
        }
        assert_eq!(t.as_str(), s);
        assert_eq!(t.len(), s.len());
        t.clear();
        assert_eq!(t.len(), 0);
        assert_eq!(t.as_str(), "");
    }
}
