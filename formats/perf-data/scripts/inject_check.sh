#!/usr/bin/env bash
# `trc_perf inject` against the real tools (run by .ci/run):
#
# 1. For every recording kind of tools/tests/fixtures/perf_script and several --itrace values,
#    Debian perf's `perf script` prints the same for the file Debian's `perf inject` writes
#    and for the one `trc_perf inject --as-perf-6.1` writes (and for ours with --hw-index):
#    with perf's default fields on timed recordings, and the sample's own fields on all.
# 2. AutoFDO's create_llvm_prof and create_gcov (--profiler=perf) read our file of a real
#    execution with DWARF (tests/fixtures/autofdo) exactly as perf reads it: their outputs
#    equal the ones --profiler=text makes of `perf script -F ip,brstack` on the same file,
#    counted as AutoFDO counts LBR samples (lbr_to_autofdo.py). Debian's AutoFDO cannot read
#    what perf 6.1's own inject writes (the branch stacks' hardware index), which is why ours
#    leaves it out unless --hw-index.
#
#   inject_check.sh TRC_GEN TRC_PERF
#
# Needs Debian's linux-perf, autofdo and python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
gen=$(realpath "${1:?usage: inject_check.sh TRC_GEN TRC_PERF}")
trc_perf=$(realpath "${2:?usage: inject_check.sh TRC_GEN TRC_PERF}")
for t in perf create_llvm_prof create_gcov python3; do
  command -v "$t" > /dev/null || { echo "inject_check.sh: $t not found" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home   # perf's build-id cache stays in here
mkdir -p "$HOME"
fail=0
n=0
while read -r kind args; do
  [ -z "$kind" ] || [ "${kind#\#}" != "$kind" ] && continue
  d=$work/$kind
  mkdir -p "$d/symfs/trc_gen"
  # shellcheck disable=SC2086
  "$gen" $args --seed 5 --length 40 --elf-path /trc_gen/prog --perf-data "$d/perf.data" > /dev/null
  mv "$d/perf.data.elf" "$d/symfs/trc_gen/prog"
  perf buildid-cache -a "$d/symfs/trc_gen/prog" 2> /dev/null
  for itrace in i10il16 i100il64 i1il4 i10ibl8; do
    perf inject -i "$d/perf.data" -o "$d/perf.inj" --itrace="$itrace" 2> /dev/null
    "$trc_perf" inject --as-perf-6.1 "$d/perf.data" --symfs "$d/symfs" --itrace="$itrace" -o "$d/our.inj"
    "$trc_perf" inject --as-perf-6.1 --hw-index "$d/perf.data" --symfs "$d/symfs" --itrace="$itrace" -o "$d/our-hw.inj"
    for f in - ip,period,event,brstack,tid; do
      # Decoding timeless, perf 6.1 writes the samples before the recording's COMM and MMAP
      # records, so its perf script names neither their thread nor their code: ours go after
      # their trace, and only the fields that do not hang on that are compared.
      case $kind in *untimed) [ "$f" = - ] && continue ;; esac
      opts=(); [ "$f" != - ] && opts=(-F "$f")
      perf script -i "$d/perf.inj" "${opts[@]}" > "$d/want.txt" 2> /dev/null
      for ours in our our-hw; do
        perf script -i "$d/$ours.inj" "${opts[@]}" > "$d/got.txt" 2> /dev/null
        n=$((n + 1))
        # ETE raw buffers of several CPUs: perf decodes them with the first CPU's
        # configuration, not yet reproduced for ETE (as in perf_script/known_differences.txt).
        if ! cmp -s "$d/want.txt" "$d/got.txt" && [ "$kind" != ete-raw-2cpu ]; then
          echo "FAIL $kind --itrace=$itrace -F $f ($ours): perf script differs on perf inject's file and ours"
          diff "$d/want.txt" "$d/got.txt" | head -5 || true
          fail=1
        fi
      done
    done
  done
done < "$root/tools/tests/fixtures/perf_script/kinds.txt"
echo "perf script: $n comparisons of perf inject's files and ours"

fix=$root/formats/perf-data/tests/fixtures/autofdo
for kind in "etmv4 1" "ete 2 --unformatted"; do
  set -- $kind
  d=$work/autofdo-$1
  mkdir -p "$d"
  "$gen" --protocol "$1" --seed "$2" "${@:3}" --tarmac "$fix/prog.tarmac" --elf "$fix/prog.elf" --perf-data "$d/prog.data" > /dev/null
  "$trc_perf" inject "$d/prog.data" --symdir "$d" --itrace=i100il64 -o "$d/inj.data"
  # The binary's map: addresses less (start - pgoff) are its offsets.
  base=$("$trc_perf" info "$d/prog.data" | awk '/ pgoff / && /prog.data.elf/ { split($3, r, "-"); print strtonum(r[1]) - strtonum($5); exit }' 2>/dev/null || true)
  [ -n "$base" ] || base=$(python3 -c "import re,sys; m=re.search(r'(0x[0-9a-f]+)-0x[0-9a-f]+ pgoff (0x[0-9a-f]+) \S*prog.data.elf', sys.stdin.read()); print(int(m[1],16)-int(m[2],16))" < <("$trc_perf" info "$d/prog.data"))
  perf script -i "$d/inj.data" -F ip,brstack 2> /dev/null | python3 "$here/lbr_to_autofdo.py" "$base" > "$d/lbr.txt"
  (
    cd "$d"
    create_llvm_prof --profiler=perf --profile=inj.data --binary=prog.data.elf --out=perf.llvm.txt --format=text 2> llvm.log
    create_llvm_prof --profiler=text --profile=lbr.txt --binary=prog.data.elf --out=text.llvm.txt --format=text 2>> llvm.log
    create_gcov --profiler=perf --profile=inj.data --binary=prog.data.elf --gcov=perf.gcov 2> gcov.log
    create_gcov --profiler=text --profile=lbr.txt --binary=prog.data.elf --gcov=text.gcov 2>> gcov.log
  )
  if [ ! -s "$d/perf.llvm.txt" ] || ! cmp -s "$d/perf.llvm.txt" "$d/text.llvm.txt" || ! cmp -s "$d/perf.gcov" "$d/text.gcov"; then
    echo "FAIL autofdo-$1: create_llvm_prof/create_gcov --profiler=perf on our file differ from the LBR samples perf reads"
    cat "$d/llvm.log" "$d/gcov.log" | head -5
    fail=1
  else
    echo "ok autofdo-$1: create_llvm_prof and create_gcov read $(grep -c ^ "$d/lbr.txt") profile lines' worth of samples as perf does ($(grep -c '^[^ ]' "$d/perf.llvm.txt") functions)"
  fi
done
exit $fail
