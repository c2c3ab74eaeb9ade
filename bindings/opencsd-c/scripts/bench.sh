#!/bin/sh
# The C API's cost against the Rust API's on one corpus case, in
# instructions (callgrind: repeatable on a loaded machine). Both decode the
# snapshot's first buffer into an element callback that only counts:
# `ctest/ocsd_c_list -noprint` through the C API (counted inside
# ocsd_dt_process_data) and `examples/rust_api_count.rs` through the Rust
# API (counted inside DecodeTree::trace_data_in).
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
c=$(total "$work/c.out")
r=$(total "$work/rust.out")
echo "$case: C API $c instructions, Rust API $r instructions"
python3 -c "import sys; c, r = int(sys.argv[1]), int(sys.argv[2]); print(f'C API / Rust API = {c / r:.3f} ({(c - r) / r * 100:+.1f} %)')" "$c" "$r"
