#!/usr/bin/env bash
# Rebuilds the snapshot library with trc_gen, then records each snapshot's
# expected listing with trc_regress --write. Run from anywhere:
#   bash snapshots/make.sh
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --quiet --bin trc_gen --bin trc_regress --bin trc_pkt_lister
gen=../target/release/trc_gen
rm -rf -- */
"$gen" --protocol etmv4 --seed 2 --length 80 --out etmv4-a64
"$gen" --protocol etmv4 --seed 11 --length 60 --unformatted --out etmv4-a64-unformatted
"$gen" --protocol etmv4 --seed 21 --length 50 --opt all=1 --opt bb=0 --out etmv4-a64-all-options
"$gen" --protocol etmv4m --seed 31 --length 50 --opt all=1 --opt bb=0 --unformatted --out etmv4-m55-t32
"$gen" --protocol ptm --seed 5 --length 60 --opt isa=t32 --opt retstack=1 --opt ts=1 --out ptm-t32-retstack
"$gen" --protocol etmv3 --seed 6 --length 20 --opt cycleacc=1 --opt exceptions=1 --unformatted --out etmv3-cycle-accurate
"$gen" --protocol tc2 --seed 7 --length 10 --out ptm-etmv3-shared-buffer
"$gen" --protocol stm --seed 3 --length 40 --out stm-messages
"$gen" --protocol itm --seed 4 --length 40 --unformatted --out itm-messages
"$gen" --protocol ete --seed 41 --length 60 --opt all=1 --opt bb=0 --opt multi=0 --unformatted --out ete-all-options
"$gen" --protocol ete --seed 42 --length 60 --opt tme=1 --opt ite=1 --opt sessions=2 --unformatted --out ete-multi-session
"$gen" --protocol ete --seed 43 --length 60 --opt rme=1 --opt tsmark=1 --opt wfx=1 --opt multi=0 --out ete-formatted-rme
# Each snapshot's expected listing: the lister's default decode arguments.
for d in */; do
  n=${d%/}
  extra=()
  # Snapshots with several buffers are listed one session after another.
  [ "$(grep -c '^name=' "$n/trace.ini")" -gt 1 ] && extra=(-multi_session)
  (../target/release/trc_pkt_lister -ss_dir "./$n" -decode -no_time_print "${extra[@]}" -logfilename "$n/expected.ppl" > /dev/null)
done
../target/release/trc_regress .
