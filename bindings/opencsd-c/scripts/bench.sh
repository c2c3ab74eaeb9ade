#!/bin/sh
# The C API's cost against the Rust API's on one corpus case, in
# instructions (callgrind: repeatable on a loaded machine). Both decode the
# snapshot's first buffer into an element callback that only counts:
# `ctest/ocsd_c_list -noprint` through the C API (counted inside
# ocsd_dt_process_data) and `examples/rust_api_count.rs` through the Rust
# API (counted inside DecodeTree::trace_data_in). A third run,
# `rust_api_count --c-call`, calls a counting C-ABI function through a
# pointer for each element with no conversion: the share of the gap that
# one call into C per element costs before any element is converted.
#
#   scripts/bench.sh [case]     (default: bugfix-exact-match)
#
# Needs valgrind and a C compiler. CARGO_TARGET_DIR is honoured.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
corpus=${CORPUS:-$root/../shared/corpus/opencsd-1.8.0}
target=${CARGO_TARGET_DIR:-$root/target}
case=${1:-bugfix-exact-match}
work=${BENCH_WORK:-$(mktemp -d)}
[ -n "${BENCH_WORK:-}" ] || trap 'rm -rf "$work"' EXIT

cargo build -q --release -p coresight-opencsd-c --manifest-path "$root/Cargo.toml"
cargo build -q --release -p coresight-opencsd-c --example rust_api_count --manifest-path "$root/Cargo.toml"
mkdir -p "$work/lib"
ln -s "$target/release/libopencsd_c_api.so" "$work/lib/libopencsd_c_api.so.1"
cc -O2 -o "$work/ocsd_c_list" "$here/ctest/ocsd_c_list.c" -L"$work/lib" -l:libopencsd_c_api.so.1
dir=$(grep -P "^$case\t" "$corpus/cases.tsv" | sed 's/.*-ss_dir \([^ ]*\).*/\1/')
(cd "$corpus" && "$target/release/ocsd_snapshot_manifest" "$dir" >"$work/case.man")

total() {
    # The "summary:" line of a callgrind output file: instructions counted.
    sed -n 's/^summary: *//p' "$1"
}
(cd "$corpus" && LD_LIBRARY_PATH="$work/lib" valgrind -q --tool=callgrind --callgrind-out-file="$work/c.out" \
    --collect-atstart=no --toggle-collect=ocsd_dt_process_data "$work/ocsd_c_list" "$work/case.man" -noprint)
(cd "$corpus" && valgrind -q --tool=callgrind --callgrind-out-file="$work/rust.out" \
    --collect-atstart=no --toggle-collect='*DecodeTree*trace_data_in*' \
    "$target/release/examples/rust_api_count" "$dir")
(cd "$corpus" && valgrind -q --tool=callgrind --callgrind-out-file="$work/ccall.out" \
    --collect-atstart=no --toggle-collect='*DecodeTree*trace_data_in*' \
    "$target/release/examples/rust_api_count" "$dir" --c-call)
c=$(total "$work/c.out")
r=$(total "$work/rust.out")
k=$(total "$work/ccall.out")
echo "$case: C API $c instructions, Rust API $r instructions, Rust API with a C call per element $k"
python3 -c "
import sys
c, r, k = (int(a) for a in sys.argv[1:])
print(f'C API / Rust API = {c / r:.3f} ({(c - r) / r * 100:+.1f} %)')
print(f'one C call per element, no conversion: {(k - r) / r * 100:+.1f} %; the C API sink beyond that: {(c - k) / r * 100:+.1f} %')
" "$c" "$r" "$k"
