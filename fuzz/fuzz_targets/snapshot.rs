//! The snapshot loader from ini text (see csd_fuzz::run_snapshot).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_snapshot(data));
