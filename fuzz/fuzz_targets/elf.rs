//! ELF memory images (see csd_fuzz::run_elf).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| csd_fuzz::run_elf(data));
