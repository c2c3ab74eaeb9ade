#!/usr/bin/env bash
# Debian's AutoFDO tools on trc_perf's AutoFDO text for a real program.
#
#   autofdo_check.sh TRC_GEN TRC_PERF [OUT_DIR]
#
# The program is formats/perf-data/tests/fixtures/autofdo (prog.c built with -gdwarf-4 for
# AArch64, prog.elf, and its execution under qemu-user, prog.tarmac). For each of an ETMv4
# formatted and an ETE unformatted recording it runs
#
#   trc_gen --protocol P --seed N --tarmac prog.tarmac --elf prog.elf --perf-data D/prog.data
#   trc_perf autofdo -i D/prog.data --symdir D -o D/prof.txt
#   create_llvm_prof --profiler=text --profile=prof.txt --binary=prog.data.elf \
#       --out=prof.llvm.txt --format=text
#   create_gcov --profiler=text --profile=prof.txt --binary=prog.data.elf --gcov=prog.gcov
#   dump_gcov prog.gcov
#
# and fails (exit 1) when a tool fails or the per-function totals and head counts it
# reports differ from fixtures/autofdo/expected.txt: the numbers the generator's truth gives
# under AutoFDO's counting (derived, and checked against the truth, by
# tests/autofdo_tools.rs, whose doc gives the rule). Exit 2: bad usage.
#
# The tools' logs go to LOG files beside the outputs (--logtostderr: glog writes no files to
# /tmp); they warn that the binary has no compilation info (-frecord-compilation-info-in-elf,
# a Google GCC branch option), which does not matter here.
#
# Needs Debian's autofdo (apt-get install autofdo).
set -u

if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 TRC_GEN TRC_PERF [OUT_DIR]   (the trc_gen and trc_perf binaries)" >&2
    exit 2
fi
TRC_GEN=$1
TRC_PERF=$2
FIX="$(cd "$(dirname "$0")/../tests/fixtures/autofdo" && pwd)"
for t in create_llvm_prof create_gcov dump_gcov; do
    if ! command -v "$t" >/dev/null 2>&1; then
        echo "$0: $t not found: apt-get install autofdo" >&2
        exit 1
    fi
done
if [ $# -ge 3 ]; then
    OUT=$3
    mkdir -p "$OUT" || exit 1
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/autofdo_check.XXXXXX") || exit 1
fi
OUT=$(cd "$OUT" && pwd)
want=$(grep -v '^#' "$FIX/expected.txt" | sort)

# step OUT LOG COMMAND...: runs COMMAND in the current folder, standard output in OUT and
# standard error in LOG; says what failed.
step() {
    local out=$1 log=$2
    shift 2
    if ! "$@" >"$out" 2>"$log"; then
        echo "FAIL $name: $* exited non-zero:"
        sed 's/^/    /' "$log" | head -10
        return 1
    fi
}

failed=0
echo "output in $OUT"
for kind in "etmv4 1 fmt" "ete 2 raw"; do
    set -- $kind
    name="$1-$3"
    dir="$OUT/$name"
    mkdir -p "$dir"
    args=(--protocol "$1" --seed "$2" --tarmac "$FIX/prog.tarmac" --elf "$FIX/prog.elf"
          --perf-data "$dir/prog.data")
    [ "$3" = raw ] && args+=(--unformatted)
    (
        cd "$dir" &&
        step gen.txt gen.log "$TRC_GEN" "${args[@]}" &&
        step /dev/null autofdo.log "$TRC_PERF" autofdo -i prog.data --symdir . -o prof.txt &&
        step /dev/null llvm.log create_llvm_prof --logtostderr --profiler=text --profile=prof.txt --binary=prog.data.elf \
            --out=prof.llvm.txt --format=text &&
        step /dev/null gcov.log create_gcov --logtostderr --profiler=text --profile=prof.txt --binary=prog.data.elf \
            --gcov=prog.gcov &&
        step prog.gcov.txt dump.log dump_gcov --logtostderr prog.gcov
    ) || { failed=1; continue; }
    # function llvm_total llvm_head gcov_total gcov_head, as expected.txt has them.
    got=$(
        {
            awk '!/^ / && NF { n = split($0, f, ":"); print f[1], "llvm", f[n-1], f[n] }' "$dir/prof.llvm.txt"
            awk '!/^ / && / total:/ && / head:/ { sub("total:", "", $2); sub("head:", "", $3); print $1, "gcov", $2, $3 }' \
                "$dir/prog.gcov.txt"
        } | awk '{ if ($2 == "llvm") { lt[$1] = $3; lh[$1] = $4 } else { gt[$1] = $3; gh[$1] = $4 }; seen[$1] = 1 }
                 END { for (f in seen) print f, lt[f] + 0, lh[f] + 0, gt[f] + 0, gh[f] + 0 }' | sort
    )
    printf '%s\n' "$got" >"$dir/totals.txt"
    if [ "$got" != "$want" ]; then
        echo "FAIL $name: per-function totals (function llvm_total llvm_head gcov_total gcov_head) differ from expected.txt:"
        diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | sed 's/^/    /'
        failed=1
    else
        echo "ok $name: create_llvm_prof and create_gcov accept the profile; $(printf '%s\n' "$got" | wc -l) functions' totals as the truth says"
    fi
done
if [ $failed -ne 0 ]; then
    echo "the AutoFDO tools disagree with the truth or failed: see above and $OUT" >&2
    exit 1
fi
echo "the AutoFDO tools agree with the truth"
