#!/usr/bin/env bash
# Lists every snapshot under DIR that has an expected.ppl with two builds of
# trc_pkt_lister, the host's and an AArch64 one run under qemu-user, and
# fails unless the listings are the same byte for byte. Both run with the
# same argv (argv[0] included: it is in the listing's command line) and
# the snapshot's recorded arguments.
#
#   .ci/cross_listings.sh HOST_LISTER AARCH64_LISTER DIR
set -euo pipefail
host=$(realpath "$1")
arm=$(realpath "$2")
lib=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/host" "$work/aarch64"
n=0
for exp in "$lib"/*/expected.ppl; do
  dir=$(dirname "$exp")
  name=$(basename "$dir")
  # The recorded options, less -ss_dir and -logfilename (given here).
  # shellcheck disable=SC2207
  args=($(sed -n '/^Test Command Line:-$/{n;p;q}' "$exp" |
    awk '{ for (i = 2; i <= NF; i++) { if ($i == "-ss_dir" || $i == "-logfilename") { i++; continue } print $i } }'))
  (cd "$work/host" && exec -a trc_pkt_lister "$host" -ss_dir "$dir" "${args[@]}" -logfilename "$name.ppl" > /dev/null)
  (cd "$work/aarch64" && qemu-aarch64 -L /usr/aarch64-linux-gnu -0 trc_pkt_lister "$arm" \
     -ss_dir "$dir" "${args[@]}" -logfilename "$name.ppl" > /dev/null)
  if ! cmp -s "$work/host/$name.ppl" "$work/aarch64/$name.ppl"; then
    diff "$work/host/$name.ppl" "$work/aarch64/$name.ppl" | head -n 20
    echo "aarch64 listing of $name: DIFFERENT from the host's"
    exit 1
  fi
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "no snapshot with an expected.ppl under $lib"
  exit 1
fi
echo "aarch64 trc_pkt_lister under qemu: $n snapshot listings the same as the host's, byte for byte"
