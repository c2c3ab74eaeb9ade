#!/usr/bin/env bash
# Debian's perf as a second opinion on trc_gen's perf.data files.
#
#   perf_script_check.sh TRC_GEN [OUT_DIR]
#
# Makes a perf.data (and its ELF and truth) for each kind trc_gen writes: ETMv4 and ETE,
# formatted (ETR frames) and unformatted (TRBE), one CPU and two, then runs
#
#   perf script -i FILE --itrace=i100 -F comm,tid,cpu,ip,sym,dso
#   perf script -i FILE --itrace=b    -F ip,addr,sym,symoff,dso
#
# on each, writing perf's output beside the file (NAME.insn.txt, NAME.branch.txt, and perf's
# stderr in NAME.*.err). perf finds the ELF by the absolute path the recording gives, so no
# --symfs or build-id cache is needed while OUT_DIR stays where it is. It fails (exit 1) when
# perf cannot decode a file: perf exits non-zero, prints no sample, or its first branch is not
# the truth's first range start.
#
# When trc_perf is in the same folder as TRC_GEN, `trc_perf script` runs with the same
# options and its output is diffed with perf's: differences are printed, not failed on (yet).
#
# Needs Debian's linux-perf (apt-get install linux-perf; it decodes cs_etm with libopencsd).
# What perf 6.1 / libopencsd 1.3.3 is known to do with these files:
# - every kind decodes, ETE included; instruction and branch samples are in the ELF's functions;
# - a few of the last branches of a buffer may be missing from perf's output;
# - unformatted (TRBE) buffers are all decoded with the first CPU's trace unit registers and
#   samples all say CPU 0, so another CPU's raw trace decodes right only when its
#   configuration matches the first CPU's (return stack and so on);
# - "unwind: target platform=arm64 is not supported" on stderr is only perf on x86 saying it
#   cannot unwind Arm64 stacks (not used here).
set -u

if [ $# -lt 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 TRC_GEN [OUT_DIR]   (TRC_GEN: the trc_gen binary)" >&2
    exit 2
fi
TRC_GEN=$1
if ! command -v perf >/dev/null 2>&1; then
    echo "$0: perf not found: apt-get install linux-perf" >&2
    exit 1
fi
if [ $# -ge 2 ]; then
    OUT=$2
    mkdir -p "$OUT" || exit 1
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/perf_script_check.XXXXXX") || exit 1
fi
OUT=$(cd "$OUT" && pwd)
TRC_PERF="$(dirname "$TRC_GEN")/trc_perf"
[ -x "$TRC_PERF" ] || TRC_PERF=
# perf keeps a build-id cache under $HOME: a private one, so nothing outside OUT changes.
export HOME="$OUT/home"
mkdir -p "$HOME"

INSN_OPTS=(--itrace=i100 -F comm,tid,cpu,ip,sym,dso)
BRANCH_OPTS=(--itrace=b -F ip,addr,sym,symoff,dso)
failed=0
echo "perf: $(perf version 2>&1); output in $OUT"
for protocol in etmv4 ete; do
    for layout in fmt raw; do
        for cpus in 1 2; do
            name="$protocol-$layout-${cpus}cpu"
            file="$OUT/$name.data"
            args=(--protocol "$protocol" --seed 3 --cpus "$cpus" --perf-data "$file")
            [ "$layout" = raw ] && args+=(--unformatted)
            if ! "$TRC_GEN" "${args[@]}" >"$OUT/$name.gen.txt" 2>&1; then
                echo "FAIL $name: trc_gen: $(cat "$OUT/$name.gen.txt")"
                failed=1
                continue
            fi
            status=ok
            for kind in insn branch; do
                if [ $kind = insn ]; then opts=("${INSN_OPTS[@]}"); else opts=("${BRANCH_OPTS[@]}"); fi
                if ! perf script -i "$file" "${opts[@]}" >"$OUT/$name.$kind.txt" 2>"$OUT/$name.$kind.err"; then
                    echo "FAIL $name: perf script ${opts[*]} exited non-zero:"
                    sed 's/^/    /' "$OUT/$name.$kind.err" | head -5
                    status=FAIL
                elif [ ! -s "$OUT/$name.$kind.txt" ]; then
                    echo "FAIL $name: perf script ${opts[*]} printed no sample:"
                    sed 's/^/    /' "$OUT/$name.$kind.err" | head -5
                    status=FAIL
                fi
                if [ -n "$TRC_PERF" ]; then
                    if "$TRC_PERF" script -i "$file" "${opts[@]}" >"$OUT/$name.$kind.trc_perf.txt" \
                        2>"$OUT/$name.$kind.trc_perf.err"; then
                        if ! diff -u "$OUT/$name.$kind.txt" "$OUT/$name.$kind.trc_perf.txt" \
                            >"$OUT/$name.$kind.diff"; then
                            echo "DIFF $name $kind: perf and trc_perf differ ($(grep -c '^[-+][^-+]' "$OUT/$name.$kind.diff") lines; $OUT/$name.$kind.diff):"
                            head -12 "$OUT/$name.$kind.diff" | sed 's/^/    /'
                        else
                            echo "SAME $name $kind: trc_perf script prints what perf prints"
                        fi
                    else
                        echo "DIFF $name $kind: trc_perf script failed: $(head -3 "$OUT/$name.$kind.trc_perf.err")"
                    fi
                fi
            done
            # The first branch is trace starting at the truth's first range.
            want=$(awk '$1 == "range" { print $2; exit }' "$file.cpu0.truth.txt")
            first=$(perf script -i "$file" --itrace=b -F tid,ip,addr 2>/dev/null |
                awk -v pid=4000 '$1 == pid { print "0x" $4; exit }')
            if [ "$status" = ok ] && [ "$((first))" -ne "$((want))" ]; then
                echo "FAIL $name: perf's first branch goes to $first, the truth starts at $want"
                status=FAIL
            fi
            [ "$status" = FAIL ] && failed=1
            echo "$status $name: $(wc -l <"$OUT/$name.insn.txt") instruction samples, $(wc -l <"$OUT/$name.branch.txt") branch samples, first range $want"
        done
    done
done
if [ $failed -ne 0 ]; then
    echo "perf could not decode some files: see above and $OUT" >&2
    exit 1
fi
echo "perf decoded every file"
