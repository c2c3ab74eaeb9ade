//! The registers as a trace says they stand at a point: the last value
//! written of each register up to that point.
//!
//! Registers are keyed by the name the trace wrote, upper-cased (`X0`,
//! `SP_EL0`, `r14_svc` as `R14_SVC`), except that a write of `Wn` is a
//! write of `Xn` with the upper 32 bits cleared, as the architecture does,
//! so that a register shows one value whichever view the trace logged.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::record::{Record, RecordKind, RegClass};

/// One register's value: bytes least significant first, and which of them
/// the trace has written so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegValue {
    /// Value bytes, least significant first.
    pub bytes: Vec<u8>,
    /// Which bytes are known.
    pub known: Vec<bool>,
}

impl RegValue {
    /// The value as hex, most significant byte first, `--` for a byte the
    /// trace never wrote (the form of the trace's own `R` lines).
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(self.bytes.len() * 2);
        for (b, k) in self.bytes.iter().zip(&self.known).rev() {
            if *k {
                let _ = write!(s, "{b:02x}");
            } else {
                s.push_str("--");
            }
        }
        s
    }
}

/// Sort key: the name's letters, then its trailing number (`X2` before `X10`).
fn sort_key(name: &str) -> (&str, u32, &str) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, num) = name.split_at(name.len() - digits);
    (prefix, num.parse().unwrap_or(0), name)
}

/// The registers written so far, fed one record at a time. Feeding
/// allocates only for a register not seen before.
#[derive(Clone, Debug, Default)]
pub struct RegisterState {
    slots: Vec<(String, RegValue)>,
    by_name: HashMap<String, usize>,
    scratch: String,
}

impl RegisterState {
    /// No register written yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every register.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.by_name.clear();
    }

    /// Takes the register write of `rec`, if it is one.
    pub fn feed(&mut self, rec: &Record) {
        let RecordKind::Register(r) = rec.kind else { return };
        let name = &mut self.scratch;
        name.clear();
        let zero_extend = match r.reg {
            Some(id) if id.class == RegClass::W => {
                let _ = write!(name, "X{}", id.index);
                true
            }
            Some(id) if id.class == RegClass::Wsp => {
                name.push_str("XSP");
                true
            }
            _ => {
                name.extend(r.name.chars().map(|c| c.to_ascii_uppercase()));
                false
            }
        };
        let i = match self.by_name.get(name.as_str()) {
            Some(&i) => i,
            None => {
                self.slots.push((name.clone(), RegValue::default()));
                self.by_name.insert(name.clone(), self.slots.len() - 1);
                self.slots.len() - 1
            }
        };
        let v = &mut self.slots[i].1;
        let len = if zero_extend { 8 } else { r.bytes.len() };
        if v.bytes.len() < len {
            v.bytes.resize(len, 0);
            v.known.resize(len, false);
        }
        for (i, (&b, &w)) in r.bytes.iter().zip(r.written).enumerate() {
            if w {
                v.bytes[i] = b;
                v.known[i] = true;
            }
        }
        if zero_extend {
            for i in 4..8 {
                v.bytes[i] = 0;
                v.known[i] = true;
            }
        }
    }

    /// The registers in name order (`X0`, `X1`, ..., `X10`), with their values.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RegValue)> {
        let mut order: Vec<&(String, RegValue)> = self.slots.iter().collect();
        order.sort_by(|a, b| sort_key(&a.0).cmp(&sort_key(&b.0)));
        order.into_iter().map(|(n, v)| (n.as_str(), v))
    }

    /// One register's value by its upper-case name.
    pub fn get(&self, name: &str) -> Option<&RegValue> {
        self.by_name.get(name).map(|&i| &self.slots[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reader;

    /// The state after feeding the records of `text` up to line `upto`.
    fn state_at(text: &str, upto: u64) -> RegisterState {
        let mut r = Reader::new(text.as_bytes());
        let mut s = RegisterState::new();
        while let Some(rec) = r.next_record().unwrap() {
            if rec.line > upto {
                break;
            }
            s.feed(&rec);
        }
        s
    }

    const TRACE: &str = "\
0 clk R X0 0000000000000001
0 clk R X10 00000000000000aa
1 clk IT (1) 00001000 d2800040 O EL0t_n : mov x0, #2
1 clk R X0 0000000000000002
2 clk IT (2) 00001004 2a0103e0 O EL0t_n : mov w0, w1
2 clk R W0 ffffffff
3 clk IT (3) 00001008 d503201f O EL0t_n : nop
";

    #[test]
    fn last_value_written_up_to_a_line() {
        let s = state_at(TRACE, 1);
        assert_eq!(s.get("X0").unwrap().hex(), "0000000000000001");
        let s = state_at(TRACE, 4);
        assert_eq!(s.get("X0").unwrap().hex(), "0000000000000002");
        assert_eq!(s.get("X10").unwrap().hex(), "00000000000000aa");
        assert!(s.get("X1").is_none());
    }

    #[test]
    fn w_write_is_x_with_upper_half_cleared() {
        let mut s = state_at(TRACE, 4);
        // Pretend the upper half had been set: a W write must clear it.
        let i = s.by_name["X0"];
        s.slots[i].1.bytes[7] = 0x55;
        let mut r = Reader::new(TRACE.as_bytes());
        while let Some(rec) = r.next_record().unwrap() {
            if rec.line == 6 {
                s.feed(&rec);
            }
        }
        assert_eq!(s.get("X0").unwrap().hex(), "00000000ffffffff");
    }

    #[test]
    fn names_in_numeric_order_and_partial_writes_shown() {
        let s = state_at(TRACE, 7);
        let names: Vec<&str> = s.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["X0", "X10"]);
        let v = RegValue {
            bytes: vec![1, 2, 0, 0],
            known: vec![true, true, false, false],
        };
        assert_eq!(v.hex(), "----0201");
    }
}
