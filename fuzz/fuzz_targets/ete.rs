//! ETE packet processor and decoder from raw bytes (see csd_fuzz::run_protocol).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_protocol(csd_fuzz::Protocol::Ete, data));
