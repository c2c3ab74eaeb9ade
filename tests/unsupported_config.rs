//! ETMv4 / ETE configurations the decoder does not implement (load/store
//! P0 elements, data trace, conditional non-branch tracing) are refused
//! on every library path, with the register field named; their packets
//! still list.

mod common;

use std::path::{Path, PathBuf};

use coresight_decode::decoder::{DecodeMode, SourceConfig};
use coresight_decode::{DecodeTree, Decoder, ErrCode, Error, Snapshot};

const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots");

/// A copy of the shipped snapshot `name` with `reg` of its trace source
/// file `src_ini` set to `value`.
fn with_reg(name: &str, src_ini: &str, reg: &str, value: u32, test: &str) -> PathBuf {
    let dir = common::temp_dir(test);
    for e in std::fs::read_dir(Path::new(SNAPSHOTS).join(name)).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read(&p).unwrap();
        let file = p.file_name().unwrap().to_str().unwrap().to_string();
        let text = if file == src_ini {
            let s = String::from_utf8(text).unwrap();
            let prefix = format!("{reg}=");
            assert!(s.contains(&prefix), "{file} has no {reg}");
            s.lines()
                .map(|l| {
                    if l.starts_with(&prefix) {
                        format!("{prefix}0x{value:08X}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        } else {
            text
        };
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

fn refusal(dir: &Path, buffer: &str) -> String {
    let ss = Snapshot::load(dir).unwrap();
    match Decoder::from_snapshot(&ss, buffer) {
        Err(e @ Error::NoDecoder { .. }) => {
            assert_eq!(e.err_code(), ErrCode::TestSsToDecoder);
            e.to_string()
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("decoder made for {}", dir.display()),
    }
}

#[test]
fn etmv4_load_store_p0_is_refused_with_the_field_named() {
    let dir = with_reg("etmv4-a64", "etm_0.ini", "TRCCONFIGR", 0x1083, "unsupp_instp0");
    assert_eq!(
        refusal(&dir, "ETB_0"),
        "no decodable trace source in buffer 'ETB_0': etm_0: TRCCONFIGR = 0x00001083: INSTP0 (bits [2:1]) = 0b01 \
         traces loads and stores as P0 elements, which are not decoded (atoms would be taken for branches); \
         only INSTP0 = 0b00 is"
    );
    // Packets alone still list: only their decode would be wrong.
    let ss = Snapshot::load(&dir).unwrap();
    assert!(ss.build_tree("ETB_0", DecodeMode::PacketsOnly, |_| {}).is_ok());
}

#[test]
fn etmv4_conditional_tracing_is_refused_with_the_field_named() {
    let dir = with_reg("etmv4-a64", "etm_0.ini", "TRCCONFIGR", 0x1781, "unsupp_cond");
    assert_eq!(
        refusal(&dir, "ETB_0"),
        "no decodable trace source in buffer 'ETB_0': etm_0: TRCCONFIGR = 0x00001781: COND (bits [10:8]) = 0b111 \
         traces conditional non-branch instructions, which are not decoded; only COND = 0b000 is"
    );
}

#[test]
fn etmv4_data_trace_is_refused_with_the_field_named() {
    // Data trace needs TRCIDR0.TRCDATA = 0b11 as well as INSTP0 and DA/DV.
    let dir = with_reg("etmv4-a64", "etm_0.ini", "TRCIDR0", 0x2000_0ED9, "unsupp_data");
    let ini = dir.join("etm_0.ini");
    let text = std::fs::read_to_string(&ini)
        .unwrap()
        .replace("TRCCONFIGR=0x00001081", "TRCCONFIGR=0x00011087");
    std::fs::write(&ini, text).unwrap();
    assert_eq!(
        refusal(&dir, "ETB_0"),
        "no decodable trace source in buffer 'ETB_0': etm_0: TRCCONFIGR = 0x00011087: data trace (DA/DV, \
         bits [17:16] = 0b01, with INSTP0 bits [2:1] = 0b11) is not decoded"
    );
}

#[test]
fn ete_reserved_p0_fields_are_refused() {
    // INSTP0 and COND are RES0 in ETE: set, the trace is not what the
    // decoder reads either.
    let dir = with_reg("ete-all-options", "ete_0.ini", "TRCCONFIGR", 0x1853, "unsupp_ete");
    let ss = Snapshot::load(&dir).unwrap();
    let buffer = ss.buffer_names()[0].to_string();
    assert_eq!(
        refusal(&dir, &buffer),
        format!(
            "no decodable trace source in buffer '{buffer}': ete_0: TRCCONFIGR = 0x00001853: INSTP0 (bits [2:1]) = \
             0b01 traces loads and stores as P0 elements, which are not decoded (atoms would be taken for \
             branches); only INSTP0 = 0b00 is"
        )
    );
}

#[test]
fn a_hand_made_decoder_is_refused_with_hw_cfg_unsupp() {
    let cfg = |configr: u64| SourceConfig {
        name: "etm".into(),
        device_type: "ETM4".into(),
        regs: vec![
            ("TRCCONFIGR".into(), configr),
            ("TRCTRACEIDR".into(), 0x10),
            ("TRCIDR0".into(), 0x2800_0EA1),
            ("TRCIDR2".into(), 0x488),
        ],
        core: None,
    };
    let mut tree = DecodeTree::new(coresight_decode::tree::SourceFormat::Single, DecodeMode::FullDecode);
    let e = tree.create_decoder("ETMV4I", &cfg(0x1C1)).unwrap_err();
    assert_eq!(e.code, ErrCode::HwCfgUnsupp);
    assert_eq!(
        e.message,
        "TRCCONFIGR = 0x000001c1: COND (bits [10:8]) = 0b001 traces conditional non-branch instructions, \
         which are not decoded; only COND = 0b000 is"
    );
    assert!(tree.create_decoder("ETMV4I", &cfg(0xC1)).is_ok());
    // Packet listing takes any configuration.
    let mut tree = DecodeTree::new(coresight_decode::tree::SourceFormat::Single, DecodeMode::PacketsOnly);
    assert!(tree.create_decoder("ETMV4I", &cfg(0x1C7)).is_ok());
}
