#!/usr/bin/env bash
# Rewrites snapshots/qemu-calls (the shipped example snapshot: the `calls`
# QEMU fixture traced with every emit option) and its expected listing.
set -euo pipefail
cd "$(dirname "$0")/../../.."
RISCV_TRACE_BLESS=1 cargo test --release -q -p riscv-trace --test snapshot the_shipped_example_snapshot_is_current
