//! Gives the shared library the soname programs built against Debian's
//! `libopencsd-dev` ask the dynamic loader for.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libopencsd_c_api.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
