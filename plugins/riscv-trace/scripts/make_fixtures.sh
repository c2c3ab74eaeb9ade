#!/usr/bin/env bash
# Builds the QEMU fixtures of the RISC-V trace tests: each program in
# programs/ is cross-compiled (static, no C library) with Debian's
# gcc-riscv64-linux-gnu, run under qemu-riscv64 (qemu-user) logging every
# executed instruction, and kept as NAME.elf plus NAME.pcs.xz (the executed
# PCs, one hex address a line, xz-compressed).
#
# Usage: make_fixtures.sh [--out DIR] [NAME...]   (default: all programs,
# into fixtures/). Needs gcc-riscv64-linux-gnu, qemu-user and xz-utils.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="$here/fixtures"
if [ "${1:-}" = "--out" ]; then
  out="$2"
  shift 2
fi
mkdir -p "$out"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(sort calls strings)
fi
cc=riscv64-linux-gnu-gcc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for name in "${names[@]}"; do
  # One program is built without the C extension, so both instruction
  # lengths are covered by real code.
  case "$name" in
    strings) arch=(-march=rv64imafd -mabi=lp64d) ;;
    *) arch=(-march=rv64gc -mabi=lp64d) ;;
  esac
  "$cc" "${arch[@]}" -O2 -static -nostdlib -nostartfiles -ffreestanding -fno-pic -fno-stack-protector \
    -Wl,--build-id=none -s -o "$out/$name.elf" "$here/programs/$name.c"
  # QEMU 7.2: -singlestep makes every instruction its own translation
  # block and nochain makes every block execution reach the log.
  status=0
  qemu-riscv64 -singlestep -d exec,nochain -D "$tmp/$name.log" "$out/$name.elf" || status=$?
  # "Trace 0: 0xHOST [0000000000000000/PC/flags/cflags] sym": the PC.
  sed -n 's/^Trace [0-9]*: [^[]*\[[0-9a-f]*\/\([0-9a-f]*\)\/.*/\1/p' "$tmp/$name.log" | sed 's/^0*//' > "$tmp/$name.pcs"
  lines=$(wc -l < "$tmp/$name.pcs")
  if [ "$lines" -lt 100 ]; then
    echo "make_fixtures: $name: only $lines instructions logged" >&2
    exit 1
  fi
  xz -9e -c "$tmp/$name.pcs" > "$out/$name.pcs.xz"
  echo "$name: exit status $status, $lines instructions, $(stat -c %s "$out/$name.elf") byte ELF, $(stat -c %s "$out/$name.pcs.xz") byte log"
done
