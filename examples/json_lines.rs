//! `json_lines`: decodes a snapshot's trace buffer and writes one JSON
//! object per element to stdout (JSON Lines), for scripts and tools that
//! read JSON.
//!
//! ```text
//! cargo run --example json_lines -- SNAPSHOT_DIR [BUFFER]
//! ```
//!
//! Each line has the trace index, the trace ID, the element kind and that
//! kind's fields (numbers in decimal; absent optional fields left out;
//! keys in alphabetical order). From `snapshots/itm-messages`:
//!
//! ```text
//! {"index":0,"kind":"no_sync","reason":"InitDecoder","trace_id":33}
//! {"index":11,"kind":"itm_trace","overflow":false,"port":5,"size":1,"trace_id":33,"value":237}
//! ```
//!
//! A decode that stops on an error writes the elements before it, then
//! the error on stderr, and exits with status 1.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use coresight_decode::element::{Event, ItmMessage};
use coresight_decode::{Decoded, Element, Trace};
use serde_json::{Map, Value, json};

/// The JSON object for one element.
pub fn to_json(d: &Decoded) -> Value {
    let mut o = Map::new();
    o.insert("index".into(), json!(d.index));
    o.insert("trace_id".into(), json!(d.trace_id));
    o.insert("kind".into(), json!(d.element.kind_name()));
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            o.insert(k.into(), v);
        }
    };
    match d.element {
        Element::Unknown | Element::AddrUnknown { .. } | Element::ExceptionRet { .. } | Element::CycleCount { .. } => {}
        Element::NoSync { reason } | Element::EoTrace { reason } => put("reason", json!(format!("{reason:?}"))),
        Element::TraceOn { reason, .. } => put("reason", json!(format!("{reason:?}"))),
        Element::PeContext { isa, context, .. } => {
            put("isa", json!(isa.short_name()));
            put("security", json!(format!("{:?}", context.security)));
            put("el", json!(context.exception_level.and_then(|el| el.number())));
            put("bits64", json!(context.bits64));
            put("context_id", json!(context.context_id));
            put("vmid", json!(context.vmid));
        }
        Element::InstrRange {
            isa,
            start,
            end,
            num_instr,
            last,
            ..
        } => {
            put("isa", json!(isa.short_name()));
            put("start", json!(start));
            put("end", json!(end));
            put("num_instr", json!(num_instr));
            put("last_executed", json!(last.executed));
            put("last_kind", json!(format!("{:?}", last.kind)));
        }
        Element::IRangeNoPath {
            isa,
            start,
            next,
            num_instr,
        } => {
            put("isa", json!(isa.short_name()));
            put("start", json!(start));
            put("next", json!(next));
            put("num_instr", json!(num_instr));
        }
        Element::AddrNacc { addr, mem_space, .. } => {
            put("addr", json!(addr));
            put("mem_space", json!(mem_space.to_string()));
        }
        Element::Exception {
            number,
            preferred_return,
            ..
        } => {
            put("number", json!(number));
            put("preferred_return", json!(preferred_return));
        }
        Element::Timestamp { timestamp, .. } => put("timestamp", json!(timestamp)),
        Element::Event(e) => match e {
            Event::Trigger => put("event", json!("trigger")),
            Event::Numbered(n) => put("event", json!(n)),
            // `Event` is non_exhaustive: kinds added later, like Unknown,
            // have no field here.
            _ => {}
        },
        Element::SwTrace(s) => {
            if let Some(src) = s.source {
                put("master", json!(src.master));
                put("channel", json!(src.channel));
            }
            if let Some(p) = s.payload {
                put("bits", json!(p.bits));
                put("value", json!(p.value));
            }
            put("marker", json!(s.marker));
            put("timestamp", json!(s.timestamp));
        }
        Element::SyncMarker { value } => put("value", json!(value)),
        Element::MemTrans { op } => put("op", json!(format!("{op:?}"))),
        Element::Instrumentation { el, value } => {
            put("el", json!(el));
            put("value", json!(value));
        }
        Element::ItmTrace(t) => {
            match t.message {
                ItmMessage::Software { port, size, value } => {
                    put("port", json!(port));
                    put("size", json!(size));
                    put("value", json!(value));
                }
                ItmMessage::Hardware {
                    discriminator,
                    size,
                    value,
                } => {
                    put("discriminator", json!(discriminator));
                    put("size", json!(size));
                    put("value", json!(value));
                }
                ItmMessage::LocalTimestamp { delta, timestamp, .. } => {
                    put("delta", json!(delta));
                    put("timestamp", json!(timestamp));
                }
                ItmMessage::GlobalTimestamp { timestamp } => put("timestamp", json!(timestamp)),
            }
            put("overflow", json!(t.overflow));
        }
        Element::Custom { kind, value, text } => {
            put("custom_kind", json!(kind));
            put("value", json!(value));
            put("text", json!(text));
        }
        Element::DataAccess(a) => {
            put(
                "store",
                json!(matches!(a.kind, coresight_decode::element::DataAccessKind::Store)),
            );
            put("addr", json!(a.addr));
            put("value", json!(a.value));
        }
        // Kinds added to the library later: the kind name only.
        _ => {}
    }
    if let Some(cc) = d.element.cycle_count() {
        o.insert("cycle_count".into(), json!(cc));
    }
    Value::Object(o)
}

