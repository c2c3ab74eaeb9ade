//! Every JSON emitter's objects against the schema documented in
//! `docs/json-lines.md`, for every element kind: the tree's elements
//! (`trc_decode`, `trc_perf`: `json::write_element`), the pull API's
//! (`json::write_decoded`, the `json_lines` example), and the
//! `trc_decode --format json` program itself.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use coresight_decode::Decoded;
use coresight_decode::element::{ElemType, Element, TraceElement};
use coresight_tools::json::{write_decoded, write_element};
use serde_json::Value;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/json-lines.md");
const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots");

/// (field, JSON type, optional) of each documented kind.
type Schema = BTreeMap<String, Vec<(String, String, bool)>>;

fn schema() -> Schema {
    let mut s = Schema::new();
    let doc = std::fs::read_to_string(DOC).unwrap();
    for line in doc.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [kind, field, ty, opt] = cells[..] else {
            panic!("table row without 4 cells: {line}")
        };
        if kind == "type" {
            continue;
        }
        let fields = s.entry(kind.to_string()).or_default();
        if !field.is_empty() {
            let ty = ty.split(':').next().unwrap().to_string();
            fields.push((field.to_string(), ty, opt == "yes"));
        }
    }
    s
}

/// Every element type (`ElemType` is non-exhaustive: a kind added to
/// the library needs a line here and a row in the schema).
fn all_types() -> Vec<ElemType> {
    use ElemType::*;
    vec![
        Unknown,
        NoSync,
        TraceOn,
        EoTrace,
        PeContext,
        InstrRange,
        IRangeNoPath,
        AddrNacc,
        AddrUnknown,
        Exception,
        ExceptionRet,
        Timestamp,
        CycleCount,
        Event,
        SwTrace,
        SyncMarker,
        MemTrans,
        Instrumentation,
        ItmTrace,
        Custom,
        DataAccess,
    ]
}

fn check(schema: &Schema, obj: &Value, what: &str) -> String {
    let o = obj
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {obj}"));
    assert!(o["index"].is_u64() && o["trace_id"].is_u64(), "{what}: {obj}");
    let kind = o["type"].as_str().unwrap_or_else(|| panic!("{what}: no type: {obj}"));
    let fields = schema
        .get(kind)
        .unwrap_or_else(|| panic!("{what}: type {kind} is not documented: {obj}"));
    for (k, v) in o {
        if matches!(k.as_str(), "index" | "trace_id" | "type") || (k == "cycle_count" && v.is_u64()) {
            continue;
        }
        let (_, ty, _) = fields
            .iter()
            .find(|(f, _, _)| f == k)
            .unwrap_or_else(|| panic!("{what}: {kind} has undocumented field {k}: {obj}"));
        let ok = match ty.as_str() {
            "hex" => v
                .as_str()
                .and_then(|s| s.strip_prefix("0x"))
                .is_some_and(|h| u64::from_str_radix(h, 16).is_ok()),
            "number" => v.is_u64() || v.is_i64(),
            "bool" => v.is_boolean(),
            "string" => v.is_string(),
            "object" => v.is_object(),
            t => panic!("unknown JSON type {t} in the doc"),
        };
        assert!(ok, "{what}: {kind}.{k} is not {ty}: {obj}");
    }
    for (f, _, optional) in fields {
        assert!(*optional || o.contains_key(f), "{what}: {kind} lacks {f}: {obj}");
    }
    kind.to_string()
}

/// Both library emitters' objects for one element, which must be equal.
fn emit(index: u64, trace_id: u8, g: &TraceElement) -> Value {
    let mut tree = Vec::new();
    write_element(&mut tree, index, trace_id, g).unwrap();
    let mut pull = Vec::new();
    let d = Decoded {
        index,
        trace_id,
        element: Element::from_generic(g),
    };
    write_decoded(&mut pull, &d).unwrap();
    let (tree, pull) = (String::from_utf8(tree).unwrap(), String::from_utf8(pull).unwrap());
    assert_eq!(tree, pull);
    assert_eq!(tree.lines().count(), 1);
    serde_json::from_str(&tree).unwrap()
}

#[test]
fn every_kind_of_every_emitter_is_as_documented() {
    let schema = schema();
    let mut seen = BTreeSet::new();
    // Every kind, bare and with a cycle count.
    for t in all_types() {
        let mut g = TraceElement::default();
        g.set_type(t);
        seen.insert(check(&schema, &emit(1, 0x10, &g), &format!("{t:?}")));
        g.set_cycle_count(7);
        let v = emit(1, 0x10, &g);
        check(&schema, &v, &format!("{t:?} with cycle count"));
        if matches!(t, ElemType::InstrRange | ElemType::Timestamp | ElemType::CycleCount) {
            assert_eq!(v.get("cycle_count"), Some(&Value::from(7)), "{t:?}: {v}");
        }
    }
    assert_eq!(
        seen,
        schema.keys().cloned().collect(),
        "documented kinds and emitted kinds differ"
    );

    // Real elements, with their optional fields, from every shipped snapshot,
    // through the library's emitters and through trc_decode.
    let mut real = BTreeSet::new();
    for e in std::fs::read_dir(SNAPSHOTS).unwrap() {
        let dir = e.unwrap().path();
        if !dir.join("snapshot.ini").is_file() {
            continue;
        }
        for d in coresight_decode::decode_buffer(dir.to_str().unwrap(), None).unwrap() {
            real.insert(check(
                &schema,
                &emit(d.index, d.trace_id, &d.element.to_generic()),
                &dir.display().to_string(),
            ));
        }
        let out = Command::new(env!("CARGO_BIN_EXE_trc_decode"))
            .arg(&dir)
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            check(&schema, &serde_json::from_str(line).unwrap(), "trc_decode");
        }
    }
    assert!(real.len() >= 12, "{real:?}");
}
