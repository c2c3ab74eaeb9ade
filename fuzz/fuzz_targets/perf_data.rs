//! See csd_fuzz::run_perf_data.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_perf_data(data));