/// Writes the JSON lines of a snapshot's buffer to `out`; returns how
/// many elements were written.
pub fn write_json_lines(
    dir: &str,
    buffer: Option<&str>,
    out: &mut impl Write,
) -> Result<usize, Box<dyn std::error::Error>> {
    let mut trace = match buffer {
        Some(b) => Trace::open_buffer(dir, b)?,
        None => Trace::open(dir)?,
    };
    let mut n = 0;
    for item in trace.elements() {
        serde_json::to_writer(&mut *out, &to_json(&item?))?;
        out.write_all(b"\n")?;
        n += 1;
    }
    Ok(n)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, buffer) = match args.as_slice() {
        [dir] => (dir.as_str(), None),
        [dir, buffer] => (dir.as_str(), Some(buffer.as_str())),
        _ => {
            eprintln!("usage: json_lines SNAPSHOT_DIR [BUFFER]");
            return ExitCode::from(2);
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let result = write_json_lines(dir, buffer, &mut out);
    let _ = out.flush();
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("json_lines: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(dir: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let n = write_json_lines(dir, None, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let v: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(v.len(), n);
        v
    }

    #[test]
    fn one_json_object_per_element_with_its_fields() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");
        let v = lines(dir);
        let decoded = coresight_decode::decode_buffer(dir, None).unwrap();
        assert_eq!(v.len(), decoded.len());
        for (j, d) in v.iter().zip(&decoded) {
            assert_eq!(j["index"], json!(d.index));
            assert_eq!(j["kind"], json!(d.element.kind_name()));
            if let Element::InstrRange {
                start, end, num_instr, ..
            } = d.element
            {
                assert_eq!((j["start"].as_u64(), j["end"].as_u64()), (Some(start), Some(end)));
                assert_eq!(j["num_instr"].as_u64(), Some(num_instr as u64));
                assert_eq!(j["isa"], "A64");
            }
        }
        assert_eq!(
            v[0],
            json!({"index": 0, "trace_id": 0x15, "kind": "no_sync", "reason": "InitDecoder"})
        );
        assert_eq!(v.last().unwrap()["kind"], "eo_trace");
        assert!(v.iter().filter(|j| j["kind"] == "instr_range").count() > 50);
    }

    #[test]
    fn software_messages_carry_master_channel_and_value() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/stm-messages");
        let v = lines(dir);
        let sw: Vec<&Value> = v.iter().filter(|j| j["kind"] == "swtrace").collect();
        assert!(sw.len() > 20, "{}", sw.len());
        let decoded = coresight_decode::decode_buffer(dir, None).unwrap();
        let first = decoded.iter().find_map(|d| match d.element {
            Element::SwTrace(s) => Some(s),
            _ => None,
        });
        let first = first.unwrap();
        assert_eq!(sw[0]["master"].as_u64(), first.source.map(|s| s.master as u64));
        assert_eq!(sw[0]["value"].as_u64(), first.payload.map(|p| p.value));
    }

    #[test]
    fn a_missing_snapshot_is_an_error_naming_it() {
        let e = write_json_lines("no/such/snapshot", None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("no/such/snapshot"), "{e}");
    }
}
