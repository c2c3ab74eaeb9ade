//! The decoded-block cache under the instruction walk: branchless memory
//! is walked once, not once per atom (a 16 MB NOP image used to take
//! minutes under a short ETMv4 trace).

mod common;

use std::time::{Duration, Instant};

use coresight_generator::check::decode_dir;
use coresight_generator::{GenOptions, Truth, generate};

const A64_NOP: [u8; 4] = 0xD503_201Fu32.to_le_bytes();

#[test]
fn a_16_mb_nop_image_decodes_in_about_the_time_of_the_real_one() {
    let g = generate(&GenOptions {
        seed: 5,
        length: 2000,
        ..GenOptions::default()
    });
    let real = common::temp_dir("block-cache-real");
    g.spec.write_to(&real).unwrap();

    // The same trace over memory that holds nothing but NOPs: the first
    // region grows to 16 MB, any others keep their size.
    let mut spec = g.spec.clone();
    let mut ends = Vec::new();
    let mut first = true;
    for d in spec.devices.iter_mut().flat_map(|d| d.dumps.iter_mut()) {
        let len = if first { 16 << 20 } else { d.data.len() };
        first = false;
        d.data = A64_NOP.iter().copied().cycle().take(len).collect();
        ends.push(d.address + len as u64);
    }
    let nops = common::temp_dir("block-cache-nops");
    spec.write_to(&nops).unwrap();

    let t = Instant::now();
    let want = decode_dir(&real).unwrap();
    let real_time = t.elapsed();
    let t = Instant::now();
    let got = decode_dir(&nops).unwrap();
    let nop_time = t.elapsed();
    eprintln!("real image: {real_time:?}; 16 MB of NOPs: {nop_time:?}");

    // Over NOPs every range runs to the end of its region.
    let ranges: Vec<(u64, u64)> = got
        .iter()
        .filter_map(|t| {
            if let Truth::Range { start, end, .. } = t {
                Some((*start, *end))
            } else {
                None
            }
        })
        .collect();
    assert!(ranges.len() > 50, "{} ranges", ranges.len());
    for (start, end) in &ranges {
        assert!(
            ends.contains(end),
            "range 0x{start:x}-0x{end:x} does not end at a region end {ends:x?}"
        );
    }
    assert!(want.iter().filter(|t| matches!(t, Truth::Range { .. })).count() > ranges.len());
    // Walking each range's 16 MB again would take minutes; once, well
    // under a second. The bound leaves room for a slow, busy machine.
    assert!(
        nop_time < real_time * 50 + Duration::from_secs(10),
        "real image: {real_time:?}; 16 MB of NOPs: {nop_time:?}"
    );
}
