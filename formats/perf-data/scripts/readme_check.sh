#!/usr/bin/env bash
# Every trc_perf, create_llvm_prof and create_gcov command of the perf sections of README.md
# and formats/perf-data/README.md run as written, in order, in a folder that holds what they
# name: perf.data (a recording of the AutoFDO fixture program, -gdwarf-4 AArch64, made by
# trc_gen from its execution), the program as ./prog and symbols/prog.
#
#   readme_check.sh TRC_GEN TRC_PERF
#
# Fails (exit 1) when a command exits non-zero or an output it names is missing or empty.
# Needs Debian's autofdo (create_llvm_prof, create_gcov).
set -euo pipefail
gen=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
perf_bin=$(cd "$(dirname "$2")" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
fix=$here/tests/fixtures/autofdo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$gen" --protocol etmv4 --seed 1 --tarmac "$fix/prog.tarmac" --elf "$fix/prog.elf" \
  --elf-path "$work/prog" --perf-data perf.data > /dev/null
mkdir symbols
cp perf.data.elf prog
cp perf.data.elf symbols/prog
export PATH="$perf_bin:$PATH"
n=0
# The commands: lines of ```sh blocks that start with one of the three programs.
while IFS= read -r line; do
  n=$((n + 1))
  if ! bash -c "$line" > "cmd$n.out" 2> "cmd$n.err"; then
    echo "README command failed: $line"
    sed 's/^/    /' "cmd$n.err" | head -10
    exit 1
  fi
  echo "ran: $line"
done < <(awk '/^```sh/ { on = 1; next } /^```/ { on = 0 } on && /^(trc_perf|create_llvm_prof|create_gcov) / { print }' \
  "$root/README.md" "$here/README.md")
for f in prog.afdo.txt prog.prof prog.gcov elements.jsonl inj.data prog.lbr.prof prog.lbr.gcov; do
  [ -s "$f" ] || { echo "README commands: $f missing or empty"; exit 1; }
done
echo "README perf commands: $n ran as written"
