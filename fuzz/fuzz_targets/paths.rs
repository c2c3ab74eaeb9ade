//! One element stream on every in-process decode path, on arbitrary bytes
//! (see csd_fuzz::run_paths).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_paths(data));
