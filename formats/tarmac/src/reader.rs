//! Streaming Tarmac reader: lines from any `BufRead` into typed records.
//!
//! The lexer follows the format's conventions: words are runs of
//! alphanumerics and `_-.#`, and each of `:()[],<>` is a token of its own.
//! A line keeps only two things from the line before it: the time (lines
//! without one inherit it) and, after `LD`/`ST`, the column of the address,
//! so that a continuation line that starts there is read as the same kind.

use std::fmt;
use std::io::BufRead;

use super::record::*;

/// A Tarmac line that is a known kind of record but not well formed, or an
/// input that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarmacError {
    /// 1-based line number (0 for errors that are not about a line).
    pub line: u64,
    /// 1-based column of the offending token.
    pub column: usize,
    /// What the reader expected there.
    pub expected: String,
    /// An excerpt of the line around the column, at most
    /// [`EXCERPT_BEFORE`] + [`EXCERPT_AFTER`] bytes of it, with control
    /// characters, quotes and bytes that are not UTF-8 escaped: a line of
    /// a megabyte or of binary garbage gives a message of one short line.
    pub text: String,
}

/// Bytes of the line kept before the offending column in an error.
pub const EXCERPT_BEFORE: usize = 24;
/// Bytes of the line kept from the offending column on in an error.
pub const EXCERPT_AFTER: usize = 40;

/// The excerpt of `line` around byte `at` for an error message: quoted,
/// escaped, with `...` where it was cut.
pub fn excerpt(line: &[u8], at: usize) -> String {
    let at = at.min(line.len());
    let mut start = at.saturating_sub(EXCERPT_BEFORE);
    let mut end = at.saturating_add(EXCERPT_AFTER).min(line.len());
    // Cut on character boundaries where the text is UTF-8.
    while start > 0 && start < line.len() && (line[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    while end < line.len() && (line[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let mut out = String::with_capacity(end - start + 8);
    out.push('"');
    if start > 0 {
        out.push_str("...");
    }
    for chunk in line[start..end].utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\'' {
                out.push(c);
            } else {
                out.extend(c.escape_debug());
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if end < line.len() {
        out.push_str("...");
    }
    out.push('"');
    out
}

impl fmt::Display for TarmacError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return write!(f, "{}", self.expected);
        }
        write!(
            f,
            "line {}, column {}: expected {}: {}",
            self.line, self.column, self.expected, self.text
        )
    }
}

impl std::error::Error for TarmacError {}

/// Reader options.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReaderOptions {
    /// The instruction set to assume where a line gives no state
    /// (`--implicit-thumb` of the upstream tools: `Some(Iset::Thumb)`).
    pub implicit_iset: Option<Iset>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Eol,
    Word,
    Punct(u8),
    Other(u8),
}

#[derive(Clone, Copy, Debug)]
struct Token {
    start: usize,
    end: usize,
    kind: Tok,
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'#')
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Hex value of 1..=16 digits.
fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        v = (v << 4) | hex_digit(c)? as u64;
    }
    Some(v)
}

fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

fn is_hex(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|c| c.is_ascii_hexdigit())
}

/// Hex address with an optional `_S`/`_NS` suffix.
fn parse_hex_ns(s: &[u8]) -> Option<PhysAddr> {
    let (digits, ns) = if let Some(d) = s.strip_suffix(b"_NS") {
        (d, Some(true))
    } else if let Some(d) = s.strip_suffix(b"_S") {
        (d, Some(false))
    } else {
        (s, None)
    };
    Some(PhysAddr {
        addr: parse_hex(digits)?,
        non_secure: ns,
    })
}

#[derive(Clone, Copy, Debug, Default)]
struct InterLine {
    time: u64,
    unit: Option<TimeUnit>,
    frac: u8,
    /// After `LD`/`ST`: (read, column of the address).
    continuable: Option<(bool, usize)>,
}

/// Parses lines one at a time, keeping the little state Tarmac carries
/// from line to line. Use [`Reader`] to read a stream.
#[derive(Debug, Default)]
pub struct LineParser {
    opts: ReaderOptions,
    state: InterLine,
    /// Of the line being parsed: where its type word starts, whether it
    /// gave a time, its CPU.
    head: (usize, bool, Option<u32>),
    reg_bytes: Vec<u8>,
    reg_written: Vec<bool>,
    digits: Vec<u8>,
}

struct Lexer<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Token {
        let l = self.line;
        while self.pos < l.len() && l[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        if start >= l.len() {
            return Token {
                start,
                end: start,
                kind: Tok::Eol,
            };
        }
        let c = l[start];
        if b":()[],<>".contains(&c) {
            self.pos += 1;
            return Token {
                start,
                end: start + 1,
                kind: Tok::Punct(c),
            };
        }
        while self.pos < l.len() && is_word_byte(l[self.pos]) {
            self.pos += 1;
        }
        if self.pos > start {
            return Token {
                start,
                end: self.pos,
                kind: Tok::Word,
            };
        }
        // A byte outside the lexicon: one token of its own (UTF-8
        // continuation bytes ride along so that slices stay on char
        // boundaries).
        self.pos += 1;
        while self.pos < l.len() && (l[self.pos] & 0xC0) == 0x80 {
            self.pos += 1;
        }
        Token {
            start,
            end: self.pos,
            kind: Tok::Other(c),
        }
    }
}

impl Token {
    fn word<'a>(&self, line: &'a [u8]) -> Option<&'a [u8]> {
        (self.kind == Tok::Word).then(|| &line[self.start..self.end])
    }
    fn is_punct(&self, c: u8) -> bool {
        self.kind == Tok::Punct(c)
    }
    fn is_word(&self, line: &[u8], w: &[u8]) -> bool {
        self.kind == Tok::Word && &line[self.start..self.end] == w
    }
}

