//! `swtrace`: prints the software messages in an STM or ITM trace.
//!
//! ```text
//! swtrace [--stm | --itm] [--formatted [--tpiu] --id <trace id>] [--tcr <reg>] [--all] <file>
//! ```
//!
//! The input is the raw trace stream of one STM or ITM (unformatted, the
//! default), or CoreSight formatted frames (`--formatted`: 16-byte aligned
//! frames as an ETB/ETR holds them, `--tpiu` for a TPIU capture with frame
//! syncs) from which the source with `--id` is taken. `--tcr` gives the
//! source's control register (STMTCSR / ITMTCR) when it matters (the ITM
//! local timestamp prescaler).
//!
//! One line per software message: for STM the master and channel, the
//! payload size and value, `marker` / `trigger`, and the timestamp when the
//! packet carried one; for ITM the stimulus port, size and value, and the
//! local timestamp that followed it (ITM sends a timestamp after the
//! packets it applies to). `--all` also prints ITM hardware (DWT) packets,
//! global timestamps and overflows. Bad data is reported with a `!` line;
//! decoding resynchronises and carries on.
//!
//! For example, an STM stream holding an ASYNC, VERSION, master 0x41,
//! channel 0x23, an 8-bit write of 0xab, and a 32-bit marked write of
//! 0xdeadbeef with timestamp 0x12 prints:
//!
//! ```text
//! master 0x41 channel 0x0023  D8  0xab
//! master 0x41 channel 0x0023  D32 0xdeadbeef  marker  ts=0x12
//! ```

use coresight_decode::shared::Lock;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::sync::Arc;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeMode, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::element::{ElemType, ItmPktKind, TraceElement};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::tree::{DecodeTree, SourceFormat};

/// Which protocol the source speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Stm,
    Itm,
}

/// What to decode and how to show it.
#[derive(Clone, Debug)]
pub struct Options {
    pub protocol: Protocol,
    /// `None`: unformatted input. `Some(tpiu)`: formatted frames, with
    /// frame syncs when `tpiu`.
    pub formatted: Option<bool>,
    /// Trace ID of the source in formatted input.
    pub id: u8,
    /// STMTCSR / ITMTCR, without the trace ID (which `id` gives).
    pub tcr: u32,
    /// Also show ITM hardware packets, global timestamps and overflows.
    pub all: bool,
}

/// Turns generic elements into message lines.
struct Printer {
    out: Arc<Lock<String>>,
    all: bool,
    /// ITM messages waiting for the local timestamp that follows them.
    pending: Vec<String>,
}

impl Printer {
    fn flush_pending(&mut self, ts: Option<u64>) {
        let mut out = self.out.borrow_mut();
        for l in self.pending.drain(..) {
            out.push_str(&l);
            if let Some(t) = ts {
                let _ = write!(out, "  ts=0x{t:x}");
            }
            out.push('\n');
        }
    }

    fn stm(&mut self, e: &TraceElement) {
        let sw = &e.sw_trace;
        let mut l = String::new();
        if sw.global_err {
            let _ = writeln!(l, "! global error (masters lost trace)");
            self.out.borrow_mut().push_str(&l);
            return;
        }
        if sw.id_valid {
            let _ = write!(l, "master 0x{:02x} channel 0x{:04x}", sw.master_id, sw.channel_id);
        } else {
            l.push_str("master ??   channel ??    ");
        }
        if sw.master_err {
            let _ = writeln!(l, "  ! master error 0x{:02x}", e.sw_payload as u8);
            self.out.borrow_mut().push_str(&l);
            return;
        }
        if sw.frequency {
            let _ = write!(l, "  frequency {} Hz", e.sw_payload as u32);
        } else if sw.trigger {
            let _ = write!(l, "  TRIG 0x{:02x}", e.sw_payload as u8);
        } else if sw.payload_bits > 0 {
            let bits = sw.payload_bits as u32;
            let v = if bits >= 64 {
                e.sw_payload
            } else {
                e.sw_payload & ((1u64 << bits) - 1)
            };
            let _ = write!(l, "  D{:<2} 0x{:0w$x}", bits, v, w = (bits as usize).div_ceil(4));
            if sw.marker {
                l.push_str("  marker");
            }
        } else if sw.marker {
            l.push_str("  FLAG");
        } else {
            l.push_str("  NULL");
        }
        if sw.has_timestamp {
            let _ = write!(l, "  ts=0x{:x}", e.timestamp);
        }
        l.push('\n');
        self.out.borrow_mut().push_str(&l);
    }

