//! The frame deformatter on its own (see csd_fuzz::run_deformatter).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_deformatter(data));