fn iset_of(w: &[u8]) -> Option<(Iset, bool)> {
    Some(match w {
        b"A" => (Iset::Arm, false),
        b"T" => (Iset::Thumb, false),
        b"T16" | b"T32" => (Iset::Thumb, true),
        b"O" => (Iset::A64, false),
        b"R" => (Iset::RiscV, false),
        _ => return None,
    })
}

/// Register name lookup: `Special` for names whose meaning depends on the
/// amount of data (`sp`), or whose data is irregular (`cpsr`, `fpcr`).
enum RegName {
    Known(RegId),
    Sp,
    Cpsr,
    Fpcr,
    Unknown,
}

fn numbered(rest: &[u8], max: u8) -> Option<u8> {
    if rest.is_empty() || rest.len() > 2 || (rest.len() == 2 && rest[0] == b'0') {
        return None;
    }
    let n = parse_dec(rest)?;
    (n <= max as u64).then_some(n as u8)
}

fn lookup_base(name: &[u8]) -> Option<RegName> {
    let mut buf = [0u8; 8];
    if name.is_empty() || name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let n = &buf[..name.len()];
    let id = |class, index| Some(RegName::Known(RegId { class, index }));
    match n {
        b"sp" => return Some(RegName::Sp),
        b"cpsr" => return Some(RegName::Cpsr),
        b"fpcr" => return Some(RegName::Fpcr),
        b"xsp" => return id(RegClass::Xsp, 0),
        b"wsp" => return id(RegClass::Wsp, 0),
        b"msp" => return id(RegClass::R, 13),
        b"lr" => return id(RegClass::R, 14),
        b"psr" => return id(RegClass::Psr, 0),
        b"fpsr" => return id(RegClass::Fpsr, 0),
        b"fpscr" => return id(RegClass::Fpscr, 0),
        b"vpr" => return id(RegClass::Vpr, 0),
        _ => {}
    }
    let (class, max) = match n[0] {
        b'r' => (RegClass::R, 15),
        b'x' | b'e' => (RegClass::X, 30),
        b'w' => (RegClass::W, 30),
        b's' => (RegClass::S, 31),
        b'd' => (RegClass::D, 31),
        b'v' => (RegClass::V, 31),
        b'q' => (RegClass::Q, 31),
        b'z' => (RegClass::Z, 31),
        b'p' => (RegClass::P, 31),
        _ => return None,
    };
    let index = numbered(&n[1..], max)?;
    id(class, index)
}

fn lookup_reg(name: &[u8]) -> RegName {
    if let Some(r) = lookup_base(name) {
        return r;
    }
    // Banked and qualified names: `r14_svc`, `SP_EL3`, `MSP_S`.
    if let Some(us) = name.iter().position(|&c| c == b'_')
        && let Some(r) = lookup_base(&name[..us])
    {
        return r;
    }
    RegName::Unknown
}

