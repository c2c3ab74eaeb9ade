#!/usr/bin/env bash
# Debian's perf as a second opinion on trc_gen's perf.data files, and trc_perf script checked
# against it line for line.
#
#   perf_script_check.sh TRC_GEN [OUT_DIR]
#
# Makes a perf.data (and its ELF and truth) for each kind trc_gen writes: ETMv4 and ETE,
# formatted (ETR frames) and unformatted (TRBE), one CPU and two (with timestamps), and a
# per-thread recording of each protocol (no time), then runs
#
#   perf script -i FILE --itrace=i100 -F comm,tid,cpu,time,ip,sym,dso
#   perf script -i FILE --itrace=b    -F cpu,time,ip,addr,sym,symoff,dso
#
# (without cpu and time for per-thread files: perf refuses them there) and the same
# `trc_perf script` (trc_perf is looked for beside TRC_GEN), writing each output beside the
# file (NAME.insn.txt, NAME.insn.trc_perf.txt, NAME.insn.as-perf.txt; stderr in *.err).
# perf finds the ELF by the absolute path the recording gives, so no --symfs or build-id
# cache is needed while OUT_DIR stays where it is.
#
# It fails (exit 1) when perf cannot decode a file (perf exits non-zero, prints no sample,
# or its first branch is not the truth's first range start), when trc_perf fails, or on any
# difference between perf and trc_perf not explained by perf itself: perf's output must be
# exactly `trc_perf script --as-perf-6.1` (which reproduces perf 6.1's two known bugs, listed
# in formats/perf-data/README.md, "Differences from perf"), and trc_perf's own output differs
# from that only by those bugs. One line per kind says what was compared:
#
#   etmv4-formatted-1cpu: branches 176 same, instructions 9 same
#   etmv4-formatted-1cpu: branches 174 same as perf 6.1 (trc_perf 176: perf drops what the decoder holds at a buffer's end), ...
#
# Needs Debian's linux-perf (apt-get install linux-perf; it decodes cs_etm with libopencsd).
# "unwind: target platform=arm64 is not supported" on perf's stderr is only perf on x86
# saying it cannot unwind Arm64 stacks (not used here).
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
TRC_PERF="$(dirname "$TRC_GEN")/trc_perf"
if [ ! -x "$TRC_PERF" ]; then
    echo "$0: no trc_perf beside $TRC_GEN: build it too (cargo build -p coresight-tools --bin trc_perf)" >&2
    exit 2
fi
if [ $# -ge 2 ]; then
    OUT=$2
    mkdir -p "$OUT" || exit 1
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/perf_script_check.XXXXXX") || exit 1
fi
OUT=$(cd "$OUT" && pwd)
# perf keeps a build-id cache under $HOME: a private one, so nothing outside OUT changes.
export HOME="$OUT/home"
mkdir -p "$HOME"

failed=0
fail() {
    echo "FAIL $*"
    failed=1
}
lines() { wc -l <"$1" | tr -d ' '; }

echo "perf: $(perf version 2>&1); output in $OUT"
kinds=()
for protocol in etmv4 ete; do
    for layout in formatted unformatted; do
        for cpus in 1 2; do
            kinds+=("$protocol-$layout-${cpus}cpu")
        done
    done
    kinds+=("$protocol-formatted-perthread")
done
for name in "${kinds[@]}"; do
    IFS=- read -r protocol layout cpus <<<"$name"
    file="$OUT/$name.data"
    args=(--protocol "$protocol" --seed 3 --perf-data "$file")
    [ "$layout" = unformatted ] && args+=(--unformatted)
    if [ "$cpus" = perthread ]; then
        args+=(--per-thread)
        insn_fields=comm,tid,ip,sym,dso
        branch_fields=ip,addr,sym,symoff,dso
    else
        args+=(--cpus "${cpus%cpu}")
        insn_fields=comm,tid,cpu,time,ip,sym,dso
        branch_fields=cpu,time,ip,addr,sym,symoff,dso
    fi
    if ! "$TRC_GEN" "${args[@]}" >"$OUT/$name.gen.txt" 2>&1; then
        fail "$name: trc_gen: $(cat "$OUT/$name.gen.txt")"
        continue
    fi
    summary=()
    for kind in branch insn; do
        if [ $kind = insn ]; then
            opts=(--itrace=i100 -F "$insn_fields")
            label=instructions
        else
            opts=(--itrace=b -F "$branch_fields")
            label=branches
        fi
        perf_out="$OUT/$name.$kind.txt"
        ours="$OUT/$name.$kind.trc_perf.txt"
        as_perf="$OUT/$name.$kind.as-perf.txt"
        if ! perf script -i "$file" "${opts[@]}" >"$perf_out" 2>"$OUT/$name.$kind.err"; then
            fail "$name: perf script ${opts[*]} exited non-zero:"
            sed 's/^/    /' "$OUT/$name.$kind.err" | head -5
            continue
        elif [ ! -s "$perf_out" ]; then
            fail "$name: perf script ${opts[*]} printed no sample:"
            sed 's/^/    /' "$OUT/$name.$kind.err" | head -5
            continue
        fi
        if ! "$TRC_PERF" script -i "$file" "${opts[@]}" >"$ours" 2>"$ours.err"; then
            fail "$name: trc_perf script ${opts[*]} failed: $(head -3 "$ours.err")"
            continue
        fi
        if ! "$TRC_PERF" script --as-perf-6.1 -i "$file" "${opts[@]}" >"$as_perf" 2>"$as_perf.err"; then
            fail "$name: trc_perf script --as-perf-6.1 ${opts[*]} failed: $(head -3 "$as_perf.err")"
            continue
        fi
        if cmp -s "$perf_out" "$ours"; then
            summary+=("$label $(lines "$perf_out") same")
        elif cmp -s "$perf_out" "$as_perf"; then
            # Only perf's known bugs remain: name them.
            why="perf drops what the decoder holds at a buffer's end"
            if [ "$layout" = unformatted ] && [ "$cpus" != 1cpu ] && [ "$cpus" != perthread ]; then
                why="perf decodes every raw buffer with CPU 0's configuration and labels it CPU 0; and $why"
            fi
            summary+=("$label $(lines "$perf_out") same as perf 6.1 (trc_perf $(lines "$ours"): $why)")
        else
            diff -u "$perf_out" "$as_perf" >"$OUT/$name.$kind.diff"
            fail "$name $label: perf and trc_perf --as-perf-6.1 differ ($(grep -c '^[-+][^-+]' "$OUT/$name.$kind.diff") lines; $OUT/$name.$kind.diff):"
            head -12 "$OUT/$name.$kind.diff" | sed 's/^/    /'
            summary+=("$label DIFFERENT")
        fi
    done
    # The first branch is trace starting at the truth's first range.
    want=$(awk '$1 == "range" { print $2; exit }' "$file.cpu0.truth.txt")
    first=$(perf script -i "$file" --itrace=b -F tid,ip,addr 2>/dev/null |
        awk -v pid=4000 '$1 == pid { print "0x" $4; exit }')
    if [ -z "$first" ] || [ "$((first))" -ne "$((want))" ]; then
        fail "$name: perf's first branch goes to ${first:-nowhere}, the truth starts at $want"
    fi
    (IFS=,; echo "$name: ${summary[*]}" | sed 's/,/, /g')
done
if [ $failed -ne 0 ]; then
    echo "perf_script_check: FAILED: see above and $OUT" >&2
    exit 1
fi
echo "perf_script_check: trc_perf script prints what perf prints on every kind (but for perf's own bugs, named above)"
