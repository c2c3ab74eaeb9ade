#!/bin/sh
# Checks of the drop-in C library that need programs from outside the
# project. Installs nothing: the caller installs Debian's linux-perf,
# libopencsd-dev, libopencsd-bin (for its libopencsd1), valgrind, a C
# compiler, python3 and xz first. Exits non-zero on any mismatch.
#
#   scripts/check.sh [layout|perf|ctest|pkts|valgrind|header|all]   (default: all)
#
# `header` builds the 1.8.x library (--features opencsd-1-8, in
# $CARGO_TARGET_DIR/opencsd-1-8) and compiles the C programs against the
# crate's own header (include/, 1.8.x variant, with the flags of
# pkgconfig/1.8); with OPENCSD_18_INCLUDE (a folder holding upstream
# 1.8.0's opencsd/) it also compiles them against upstream's headers and
# checks both give the same lines. `ctest` also compiles the C program
# against the crate's 1.3.x variant (pkgconfig/1.3's flags) and checks it
# prints what the one built on Debian's headers prints. Needs pkg-config.
#
# CARGO_TARGET_DIR is honoured (default: the workspace's target/). The perf
# comparison runs on the simpleperf recordings, on perf.data files the
# built trc_gen writes (ETMv4 and ETE, formatted and unformatted, one and
# two CPUs), and on any files in EXTRA_PERF_DATA.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
corpus=${CORPUS:-$root/../shared/corpus/opencsd-1.8.0}
perfdata=${PERF_DATA_DIR:-$root/../shared/corpus/simpleperf}
target=${CARGO_TARGET_DIR:-$root/target}
what=${1:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

cargo build -q --release -p coresight-opencsd-c --manifest-path "$root/Cargo.toml"
lib="$work/lib"
mkdir -p "$lib"
ln -s "$target/release/libopencsd_c_api.so" "$lib/libopencsd_c_api.so.1"
manifest="$target/release/ocsd_snapshot_manifest"

if [ "$what" = all ] || [ "$what" = layout ]; then
    echo "== struct layouts against /usr/include/opencsd"
    cargo test -q -p coresight-opencsd-c --manifest-path "$root/Cargo.toml" --test layout -- --ignored \
        || fail=1
fi

if [ "$what" = all ] || [ "$what" = perf ]; then
    echo "== perf with Debian's libopencsd1 and with this library"
    LD_LIBRARY_PATH="$lib" ldd /usr/bin/perf | grep libopencsd_c_api
    LD_LIBRARY_PATH="$lib" ldd /usr/bin/perf | grep -q "$lib/libopencsd_c_api.so.1" || { echo "FAIL: not loaded"; fail=1; }
    # The loader binds perf's OpenCSD calls to this library's symbols.
    LD_DEBUG=bindings LD_LIBRARY_PATH="$lib" perf report -D -i "$perfdata/perf_etm.data" 2>&1 >/dev/null \
        | grep "symbol \`ocsd_dt_process_data'" | head -1
    symfs="$work/symfs"
    mkdir -p "$symfs/data/local/tmp"
    cp "$perfdata/etm_test_loop" "$symfs/data/local/tmp/"
    # Recordings trc_gen makes: each with its ELF beside it (FILE.elf),
    # where the recording says the program was.
    cargo build -q --release -p coresight-tools --bin trc_gen --manifest-path "$root/Cargo.toml"
    gen="$work/gen"
    mkdir -p "$gen"
    generated=""
    for spec in "etmv4 1" "ete 2" "etmv4 3 --cpus 2" "ete 4 --unformatted" "etmv4 5 --unformatted"; do
        # shellcheck disable=SC2086
        set -- $spec
        f="$gen/$1-$2$(echo "${3:-}${4:-}" | tr -d ' -').data"
        p=$1 n=$2
        shift 2
        "$target/release/trc_gen" --protocol "$p" --seed "$n" --perf-data "$f" "$@" >/dev/null
        generated="$generated $f"
    done
    for f in "$perfdata"/*.data $generated ${EXTRA_PERF_DATA:-}; do
        for args in "report -D" "script" "script --symfs $symfs" "script --symfs $symfs -F cpu,tid,ip,addr,sym,symoff,flags" \
                    "script --symfs $symfs --itrace=i10" "report --stdio --symfs $symfs"; do
            # shellcheck disable=SC2086
            perf $args -i "$f" >"$work/debian.txt" 2>&1 || true
            # shellcheck disable=SC2086
            LD_LIBRARY_PATH="$lib" perf $args -i "$f" >"$work/ours.txt" 2>&1 || true
            if cmp -s "$work/debian.txt" "$work/ours.txt"; then
                echo "same ($(wc -l <"$work/ours.txt") lines): perf $args -i $(basename "$f")"
            else
                echo "DIFFERENT: perf $args -i $f"
                diff "$work/debian.txt" "$work/ours.txt" | head -5
                fail=1
            fi
        done
    done
fi

if [ "$what" = all ] || [ "$what" = ctest ] || [ "$what" = pkts ] || [ "$what" = valgrind ] || [ "$what" = header ]; then
    cat >"$work/cmp.py" <<'PY'
import lzma, re, sys
exp_path, got_path = sys.argv[1], sys.argv[2]
v18 = len(sys.argv) > 3 and sys.argv[3] == '1.8'
# Optional: a trace ID whose lines are left out of the expected listing
# (its decoder was removed), or "packets" to compare packet lines only.
only = sys.argv[4] if len(sys.argv) > 4 else ''
def to13(l):
    if v18:
        return l
    # OpenCSD 1.3.3's wording of the four descriptions that differ from 1.8.0's.
    l = l.replace('I_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS1.',
                  'I_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS0.')
    l = re.sub(r'(OCSD_GEN_TRC_ELEM_ADDR_NACC\( 0x[0-9a-f]+); Memspace \[[^\]]*\] \)', r'\1 )', l)
    if 'I_TRACE_INFO' in l:
        l = l.replace('; Decoder Sync point TINFO', '')
    if 'I_CCNT_F' in l:
        l = re.sub(r'; Commit\(\d+\)$', '', l)
    return l
exp = [to13(l.rstrip('\n')) for l in lzma.open(exp_path, 'rt', errors='replace') if l.startswith('Idx:')]
got = [l.rstrip('\n') for l in open(got_path, errors='replace') if l.startswith('Idx:')]
if only == 'packets':
    exp = [l for l in exp if '\t' in l]
    got = [l for l in got if '\t' in l]
elif only:
    exp = [l for l in exp if f'; ID:{only};' not in l]
if exp == got:
    print(f"same {len(got)} lines")
    sys.exit(0)
for i, (a, b) in enumerate(zip(exp, got)):
    if a != b:
        print(f"first difference at line {i + 1}:\n  expected: {a}\n  got:      {b}")
        break
print(f"DIFFERENT: expected {len(exp)} lines, got {len(got)}")
sys.exit(1)
PY
    cc -O2 -Wall -Wextra -o "$work/ocsd_c_list" "$here/ctest/ocsd_c_list.c" -L"$lib" -l:libopencsd_c_api.so.1
    # The compiler flags pkg-config gives for the crate's header, installed
    # in place (includedir = include/) for the ABI $1.
    pcflags() {
        PKG_CONFIG_PATH="$here/pkgconfig/$1" pkg-config --define-variable=includedir="$here/include" \
            --cflags opencsd_c_api
    }
fi

if [ "$what" = all ] || [ "$what" = ctest ]; then
    echo "== C program against libopencsd-dev's headers, on the corpus"
    for c in ${CTEST_CASES:-juno_r1_1 juno-uname-001 bugfix-exact-match a57_single_step armv8_1m_branches 001-ack_test ete_ip TC2 Snowball tc2-ptm-rstk-t32 stm_only stm_only-2 stm-issue-27 itm_only_raw}; do
        dir=$(grep -P "^$c\t" "$corpus/cases.tsv" | sed 's/.*-ss_dir \([^ ]*\).*/\1/')
        (cd "$corpus" && "$manifest" "$dir" >"$work/$c.man" &&
            LD_LIBRARY_PATH="$lib" "$work/ocsd_c_list" "$work/$c.man" >"$work/$c.out")
        if r=$(python3 "$work/cmp.py" "$corpus/expected/$c.ppl.xz" "$work/$c.out"); then
            echo "$c: $r"
        else
            echo "$c: $r"
            fail=1
        fi
    done

    echo "== the C program against the crate's header, 1.3.x variant (pkgconfig/1.3)"
    # shellcheck disable=SC2046
    cc -O2 -Wall -Wextra -Werror $(pcflags 1.3) -o "$work/ocsd_c_list13" "$here/ctest/ocsd_c_list.c" \
        -L"$lib" -l:libopencsd_c_api.so.1
    for c in ${CTEST_CASES:-juno_r1_1 juno-uname-001 bugfix-exact-match a57_single_step armv8_1m_branches 001-ack_test ete_ip TC2 Snowball tc2-ptm-rstk-t32 stm_only stm_only-2 stm-issue-27 itm_only_raw}; do
        (cd "$corpus" && LD_LIBRARY_PATH="$lib" "$work/ocsd_c_list13" "$work/$c.man" >"$work/$c.out13")
        if cmp -s "$work/$c.out" "$work/$c.out13"; then
            echo "$c (crate header, 1.3.x): same $(grep -c '^Idx:' "$work/$c.out13") lines as with Debian's headers"
        else
            echo "$c (crate header, 1.3.x): DIFFERENT from the output with Debian's headers"
            fail=1
        fi
    done
fi

if [ "$what" = all ] || [ "$what" = ctest ]; then
    echo "== ocsd_dt_remove_decoder and ocsd_dt_remove_mem_acc from C"
    for c in juno_r1_1 TC2; do
        dir=$(grep -P "^$c\t" "$corpus/cases.tsv" | sed 's/.*-ss_dir \([^ ]*\).*/\1/')
        (cd "$corpus" && "$manifest" "$dir" >"$work/$c.man" &&
            LD_LIBRARY_PATH="$lib" "$work/ocsd_c_list" "$work/$c.man" -rmdcd >"$work/$c.rmdcd" &&
            LD_LIBRARY_PATH="$lib" "$work/ocsd_c_list" "$work/$c.man" -rmmem >"$work/$c.rmmem")
        # The first decoder removed: its lines go, the others' are as listed.
        id=$(sed -n 's/^# remove decoder 0x\([0-9a-f]*\): 0$/\1/p' "$work/$c.rmdcd")
        codes=$(grep '^#' "$work/$c.rmdcd" | sed 's/.*: //' | tr '\n' ' ')
        if [ -n "$id" ] && [ "$codes" = "0 0 4 " ] &&
                r=$(python3 "$work/cmp.py" "$corpus/expected/$c.ppl.xz" "$work/$c.rmdcd" 1.3 "$id"); then
            echo "$c without decoder 0x$id: $r (remove: OK, again: OK, 0x80: OCSD_ERR_INVALID_ID)"
        else
            echo "$c remove decoder: FAILED (codes $codes) $r"
            fail=1
        fi
        # Every image removed: the first address inside the one file image
        # removes it, later ones find nothing (OCSD_ERR_INVALID_PARAM_VAL);
        # nothing is mapped, no instruction range is decoded, and the
        # packets are all still there.
        codes=$(grep '^#' "$work/$c.rmmem" | sed 's/.*: //' | sort | uniq -c | tr -s ' \n' ' ')
        ranges=$(grep -c 'INSTR_RANGE' "$work/$c.rmmem" || true)
        nacc=$(grep -c 'ADDR_NACC' "$work/$c.rmmem" || true)
        mapped=$(sed -n '/Mapped Memory Accessors/,/=====/p' "$work/$c.rmmem" | wc -l)
        if r=$(python3 "$work/cmp.py" "$corpus/expected/$c.ppl.xz" "$work/$c.rmmem" 1.3 packets) &&
                [ "$ranges" = 0 ] && [ "$nacc" -gt 0 ] && [ "$mapped" = 2 ] && echo "$codes" | grep -q '^ 1 0 [0-9]* 6 $'; then
            echo "$c without memory: packets $r, $nacc ADDR_NACC, no INSTR_RANGE (codes:$codes)"
        else
            echo "$c remove memory: FAILED ($r; $ranges ranges, $nacc nacc, $mapped mapped lines, codes:$codes)"
            fail=1
        fi
    done

    echo "== calls OpenCSD once answered differently (ctest/api_diffs.c): Debian's library and this one"
    cc -O2 -Wall -Wextra -o "$work/api_diffs" "$here/ctest/api_diffs.c" -l:libopencsd_c_api.so.1
    ss="$root/snapshots/etmv4-a64"
    # Lines where this library keeps its own answer: a decoder after one
    # refused for its flags (OpenCSD keeps the ID taken: 10), a null ID
    # pointer (OpenCSD crashes), a memory callback giving more than asked
    # (1.3.3 stops decoding), error names 1.3.3's string table has out of
    # step with its codes.
    keep='^  again with FULL_DECODER|^  create: 6$|^  crashed|^  (33|34|42|43|44|45|46): |^  elements (5|115)$|^  last error (0|26): '
    for c in "" stderr stdio; do
        # shellcheck disable=SC2086
        "$work/api_diffs" "$ss" $c >"$work/diffs.deb" 2>&1 || true
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH="$lib" "$work/api_diffs" "$ss" $c >"$work/diffs.ours" 2>&1 || true
        grep -Ev "$keep" "$work/diffs.deb" >"$work/diffs.deb.k" || true
        grep -Ev "$keep" "$work/diffs.ours" >"$work/diffs.ours.k" || true
        if diff "$work/diffs.deb.k" "$work/diffs.ours.k" >"$work/diffs.diff"; then
            echo "api_diffs ${c:-all cases}: same $(wc -l <"$work/diffs.ours") lines (but the kept differences)"
        else
            echo "api_diffs ${c:-all cases}: DIFFERENT"
            head -20 "$work/diffs.diff"
            fail=1
        fi
    done

    echo "== a custom decoder registered from C (ctest/custom_echo.c)"
    cc -O2 -Wall -Wextra -o "$work/custom_echo" "$here/ctest/custom_echo.c" -L"$lib" -l:libopencsd_c_api.so.1
    if LD_LIBRARY_PATH="$lib" valgrind -q --leak-check=full --errors-for-leak-kinds=all --error-exitcode=3 \
            "$work/custom_echo" >"$work/custom_echo.out"; then
        tail -1 "$work/custom_echo.out"
    else
        echo "custom_echo: FAILED"
        fail=1
    fi
fi

if [ "$what" = all ] || [ "$what" = pkts ]; then
    echo "== C program's packet callback (ocsd_pkt_str) against trc_pkt_lister's packet lines"
    cargo build -q --release -p coresight-tools --bin trc_pkt_lister --manifest-path "$root/Cargo.toml"
    for c in ${CTEST_CASES:-juno_r1_1 juno-uname-001 bugfix-exact-match a57_single_step armv8_1m_branches 001-ack_test ete_ip TC2 Snowball tc2-ptm-rstk-t32 stm_only stm_only-2 stm-issue-27}; do
        args=$(grep -P "^$c\t" "$corpus/cases.tsv" | cut -f2 | sed 's/-decode//')
        dir=$(echo "$args" | sed 's/.*-ss_dir \([^ ]*\).*/\1/')
        # shellcheck disable=SC2086
        (cd "$corpus" && "$manifest" "$dir" >"$work/$c.man" &&
            LD_LIBRARY_PATH="$lib" "$work/ocsd_c_list" "$work/$c.man" -pkts >"$work/$c.pkts" 2>/dev/null &&
            "$target/release/trc_pkt_lister" $args 2>/dev/null | xz >"$work/$c.exp.xz")
        if r=$(python3 "$work/cmp.py" "$work/$c.exp.xz" "$work/$c.pkts"); then
            echo "$c packets: $r"
        else
            echo "$c packets: $r"
            fail=1
        fi
    done
fi

if [ "$what" = all ] || [ "$what" = valgrind ]; then
    echo "== valgrind on the C program"
    (cd "$corpus" && "$manifest" ./snapshots/juno_r1_1 >"$work/vg.man")
    if (cd "$corpus" && LD_LIBRARY_PATH="$lib" valgrind -q --leak-check=full --show-leak-kinds=all \
            --errors-for-leak-kinds=all --error-exitcode=3 "$work/ocsd_c_list" "$work/vg.man" >/dev/null); then
        echo "valgrind: no leak, no error"
    else
        echo "valgrind: FAILED"
        fail=1
    fi
fi

if [ "$what" = all ] || [ "$what" = header ]; then
    echo "== C programs against the crate's header (include/), 1.8.x build"
    t18="$target/opencsd-1-8"
    CARGO_TARGET_DIR="$t18" cargo build -q --release -p coresight-opencsd-c --features opencsd-1-8 \
        --manifest-path "$root/Cargo.toml"
    CARGO_TARGET_DIR="$t18" cargo test -q -p coresight-opencsd-c --features opencsd-1-8 \
        --manifest-path "$root/Cargo.toml" --test header --test layout >"$work/h18.txt" 2>&1 \
        && echo "header and layout tests: passed" || { echo "header/layout tests: FAILED"; cat "$work/h18.txt"; fail=1; }
    lib18="$work/lib18"
    mkdir -p "$lib18"
    ln -s "$t18/release/libopencsd_c_api.so" "$lib18/libopencsd_c_api.so.1"
    # shellcheck disable=SC2046
    cc -O2 -Wall -Wextra -Werror $(pcflags 1.8) -o "$work/ocsd_c_list18" "$here/ctest/ocsd_c_list.c" \
        -L"$lib18" -l:libopencsd_c_api.so.1
    # shellcheck disable=SC2046
    cc -O2 -Wall -Wextra -Werror $(pcflags 1.8) -o "$work/custom_echo18" "$here/ctest/custom_echo.c" \
        -L"$lib18" -l:libopencsd_c_api.so.1
    if [ -n "${OPENCSD_18_INCLUDE:-}" ]; then
        cc -O2 -Wall -Wextra -I "$OPENCSD_18_INCLUDE" -o "$work/ocsd_c_list18u" "$here/ctest/ocsd_c_list.c" \
            -L"$lib18" -l:libopencsd_c_api.so.1
    fi
    for c in ${CTEST_CASES:-juno_r1_1 juno-uname-001 bugfix-exact-match a57_single_step armv8_1m_branches 001-ack_test ete_ip TC2 Snowball tc2-ptm-rstk-t32 stm_only stm_only-2 stm-issue-27 itm_only_raw}; do
        dir=$(grep -P "^$c\t" "$corpus/cases.tsv" | sed 's/.*-ss_dir \([^ ]*\).*/\1/')
        (cd "$corpus" && "$manifest" "$dir" >"$work/$c.man" &&
            LD_LIBRARY_PATH="$lib18" "$work/ocsd_c_list18" "$work/$c.man" >"$work/$c.out18")
        r=$(python3 "$work/cmp.py" "$corpus/expected/$c.ppl.xz" "$work/$c.out18" 1.8) || fail=1
        same=""
        if [ -n "${OPENCSD_18_INCLUDE:-}" ]; then
            (cd "$corpus" && LD_LIBRARY_PATH="$lib18" "$work/ocsd_c_list18u" "$work/$c.man" >"$work/$c.out18u")
            if cmp -s "$work/$c.out18" "$work/$c.out18u"; then
                same="; same output as with upstream 1.8.0's headers"
            else
                same="; DIFFERENT from the output with upstream 1.8.0's headers"
                fail=1
            fi
        fi
        echo "$c (crate header): $r$same"
    done
    if LD_LIBRARY_PATH="$lib18" "$work/custom_echo18" >"$work/custom_echo18.out"; then
        echo "custom_echo (crate header): $(tail -1 "$work/custom_echo18.out")"
    else
        echo "custom_echo (crate header): FAILED"
        fail=1
    fi
fi

exit $fail