type PResult<T> = Result<T, (Token, &'static str)>;

impl LineParser {
    /// A parser with the given options, before the first line.
    pub fn new(opts: ReaderOptions) -> Self {
        LineParser {
            opts,
            ..Default::default()
        }
    }

    /// Parses one line (without its line ending). Blank lines give `None`.
    pub fn parse_line<'a>(&'a mut self, line: &'a str, lineno: u64) -> Result<Option<Record<'a>>, TarmacError> {
        let bytes = line.as_bytes();
        match self.parse_inner(bytes) {
            Ok(Some(kind)) => Ok(Some(Record {
                line: lineno,
                time: self.state.time,
                time_given: self.head.1,
                unit: self.state.unit,
                time_frac_digits: self.state.frac,
                cpu: self.head.2,
                body: line.get(self.head.0..).unwrap_or(""),
                kind: kind.resolve(line, &self.reg_bytes, &self.reg_written),
            })),
            Ok(None) => Ok(None),
            Err((tok, what)) => Err(TarmacError {
                line: lineno,
                column: line.get(..tok.start).map_or(tok.start, |p| p.chars().count()) + 1,
                expected: what.to_string(),
                text: excerpt(bytes, tok.start),
            }),
        }
    }

    /// Parses a line; its start (body column, time given, CPU) is left in
    /// `self.head` rather than returned, to keep the result small.
    fn parse_inner(&mut self, l: &[u8]) -> PResult<Option<Kind>> {
        let prev = std::mem::take(&mut self.state.continuable);
        let mut lx = Lexer { line: l, pos: 0 };
        let mut tok = lx.next();
        if tok.kind == Tok::Eol {
            return Ok(None);
        }
        // An LD/ST continuation line starts in the column of the previous
        // line's address; check it before the timestamp, since an address
        // of decimal digits would read as one.
        if let Some((read, col)) = prev
            && tok.start == col
        {
            self.head = (tok.start, false, None);
            return self.diagram(l, &mut lx, tok, read, true).map(Some);
        }
        let mut time_given = false;
        if let Some(w) = tok.word(l) {
            if let Some(t) = parse_dec(w) {
                self.set_time(t, None, 0);
                time_given = true;
                tok = lx.next();
                if let Some(u) = tok.word(l).and_then(TimeUnit::from_name) {
                    self.state.unit = Some(u);
                    tok = lx.next();
                }
            } else if let Some((t, frac, unit_at)) = split_time(w) {
                let unit = TimeUnit::from_name(&w[unit_at..]);
                if unit_at == w.len() || unit.is_some() {
                    self.set_time(t, unit, frac);
                    time_given = true;
                    tok = lx.next();
                    if unit.is_none()
                        && let Some(u) = tok.word(l).and_then(TimeUnit::from_name)
                    {
                        self.state.unit = Some(u);
                        tok = lx.next();
                    }
                }
            }
        }
        let mut cpu = None;
        if let Some(w) = tok.word(l) {
            if w.len() > 3 && w.windows(3).any(|x| x.eq_ignore_ascii_case(b"cpu")) {
                // `cpu0`, or a component path such as `cluster0.cpu1`:
                // the number is the trailing digits.
                let digits = w.iter().rev().take_while(|c| c.is_ascii_digit()).count();
                cpu = parse_dec(&w[w.len() - digits..]).map(|n| n.min(u32::MAX as u64) as u32);
                tok = lx.next();
            } else if time_given && let Some(n) = parse_dec(w) {
                // Trace Matcher: a bare CPU number after the time.
                cpu = Some(n.min(u32::MAX as u64) as u32);
                tok = lx.next();
            }
        }
        let body = tok.start;
        if tok.kind == Tok::Eol {
            self.head = (body, time_given, cpu);
            return Ok(Some(Kind::Text(TextKind::Unknown, (body, body), (body, body))));
        }
        self.head = (body, time_given, cpu);
        let w = tok.word(l).unwrap_or(&l[tok.start..tok.end]);
        Ok(Some(match w {
            b"IT" | b"IS" | b"IF" | b"ES" => self.instruction(l, &mut lx, tok)?,
            b"R" => self.register(l, &mut lx)?,
            b"LD" | b"ST" => {
                let read = w == b"LD";
                let addr = lx.next();
                self.diagram(l, &mut lx, addr, read, false)?
            }
            b"Tarmac" => Kind::Header((tok.start, l.len())),
            b"E" => exception_or_event(l, &mut lx, tok),
            b"EXC" => {
                let (name, text) = exc_name(l, &mut lx);
                Kind::Exception {
                    addr: None,
                    code: None,
                    name,
                    text,
                }
            }
            b"FD" | b"FI" | b"FR" => {
                let kind = match w {
                    b"FD" => FlowKind::Fd,
                    b"FI" => FlowKind::Fi,
                    _ => FlowKind::Fr,
                };
                let next = lx.next();
                let mut target = next.word(l).and_then(parse_hex);
                if target.is_none() && next.is_punct(b'(') {
                    target = lx.next().word(l).and_then(parse_hex);
                }
                Kind::Flow {
                    kind,
                    target,
                    text: (next.start, l.len()),
                }
            }
            _ if w.starts_with(b"MU") && w.len() > 2 && w[2].is_ascii_digit() => mem_update(l, &mut lx, tok),
            _ if is_memory_type(w) => self.memory(l, &mut lx, tok)?,
            _ => {
                let next = lx.next();
                Kind::Text(text_kind(w), (tok.start, tok.end), (next.start, l.len()))
            }
        }))
    }

    fn set_time(&mut self, t: u64, unit: Option<TimeUnit>, frac: u8) {
        self.state.time = t;
        self.state.unit = unit;
        self.state.frac = frac;
    }

    fn instruction(&mut self, l: &[u8], lx: &mut Lexer, first: Token) -> PResult<Kind> {
        let style = match &l[first.start..first.end] {
            b"IT" => InstrStyle::It,
            b"IS" => InstrStyle::Is,
            b"IF" => InstrStyle::If,
            _ => InstrStyle::Es,
        };
        let mut effect = if style == InstrStyle::Is {
            Effect::CcFail
        } else {
            Effect::Executed
        };
        let is_es = style == InstrStyle::Es;
        let mut tok = lx.next();
        if tok.is_word(l, b"Reset") {
            return Ok(Kind::Exception {
                addr: None,
                code: None,
                name: (tok.start, tok.end),
                text: (tok.start, l.len()),
            });
        }
        if tok.is_word(l, b"EXC") {
            let (name, text) = exc_name(l, lx);
            return Ok(Kind::Exception {
                addr: None,
                code: None,
                name,
                text,
            });
        }
        let addr;
        let mut encoding = None;
        let enc_tok;
        let mut inst_id = None;
        let mut paddr = None;
        let mut colon_in_brackets = false;
        if is_es {
            if !tok.is_punct(b'(') {
                return Err((tok, "'(' before the instruction address and encoding"));
            }
            tok = lx.next();
            addr = tok
                .word(l)
                .and_then(parse_hex)
                .ok_or((tok, "a hex instruction address"))?;
            tok = lx.next();
            if !tok.is_punct(b':') {
                return Err((tok, "':' between the instruction address and encoding"));
            }
            tok = lx.next();
            let w = tok.word(l).ok_or((tok, "a hex instruction encoding"))?;
            if w.iter().all(|&c| c == b'-') {
                effect = Effect::FetchFail;
            } else {
                encoding = Some(parse_hex(w).ok_or((tok, "a hex instruction encoding"))?);
            }
            enc_tok = tok;
            tok = lx.next();
            if !tok.is_punct(b')') {
                return Err((tok, "')' after the instruction address and encoding"));
            }
            tok = lx.next();
        } else {
            let mut bracketed: Option<(Token, u64)> = None;
            if tok.is_punct(b'(') {
                tok = lx.next();
                let v = tok
                    .word(l)
                    .and_then(parse_hex)
                    .ok_or((tok, "a hex or decimal number in brackets"))?;
                bracketed = Some((tok, v));
                tok = lx.next();
                if tok.is_punct(b':') {
                    // `(address:index)`: the index follows.
                    tok = lx.next();
                    let v2 = tok
                        .word(l)
                        .and_then(parse_hex)
                        .ok_or((tok, "a hex or decimal number after ':'"))?;
                    inst_id = tok.word(l).and_then(parse_dec).or(Some(v2));
                    bracketed = None;
                    tok = lx.next();
                    colon_in_brackets = true;
                }
                if !tok.is_punct(b')') {
                    return Err((tok, "')' after the bracketed value"));
                }
                tok = lx.next();
            }
            let post = tok;
            let post_val = tok
                .word(l)
                .and_then(parse_hex)
                .ok_or((tok, "a hex instruction address"))?;
            tok = lx.next();
            if tok.is_punct(b':') {
                tok = lx.next();
                paddr = Some(
                    tok.word(l)
                        .and_then(parse_hex_ns)
                        .ok_or((tok, "a hex physical address after ':'"))?,
                );
                tok = lx.next();
                if tok.is_punct(b',') {
                    tok = lx.next();
                    tok.word(l)
                        .and_then(parse_hex_ns)
                        .ok_or((tok, "a hex physical address after ','"))?;
                    tok = lx.next();
                }
            }
            if tok.word(l).and_then(iset_of).is_some() {
                // `(address) encoding state`: the bracketed value was the address.
                let (_, bv) = bracketed.ok_or((post, "an instruction address before the encoding"))?;
                addr = bv;
                encoding = Some(post_val);
                enc_tok = post;
            } else {
                if let Some((bt, _)) = bracketed {
                    inst_id = bt.word(l).and_then(parse_dec);
                }
                addr = post_val;
                encoding = Some(
                    tok.word(l)
                        .and_then(parse_hex)
                        .ok_or((tok, "a hex instruction encoding"))?,
                );
                enc_tok = tok;
                tok = lx.next();
            }
        }
        let width = ((enc_tok.end - enc_tok.start) * 4).min(255) as u8;
        let mut mode = None;
        let (iset, t16_t32, implicit) = match tok.word(l).and_then(iset_of) {
            Some((iset, t1632)) => {
                tok = lx.next();
                let expect_mode = is_es || !(colon_in_brackets && t1632);
                if expect_mode {
                    if tok.is_punct(b':') {
                        // Mode left out (Cortex-R RTL).
                        tok = lx.next();
                    } else {
                        if tok.kind != Tok::Word {
                            return Err((tok, "the CPU mode"));
                        }
                        mode = Some((tok.start, tok.end));
                        tok = lx.next();
                        if !tok.is_punct(b':') {
                            return Err((tok, "':' before the disassembly"));
                        }
                        tok = lx.next();
                    }
                }
                if is_es && tok.is_word(l, b"CCFAIL") {
                    effect = Effect::CcFail;
                    tok = lx.next();
                }
                (iset, t1632, false)
            }
            None => match self.opts.implicit_iset {
                Some(i) => (i, false, true),
                None => return Err((tok, "the instruction set state (A, T, O or R)")),
            },
        };
        Ok(Kind::Instruction {
            style,
            effect,
            inst_id,
            addr,
            paddr,
            encoding,
            width,
            iset,
            t16_t32,
            implicit,
            mode,
            disasm: (tok.start, l.len()),
        })
    }

    fn register(&mut self, l: &[u8], lx: &mut Lexer) -> PResult<Kind> {
        let name_tok = lx.next();
        let name = name_tok.word(l).ok_or((name_tok, "a register name"))?;
        let mut tok = lx.next();
        if matches!(name, b"DC" | b"IC" | b"TLBI" | b"AT") {
            return Ok(Kind::SysOp {
                op: (name_tok.start, name_tok.end),
                text: (tok.start, l.len()),
            });
        }
        let mut extra = None;
        if tok.is_punct(b'(') {
            tok = lx.next();
            if tok.kind != Tok::Word {
                return Err((tok, "register details in brackets"));
            }
            extra = Some((tok.start, tok.end));
            tok = lx.next();
            if !tok.is_punct(b')') {
                return Err((tok, "')' after the register details"));
            }
            tok = lx.next();
        }
        let raw = (tok.start, l.len());
        let looked = lookup_reg(name);
        let mut reg = match looked {
            RegName::Known(r) => Some(r),
            RegName::Unknown => {
                self.reg_bytes.clear();
                self.reg_written.clear();
                return Ok(Kind::Register {
                    name: (name_tok.start, name_tok.end),
                    extra,
                    reg: None,
                    raw,
                });
            }
            _ => None,
        };
        let special = reg.is_none();
        // `<hi:lo>` byte range.
        let mut skip = None;
        if tok.is_punct(b'<') {
            let size = match reg.and_then(|r| r.size()) {
                Some(s) if !special => s,
                _ => return Err((tok, "no bit range on this register")),
            };
            tok = lx.next();
            let hi = tok.word(l).and_then(parse_dec).ok_or((tok, "a bit offset"))?;
            if hi & 7 != 7 || (hi >> 3) as usize >= size {
                return Err((tok, "a high bit at the top of a byte within the register"));
            }
            tok = lx.next();
            if !tok.is_punct(b':') {
                return Err((tok, "':' between the bit offsets"));
            }
            tok = lx.next();
            let lo = tok.word(l).and_then(parse_dec).ok_or((tok, "a bit offset"))?;
            if lo & 7 != 0 || lo > hi {
                return Err((tok, "a low bit at the bottom of a byte, below the high bit"));
            }
            tok = lx.next();
            if !tok.is_punct(b'>') {
                return Err((tok, "'>' after the bit range"));
            }
            tok = lx.next();
            skip = Some(((lo >> 3) as usize, size - 1 - (hi >> 3) as usize));
        }
        let digits = &mut self.digits;
        digits.clear();
        let push = |digits: &mut Vec<u8>, w: &[u8]| {
            for &c in w {
                match c {
                    b'_' => {}
                    b'x' | b'X' => digits.push(b'0'),
                    c => digits.push(c),
                }
            }
        };
        let regvalue = |t: &Token| {
            t.word(l).filter(|w| {
                w.iter()
                    .all(|&c| c.is_ascii_hexdigit() || matches!(c, b'_' | b'-' | b'x' | b'X'))
            })
        };
        match (reg, looked) {
            (Some(r), _) if r.size().is_some() => {
                let size = r.size().unwrap_or(0);
                let (lo, hi) = skip.unwrap_or((0, 0));
                let expected = 2 * (size - lo - hi);
                for _ in 0..2 * hi {
                    digits.push(b'-');
                }
                let start = digits.len();
                while digits.len() - start < expected {
                    if tok.kind == Tok::Eol {
                        let seen = &digits[start..];
                        // Producers abbreviate a zero (or absent) value.
                        let fill = if seen.iter().all(|&c| c == b'0') {
                            b'0'
                        } else if seen.iter().all(|&c| c == b'-') {
                            b'-'
                        } else {
                            return Err((tok, "more register contents"));
                        };
                        digits.resize(start + expected, fill);
                        break;
                    }
                    let w = regvalue(&tok).ok_or((tok, "register contents in hex"))?;
                    push(digits, w);
                    tok = lx.next();
                    if tok.is_punct(b':') {
                        tok = lx.next();
                    }
                }
                if digits.len() - start > expected {
                    return Err((tok, "no more register contents than the register holds"));
                }
                for _ in 0..2 * lo {
                    digits.push(b'-');
                }
            }
            (Some(_), _) => {
                // SVE z/p: as long as the data.
                while let Some(w) = regvalue(&tok) {
                    push(digits, w);
                    tok = lx.next();
                    if tok.is_punct(b':') {
                        tok = lx.next();
                    }
                }
                if digits.is_empty() {
                    return Err((tok, "register contents in hex"));
                }
            }
            (None, looked) => {
                let w = regvalue(&tok).ok_or((tok, "register contents in hex"))?;
                push(digits, w);
                tok = lx.next();
                if tok.is_punct(b':') {
                    tok = lx.next();
                    let w = regvalue(&tok).ok_or((tok, "more register contents after ':'"))?;
                    push(digits, w);
                } else {
                    // A 64-bit value split by a space.
                    while digits.len() < 16 && tok.word(l).is_some_and(is_hex) {
                        push(digits, &l[tok.start..tok.end]);
                        tok = lx.next();
                    }
                }
                match looked {
                    RegName::Sp => {
                        reg = Some(match digits.len() {
                            8 => RegId {
                                class: RegClass::R,
                                index: 13,
                            },
                            16 => RegId {
                                class: RegClass::Xsp,
                                index: 0,
                            },
                            _ => return Err((name_tok, "8 or 16 hex digits for SP")),
                        })
                    }
                    RegName::Cpsr => {
                        // Some producers fold other status bits into `cpsr`:
                        // keep the low 32 bits.
                        if digits.len() < 8 {
                            let pad = 8 - digits.len();
                            digits.splice(0..0, std::iter::repeat_n(b'0', pad));
                        }
                        let cut = digits.len() - 8;
                        digits.drain(..cut);
                        reg = Some(RegId {
                            class: RegClass::Psr,
                            index: 0,
                        });
                    }
                    _ => {
                        if digits.len().is_multiple_of(2) && digits.len() > 8 {
                            let cut = digits.len() - 8;
                            digits.drain(..cut);
                        }
                        reg = Some(RegId {
                            class: RegClass::Fpcr,
                            index: 0,
                        });
                    }
                }
            }
        }
        if !digits.len().is_multiple_of(2) {
            return Err((name_tok, "register contents of a whole number of bytes"));
        }
        let n = digits.len() / 2;
        self.reg_bytes.clear();
        self.reg_written.clear();
        for i in (0..n).rev() {
            let pair = &digits[2 * i..2 * i + 2];
            if pair == b"--" {
                self.reg_bytes.push(0);
                self.reg_written.push(false);
            } else {
                let v = parse_hex(pair).ok_or((name_tok, "register contents in hex or '--'"))?;
                self.reg_bytes.push(v as u8);
                self.reg_written.push(true);
            }
        }
        Ok(Kind::Register {
            name: (name_tok.start, name_tok.end),
            extra,
            reg,
            raw,
        })
    }

    fn memory(&mut self, l: &[u8], lx: &mut Lexer, first: Token) -> PResult<Kind> {
        let w = &l[first.start..first.end];
        let mut read = None;
        let mut size = None;
        let mut exclusive = false;
        let mut memory_order = false;
        let mut i = 0;
        while i < w.len() {
            let c = w[i];
            if read.is_none() && (c == b'R' || c == b'W') {
                read = Some(c == b'R');
            } else if size.is_none() && c.is_ascii_digit() {
                let s = i;
                while i + 1 < w.len() && w[i + 1].is_ascii_digit() {
                    i += 1;
                }
                size = Some(parse_dec(&w[s..=i]).unwrap_or(0).min(255) as u8);
            } else if w.len() == 8 && i == 7 && (c == b'I' || c == b'A') {
                // Cortex-M RTL instruction-side or peripheral access.
                return Ok(Kind::MemFetch((first.start, first.end)));
            } else if w.len() == 8 && i == 7 && c == b'D' {
                memory_order = true;
            } else if c == b'X' && size.is_some() {
                exclusive = true;
            }
            i += 1;
        }
        let (read, size) = (read.unwrap_or(true), size.unwrap_or(0));
        if !matches!(size, 1 | 2 | 4 | 8 | 16) {
            return Err((first, "a memory access size of 1, 2, 4, 8 or 16 bytes"));
        }
        let mut tok = lx.next();
        let mut tag = None;
        if tok.is_punct(b'(') {
            // `(addr:serial)` tag (Cortex-R RTL).
            let a = lx.next();
            let c = lx.next();
            let b = lx.next();
            let e = lx.next();
            match (
                a.word(l).and_then(parse_hex),
                c.is_punct(b':'),
                b.word(l).and_then(parse_hex),
                e.is_punct(b')'),
            ) {
                (Some(x), true, Some(y), true) => tag = Some((x, y)),
                _ => return Err((tok, "'(address:serial)' after the memory access type")),
            }
            tok = lx.next();
        }
        if tok.is_word(l, b"TRANSFER") {
            let v = lx.next();
            return Ok(Kind::CoprocTransfer(v.word(l).and_then(parse_hex)));
        }
        if tok.is_word(l, b"X") {
            exclusive = true;
            tok = lx.next();
        }
        let addr = tok.word(l).and_then(parse_hex).ok_or((tok, "a hex memory address"))?;
        tok = lx.next();
        let mut paddr = None;
        if tok.is_punct(b':') {
            tok = lx.next();
            paddr = Some(
                tok.word(l)
                    .and_then(parse_hex_ns)
                    .ok_or((tok, "a hex physical address after ':'"))?,
            );
            tok = lx.next();
        }
        if tok.is_punct(b'(') {
            let k = lx.next();
            if !k.is_word(l, b"ABORTED") {
                return Err((k, "ABORTED in brackets"));
            }
            let close = lx.next();
            if !close.is_punct(b')') {
                return Err((close, "')' after ABORTED"));
            }
            return Ok(Kind::MemAborted { read, size, addr });
        }
        let value = self.mem_value(l, lx, tok, size)?;
        let value = match value {
            Some(v) if memory_order => {
                let mut r = 0u128;
                for b in 0..size as u32 {
                    r |= ((v >> (8 * b)) & 0xff) << (8 * (size as u32 - 1 - b));
                }
                Some(r)
            }
            v => v,
        };
        Ok(Kind::Memory(MemAccess {
            read,
            size,
            addr,
            paddr,
            exclusive,
            value,
            memory_order,
            tag,
        }))
    }

    /// Memory contents: hex with `_` separators; 16-byte data as one token
    /// or as two 8-byte halves (high first); all `x` = unknown.
    fn mem_value(&mut self, l: &[u8], lx: &mut Lexer, tok: Token, size: u8) -> PResult<Option<u128>> {
        let w = tok.word(l).ok_or((tok, "memory contents in hex"))?;
        if w.iter().all(|&c| c == b'x' || c == b'X' || c == b'_') {
            return Ok(None);
        }
        let mut v = 0u128;
        let mut n = 0;
        for &c in w {
            if c == b'_' {
                continue;
            }
            let d = hex_digit(c).ok_or((tok, "memory contents in hex"))?;
            v = (v << 4) | d as u128;
            n += 1;
        }
        if n == 0 || n > 32 || (size <= 8 && n > 16) {
            return Err((tok, "memory contents in hex no wider than the access"));
        }
        if size == 16 && n <= 16 {
            let t2 = lx.next();
            if let Some(w2) = t2.word(l).filter(|w| is_hex(w)) {
                let lo = parse_hex(w2).ok_or((t2, "the low half of 16-byte memory contents"))?;
                v = (v << 64) | lo as u128;
            }
        }
        Ok(Some(v))
    }

    fn diagram(&mut self, l: &[u8], lx: &mut Lexer, addr_tok: Token, read: bool, continuation: bool) -> PResult<Kind> {
        self.state.continuable = Some((read, addr_tok.start));
        let base = addr_tok
            .word(l)
            .and_then(parse_hex)
            .ok_or((addr_tok, "a hex load/store address"))?;
        let mut bytes = [DiagramByte::Unused; 16];
        let mut n = 0;
        let mut tok = lx.next();
        loop {
            let w = tok
                .word(l)
                .filter(|w| w.iter().all(|&c| c.is_ascii_hexdigit() || c == b'.' || c == b'#'))
                .ok_or((tok, "a word of data bytes ('..', '##' or hex)"))?;
            if w.len() % 2 != 0 {
                return Err((tok, "a data word of whole bytes"));
            }
            for pair in w.chunks(2) {
                if n >= 16 {
                    return Err((tok, "exactly 16 data bytes"));
                }
                bytes[n] = match pair {
                    b".." => DiagramByte::Unused,
                    b"##" => DiagramByte::Unknown,
                    p => DiagramByte::Known(parse_hex(p).ok_or((tok, "each byte '..', '##' or hex"))? as u8),
                };
                n += 1;
            }
            if n == 16 {
                break;
            }
            tok = lx.next();
        }
        let rest = lx.next();
        Ok(Kind::Diagram {
            read,
            base,
            bytes,
            continuation,
            attributes: (rest.start, l.len()),
        })
    }
}

/// `12.5us` style: digits, optional fraction, then a unit (or nothing).
/// Returns (value with the point removed, fraction digits, unit start).
fn split_time(w: &[u8]) -> Option<(u64, u8, usize)> {
    let int_end = w.iter().position(|c| !c.is_ascii_digit()).unwrap_or(w.len());
    if int_end == 0 {
        return None;
    }
    let mut end = int_end;
    let mut frac = 0u8;
    if end < w.len() && w[end] == b'.' {
        let f_end = w[end + 1..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(w.len(), |p| end + 1 + p);
        frac = (f_end - end - 1).min(19) as u8;
        end = f_end;
    }
    if end == w.len() && frac == 0 {
        return None;
    }
    let mut v = parse_dec(&w[..int_end])?;
    for &c in &w[int_end + 1..end.max(int_end + 1)] {
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some((v, frac, end))
}

fn is_memory_type(w: &[u8]) -> bool {
    match w {
        [b'R' | b'W', b'0', b'1' | b'2' | b'4' | b'8'] | [b'R' | b'W', b'1', b'6'] => true,
        [b'M', rest @ ..] => rest.iter().any(|&c| c == b'R' || c == b'W') && rest.iter().any(|c| c.is_ascii_digit()),
        _ => false,
    }
}

fn text_kind(w: &[u8]) -> TextKind {
    match w {
        b"BR" => TextKind::Branch,
        b"CADI" => TextKind::Cadi,
        b"SIGNAL" => TextKind::Signal,
        b"TTW" | b"TTU" => TextKind::TableWalk,
        b"TLB" => TextKind::Tlb,
        b"WALKCACHE" => TextKind::WalkCache,
        b"P" | b"INFO_EXCEPTION_REASON" => TextKind::Info,
        _ if w.starts_with(b"CACHE") => TextKind::Cache,
        [b'B', b'R' | b'W', d, ..] if d.is_ascii_digit() => TextKind::Bus,
        _ => TextKind::Unknown,
    }
}

fn exception_or_event(l: &[u8], lx: &mut Lexer, first: Token) -> Kind {
    let next = lx.next();
    let text = (next.start, l.len());
    let w = next.word(l).unwrap_or(b"");
    if w.starts_with(b"DebugEvent_") {
        return Kind::Text(TextKind::Event, (first.start, first.end), text);
    }
    // `E addr[:paddr] code CoreEvent_NAME` or `E NAME value`.
    if let Some(addr) = parse_hex(w).filter(|_| w.len() >= 8) {
        let mut t = lx.next();
        if t.is_punct(b':') {
            lx.next();
            t = lx.next();
        }
        let code = t.word(l).and_then(parse_hex);
        let name = if code.is_some() { lx.next() } else { t };
        return Kind::Exception {
            addr: Some(addr),
            code,
            name: (name.start, name.end),
            text,
        };
    }
    Kind::Exception {
        addr: None,
        code: None,
        name: (next.start, next.end),
        text,
    }
}

/// After `EXC`: the name follows an optional `[vector]`.
fn exc_name(l: &[u8], lx: &mut Lexer) -> (Span, Span) {
    let first = lx.next();
    let mut t = first;
    if first.is_punct(b'[') {
        while !t.is_punct(b']') && t.kind != Tok::Eol {
            t = lx.next();
        }
        t = lx.next();
    }
    ((t.start, l.len()), (first.start, l.len()))
}

fn mem_update(l: &[u8], lx: &mut Lexer, first: Token) -> Kind {
    let w = &l[first.start..first.end];
    let digits_end = 2 + w[2..].iter().position(|c| !c.is_ascii_digit()).unwrap_or(w.len() - 2);
    let size = parse_dec(&w[2..digits_end]).unwrap_or(0).min(255) as u8;
    let op_start = if digits_end < w.len() && w[digits_end] == b'_' {
        digits_end + 1
    } else {
        digits_end
    };
    let next = lx.next();
    Kind::MemUpdate {
        size,
        op: (first.start + op_start, first.end),
        addr: next.word(l).and_then(parse_hex),
        text: (next.start, l.len()),
    }
}

type Span = (usize, usize);

/// A record with spans instead of slices, so that the parser's scratch
/// buffers can be borrowed only once the line is done.
#[derive(Clone, Copy)]
enum Kind {
    Instruction {
        style: InstrStyle,
        effect: Effect,
        inst_id: Option<u64>,
        addr: u64,
        paddr: Option<PhysAddr>,
        encoding: Option<u64>,
        width: u8,
        iset: Iset,
        t16_t32: bool,
        implicit: bool,
        mode: Option<Span>,
        disasm: Span,
    },
    Register {
        name: Span,
        extra: Option<Span>,
        reg: Option<RegId>,
        raw: Span,
    },
    SysOp {
        op: Span,
        text: Span,
    },
    Memory(MemAccess),
    MemAborted {
        read: bool,
        size: u8,
        addr: u64,
    },
    MemFetch(Span),
    CoprocTransfer(Option<u64>),
    Diagram {
        read: bool,
        base: u64,
        bytes: [DiagramByte; 16],
        continuation: bool,
        attributes: Span,
    },
    MemUpdate {
        size: u8,
        op: Span,
        addr: Option<u64>,
        text: Span,
    },
    Exception {
        addr: Option<u64>,
        code: Option<u64>,
        name: Span,
        text: Span,
    },
    Flow {
        kind: FlowKind,
        target: Option<u64>,
        text: Span,
    },
    Header(Span),
    Text(TextKind, Span, Span),
}

impl Kind {
    fn resolve<'a>(self, line: &'a str, bytes: &'a [u8], written: &'a [bool]) -> RecordKind<'a> {
        let s = |sp: Span| line.get(sp.0..sp.1).unwrap_or("");
        match self {
            Kind::Instruction {
                style,
                effect,
                inst_id,
                addr,
                paddr,
                encoding,
                width,
                iset,
                t16_t32,
                implicit,
                mode,
                disasm,
            } => RecordKind::Instruction(Instruction {
                style,
                effect,
                inst_id,
                addr,
                paddr,
                encoding,
                width,
                iset,
                t16_t32,
                implicit_iset: implicit,
                mode: mode.map(s),
                disassembly: s(disasm),
            }),
            Kind::Register { name, extra, reg, raw } => RecordKind::Register(Register {
                name: s(name),
                extra: extra.map(s),
                reg,
                bytes: if reg.is_some() { bytes } else { &[] },
                written: if reg.is_some() { written } else { &[] },
                raw: s(raw),
            }),
            Kind::SysOp { op, text } => RecordKind::SysOp {
                op: s(op),
                text: s(text),
            },
            Kind::Memory(m) => RecordKind::Memory(m),
            Kind::MemAborted { read, size, addr } => RecordKind::MemAborted { read, size, addr },
            Kind::MemFetch(ty) => RecordKind::MemFetch { ty: s(ty) },
            Kind::CoprocTransfer(value) => RecordKind::CoprocTransfer { value },
            Kind::Diagram {
                read,
                base,
                bytes,
                continuation,
                attributes,
            } => RecordKind::Diagram(MemDiagram {
                read,
                base,
                bytes,
                continuation,
                attributes: s(attributes),
            }),
            Kind::MemUpdate { size, op, addr, text } => RecordKind::MemUpdate {
                size,
                op: s(op),
                addr,
                text: s(text),
            },
            Kind::Exception { addr, code, name, text } => RecordKind::Exception {
                addr,
                code,
                name: s(name),
                text: s(text),
            },
            Kind::Flow { kind, target, text } => RecordKind::Flow {
                kind,
                target,
                text: s(text),
            },
            Kind::Header(t) => RecordKind::Header { text: s(t) },
            Kind::Text(kind, ty, text) => RecordKind::Text {
                kind,
                ty: s(ty),
                text: s(text),
            },
        }
    }
}

/// Reads Tarmac records from a `BufRead`, one line at a time, reusing one
/// line buffer.
///
/// ```
/// use coresight_tarmac::{Reader, RecordKind};
/// let text = "1 clk IT (1) 00008000 d2a00200 O EL3h_s : MOV x0,#0x100000\n1 clk R X0 0000000000100000\n";
/// let mut r = Reader::new(text.as_bytes());
/// let mut pcs = Vec::new();
/// while let Some(rec) = r.next_record().unwrap() {
///     if let RecordKind::Instruction(i) = rec.kind { pcs.push(i.addr); }
/// }
/// assert_eq!(pcs, [0x8000]);
/// ```
pub struct Reader<R> {
    src: R,
    buf: Vec<u8>,
    text: String,
    lineno: u64,
    parser: LineParser,
    /// The last line read had no line ending: the input ended in it.
    partial: bool,
    /// Bytes read so far, and the offset of the last line read.
    pos: u64,
    line_pos: u64,
}

impl<R: BufRead> Reader<R> {
    /// A reader of `src` with the default options.
    pub fn new(src: R) -> Self {
        Self::with_options(src, ReaderOptions::default())
    }

    /// A reader of `src` with options `opts`.
    pub fn with_options(src: R, opts: ReaderOptions) -> Self {
        Reader {
            src,
            buf: Vec::with_capacity(256),
            text: String::new(),
            lineno: 0,
            parser: LineParser::new(opts),
            partial: false,
            pos: 0,
            line_pos: 0,
        }
    }

    /// Whether the last line read ended the input without a line ending:
    /// a trace still being written, or cut. An error on such a line is
    /// one the caller may take as the end of the trace, as upstream does.
    pub fn at_partial_line(&self) -> bool {
        self.partial
    }

    /// Line number of the last line read.
    pub fn line_number(&self) -> u64 {
        self.lineno
    }

    /// Byte offset in the input of the last line read (of the line that
    /// gave the last record or error), as upstream's index records a node's
    /// position.
    pub fn line_offset(&self) -> u64 {
        self.line_pos
    }

    /// The next record; `Ok(None)` at the end of the input. Blank lines
    /// are skipped. After an error, reading continues with the next line.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, TarmacError> {
        match self.next_line()? {
            Some(lineno) => self.parser.parse_line(&self.text, lineno),
            None => Ok(None),
        }
    }

    /// [`Reader::next_record`], with the byte offset of the record's line
    /// in the input.
    pub fn next_record_with_offset(&mut self) -> Result<Option<(u64, Record<'_>)>, TarmacError> {
        match self.next_line()? {
            Some(lineno) => Ok(self.parser.parse_line(&self.text, lineno)?.map(|r| (self.line_pos, r))),
            None => Ok(None),
        }
    }

    /// Reads the next line that is not blank into `text`; its number, or
    /// `None` at the end of the input.
    fn next_line(&mut self) -> Result<Option<u64>, TarmacError> {
        loop {
            self.buf.clear();
            let n = self.src.read_until(b'\n', &mut self.buf).map_err(|e| TarmacError {
                line: self.lineno + 1,
                column: 0,
                expected: format!("readable input ({e})"),
                text: String::new(),
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.line_pos = self.pos;
            self.pos += n as u64;
            self.lineno += 1;
            self.partial = self.buf.last() != Some(&b'\n');
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if self.buf.iter().all(|c| c.is_ascii_whitespace()) {
                continue;
            }
            let buf = std::mem::take(&mut self.buf);
            let text = match String::from_utf8(buf) {
                Ok(t) => t,
                Err(e) => {
                    let valid = e.utf8_error().valid_up_to();
                    self.buf = e.into_bytes();
                    return Err(TarmacError {
                        line: self.lineno,
                        column: valid + 1,
                        expected: "UTF-8 text".into(),
                        text: excerpt(&self.buf, valid),
                    });
                }
            };
            // Keep the allocation of the previous line's text for the next read.
            let old = std::mem::replace(&mut self.text, text);
            self.buf = old.into_bytes();
            // Not blank, so the parser gives a record (or an error).
            return Ok(Some(self.lineno));
        }
    }
}
