#!/bin/sh
# tarmac profile, calltree and flamegraph against Arm's tarmac-trace-utilities
# on a generated trace of about 200 MB: GNU time's wall, user and system
# time and peak RSS of each, and the outputs compared byte for byte.
#   compare.sh TARMAC UPSTREAM_BUILD_DIR [BYTES]
# TARMAC: our tarmac binary (cargo build --release --bin tarmac);
# UPSTREAM_BUILD_DIR: where upstream's cmake build put tarmac-profile etc.
set -eu
ours=$1 up=$2 size=${3:-200000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$(dirname "$0")/gen_chains.py" "$size" "$dir/t.tarmac"
ls -l "$dir/t.tarmac"
fmt="%e s wall, %U s user, %S s sys, %M KiB"
for c in profile calltree flamegraph; do
  /usr/bin/time -f "ours $c: $fmt" "$ours" "$c" "$dir/t.tarmac" > "$dir/ours.$c"
  /usr/bin/time -f "upstream $c: $fmt" "$up/tarmac-$c" "$dir/t.tarmac" > "$dir/up.$c"
  cmp "$dir/ours.$c" "$dir/up.$c" && echo "$c: the same output"
done
/usr/bin/time -f "ours profile, building --index: $fmt" "$ours" profile --index="$dir/t.tidx" "$dir/t.tarmac" > /dev/null
for c in profile calltree flamegraph; do
  /usr/bin/time -f "ours $c, --index reused: $fmt" "$ours" "$c" --index="$dir/t.tidx" "$dir/t.tarmac" > /dev/null
done
