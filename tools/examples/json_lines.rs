//! `json_lines`: decodes a snapshot's trace buffer with the pull API and
//! writes one JSON object per element to stdout (JSON Lines), for scripts
//! and tools that read JSON.
//!
//! ```text
//! cargo run -p coresight-tools --example json_lines -- SNAPSHOT_DIR [BUFFER]
//! ```
//!
//! The objects are those of `trc_decode --format json`, written by the
//! same function ([`coresight_tools::json::write_decoded`]); the schema is
//! in `docs/json-lines.md`. From `snapshots/itm-messages`:
//!
//! ```text
//! {"index":0,"trace_id":33,"type":"no_sync","reason":"init_decoder"}
//! ```
//!
//! A decode that stops on an error writes the elements before it, then
//! the error on stderr, and exits with status 1.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use coresight_decode::Trace;
use coresight_tools::json::write_decoded;

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
        write_decoded(out, &item?)?;
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

    const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots");

    #[test]
    fn the_objects_are_trc_decodes() {
        // The pull API's elements written here equal the tree's written by
        // trc_decode's serializer, line for line.
        for name in ["etmv4-a64", "stm-messages", "itm-messages", "ete-multi-session"] {
            let dir = format!("{SNAPSHOTS}/{name}");
            let mut out = Vec::new();
            let n = write_json_lines(&dir, None, &mut out).unwrap();
            let mut want = Vec::new();
            for d in coresight_decode::decode_buffer(&dir, None).unwrap() {
                let g = d.element.to_generic();
                coresight_tools::json::write_element(&mut want, d.index, d.trace_id, &g).unwrap();
            }
            assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(want).unwrap(),
                "{name}"
            );
            assert!(n > 10, "{name}: {n}");
        }
        let mut out = Vec::new();
        write_json_lines(&format!("{SNAPSHOTS}/itm-messages"), None, &mut out).unwrap();
        let first = String::from_utf8(out).unwrap().lines().next().unwrap().to_string();
        assert_eq!(
            first,
            r#"{"index":0,"trace_id":33,"type":"no_sync","reason":"init_decoder"}"#
        );
    }

    #[test]
    fn a_missing_snapshot_is_an_error_naming_it() {
        let e = write_json_lines("no/such/snapshot", None, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("no/such/snapshot"), "{e}");
    }
}