    fn itm(&mut self, e: &TraceElement) {
        let itm = &e.itm;
        if itm.overflow {
            self.flush_pending(None);
            if self.all {
                self.out.borrow_mut().push_str("! overflow: packets lost\n");
            }
        }
        match itm.kind {
            ItmPktKind::Swit => {
                let w = itm.payload_size as usize * 2;
                self.pending.push(format!(
                    "port {:<3} D{:<2} 0x{:0w$x}",
                    itm.channel_or_desc,
                    itm.payload_size * 8,
                    itm.value
                ));
            }
            ItmPktKind::Dwt if self.all => {
                let w = itm.payload_size as usize * 2;
                self.pending.push(format!(
                    "hw 0x{:02x}  D{:<2} 0x{:0w$x}",
                    itm.channel_or_desc,
                    itm.payload_size * 8,
                    itm.value
                ));
            }
            ItmPktKind::TsLocal => self.flush_pending(Some(e.timestamp)),
            ItmPktKind::TsGlobal if self.all => {
                self.flush_pending(None);
                let _ = writeln!(self.out.borrow_mut(), "global timestamp 0x{:x}", e.timestamp);
            }
            // Hardware packets and global timestamps without --all, and
            // packet kinds a later library may add: nothing to print.
            _ => {}
        }
    }
}

impl TrcGenElemIn for Printer {
    fn trace_elem_in(&mut self, _index: TrcIndex, _id: u8, e: &TraceElement) -> DatapathResp {
        match e.elem_type {
            ElemType::SwTrace => self.stm(e),
            ElemType::ItmTrace => self.itm(e),
            ElemType::EoTrace => self.flush_pending(None),
            _ => {}
        }
        DatapathResp::Cont
    }
}

/// Decodes `data` as `opts` says; returns the message lines and the
/// number of errors: those the decoders logged, or if more, the places bad
/// data stopped the decode (in full decode a packet processor's error is
/// not logged, as in OpenCSD, but it still stops the decode).
pub fn run(opts: &Options, data: &[u8]) -> (String, usize) {
    let format = match opts.formatted {
        None => SourceFormat::Single,
        Some(false) => SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        Some(true) => SourceFormat::Formatted(DeformatterConfig::fsync_stream()),
    };
    let mut tree = DecodeTree::new(format, DecodeMode::FullDecode);
    let (name, reg) = match opts.protocol {
        Protocol::Stm => ("STM", "STMTCSR"),
        Protocol::Itm => ("ITM", "ITMTCR"),
    };
    let value = (opts.tcr & !0x007f_0000) | ((opts.id as u32 & 0x7f) << 16);
    let cfg = SourceConfig {
        name: format!("{name}_0"),
        device_type: name.into(),
        regs: vec![(reg.into(), value as u64)],
        core: None,
    };
    tree.create_decoder(name, &cfg).expect("the protocol is built in");
    let out = Arc::new(Lock::new(String::new()));
    tree.set_gen_elem_out(Box::new(Printer {
        out: out.clone(),
        all: opts.all,
        pending: Vec::new(),
    }));

    // Formatted input comes in whole frames (or sync-sized units).
    let unit = match format {
        SourceFormat::Formatted(c) => c.alignment(),
        SourceFormat::Single => 1,
    };
    let data = &data[..data.len() - data.len() % unit];
    let mut done = 0;
    let mut stops = 0;
    while done < data.len() {
        let (resp, used) = tree.trace_data_in(DatapathOp::Data, done as TrcIndex, &data[done..]);
        done += used;
        if resp.is_fatal() {
            // Bad data: start again after it and look for the next sync.
            stops += 1;
            let _ = writeln!(out.borrow_mut(), "! bad data near byte {done}: resynchronising");
            tree.trace_data_in(DatapathOp::Reset, done as TrcIndex, &[]);
            if used == 0 {
                done += unit;
            }
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let errors = tree.error_logger().borrow().error_count().max(stops);
    let text = out.borrow().clone();
    (text, errors)
}

fn usage() -> ! {
    eprintln!("usage: swtrace [--stm | --itm] [--formatted [--tpiu] --id <trace id>] [--tcr <reg>] [--all] <file>");
    std::process::exit(2);
}

fn number(s: Option<String>) -> u32 {
    let s = s.unwrap_or_else(|| usage());
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.unwrap_or_else(|_| usage())
}

#[allow(dead_code)]
fn main() {
    let mut opts = Options {
        protocol: Protocol::Stm,
        formatted: None,
        id: 0,
        tcr: 0,
        all: false,
    };
    let mut file = None;
    let mut tpiu = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--stm" => opts.protocol = Protocol::Stm,
            "--itm" => opts.protocol = Protocol::Itm,
            "--formatted" => opts.formatted = Some(false),
            "--tpiu" => tpiu = true,
            "--id" => opts.id = number(args.next()) as u8 & 0x7f,
            "--tcr" => opts.tcr = number(args.next()),
            "--all" => opts.all = true,
            "-h" | "--help" => usage(),
            _ if file.is_none() && !a.starts_with('-') => file = Some(a),
            _ => usage(),
        }
    }
    if tpiu {
        opts.formatted = Some(true);
    }
    let Some(path) = file else { usage() };
    let mut data = Vec::new();
    if let Err(e) = std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut data)) {
        eprintln!("swtrace: {path}: {e}");
        std::process::exit(1);
    }
    let (text, errors) = run(&opts, &data);
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if errors > 0 {
        eprintln!("swtrace: {errors} decode error(s) reported");
    }
}
