#!/usr/bin/env bash
# Opens trc_viz's outputs in a real browser, offline, and checks they
# render: the HTML report and the SVG flame graph of a shipped snapshot in
# headless Chromium (screenshots, and the page's DOM after its script ran:
# the flame graph's SVG, the timeline's drawn spans and the hottest
# function's name), then our speedscope and Trace Event Format timelines
# in speedscope's own web app (npm package `speedscope`), served on
# 127.0.0.1, with the function names in its sandwich view and no import
# error.
#
# Needs: chromium (Debian's), python3; npm for the speedscope part
# (skipped with a note when npm is missing, unless REQUIRE_SPEEDSCOPE=1).
# Usage: formats/viz/scripts/browser_check.sh [OUT_DIR]
# The screenshots stay in OUT_DIR (default: a temporary folder).
#
# One line per check, `browser_check: ok: ...` or `browser_check: FAIL:
# ...` (a check whose input a failed step should have made fails too),
# then a summary; exits 1 when any check failed, 0 when all passed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
SNAP=${SNAPSHOT:-$ROOT/snapshots/ptm-t32-retstack}
CHECKS=0
FAILED=0
# check NAME COMMAND...: runs COMMAND; one line saying whether it passed.
check() {
    local name=$1
    shift
    CHECKS=$((CHECKS + 1))
    if "$@" >/dev/null 2>&1; then
        echo "browser_check: ok: $name"
    else
        FAILED=$((FAILED + 1))
        echo "browser_check: FAIL: $name"
    fi
}
finish() {
    echo "browser_check: $CHECKS checks, $FAILED failed; screenshots in $OUT"
    [ "$FAILED" -eq 0 ]
    exit $?
}
has() { grep -qF -- "$1" "$2"; }
nonempty() { [ -s "$1" ]; }

check "chromium installed" command -v chromium
check "trc_viz builds" cargo build -q -p coresight-tools --bin trc_viz
VIZ=${CARGO_TARGET_DIR:-$ROOT/target}/debug/trc_viz

check "trc_viz report" "$VIZ" report "$SNAP" -o "$OUT/report.html"
check "trc_viz flamegraph" "$VIZ" flamegraph "$SNAP" -o "$OUT/flame.svg"
check "trc_viz timeline --format speedscope" "$VIZ" timeline --format speedscope "$SNAP" -o "$OUT/profile.speedscope.json"
check "trc_viz timeline --format chrome" "$VIZ" timeline --format chrome "$SNAP" -o "$OUT/profile.trace.json"
# The hottest function: the first row of the report's table.
HOT=$(python3 - "$OUT/report.html" 2>/dev/null <<'PY'
import re, sys, html
t = open(sys.argv[1]).read()
m = re.search(r'<table id="hottest">.*?<tr><td>(.*?)</td>', t, re.S)
print(html.unescape(m.group(1)) if m else "")
PY
)
# Nothing matches an empty name, so later checks on it fail too.
check "the report names its hottest function (${HOT:-none})" test -n "$HOT"
HOT=${HOT:-"(no hottest function)"}

PROFILE_DIR=$(mktemp -d)
chrome() {
    # No network: the pages must need none (a proxy that goes nowhere).
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --disable-dev-shm-usage \
        --user-data-dir="$PROFILE_DIR" --virtual-time-budget=5000 "$@" 2>/dev/null
}

# 1. The report: screenshot and DOM (after its script ran).
chrome --proxy-server=127.0.0.1:9 --window-size=1280,1600 --screenshot="$OUT/report.png" "file://$OUT/report.html" >/dev/null
check "report: screenshot taken ($OUT/report.png)" nonempty "$OUT/report.png"
chrome --proxy-server=127.0.0.1:9 --dump-dom "file://$OUT/report.html" > "$OUT/report.dom.html"
tr -d '\n' < "$OUT/report.dom.html" > "$OUT/report.dom.flat.html"
check "report: the flame graph's SVG is in the page" grep -q '<div id="flame"> *<svg' "$OUT/report.dom.flat.html"
SPANS=$(grep -o 'data-spans="[0-9]*"' "$OUT/report.dom.html" | grep -o '[0-9]*' | head -1)
check "report: the timeline drew spans (${SPANS:-0})" test "${SPANS:-0}" -gt 0
check "report: '$HOT' is on the page" has "$HOT" "$OUT/report.dom.html"

# 2. The SVG flame graph alone.
chrome --proxy-server=127.0.0.1:9 --window-size=1200,800 --screenshot="$OUT/flame.png" "file://$OUT/flame.svg" >/dev/null
check "flame graph: screenshot taken ($OUT/flame.png)" nonempty "$OUT/flame.png"
chrome --proxy-server=127.0.0.1:9 --dump-dom "file://$OUT/flame.svg" > "$OUT/flame.dom.html"
check "flame graph: an SVG in the page" grep -q '<svg' "$OUT/flame.dom.html"
check "flame graph: '$HOT' drawn" has "$HOT" "$OUT/flame.dom.html"

# 3. speedscope's web app with our files.
if ! command -v npm >/dev/null; then
    if [ "${REQUIRE_SPEEDSCOPE:-0}" = 1 ]; then
        check "npm installed" false
    else
        echo "browser_check: skipped: speedscope (npm not installed)"
    fi
    finish
fi
SS=$(mktemp -d)
check "npm install speedscope" sh -c "cd '$SS' && npm install --silent --no-audit --no-fund speedscope"
APP="$SS/node_modules/speedscope/dist/release"
check "speedscope ships its web app" test -f "$APP/index.html"
cp "$OUT/profile.speedscope.json" "$OUT/profile.trace.json" "$APP/" 2>/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$APP" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/index.html')" 2>/dev/null && break
    sleep 0.1
done
for f in profile.speedscope.json profile.trace.json; do
    URL="http://127.0.0.1:$PORT/index.html#profileURL=http%3A%2F%2F127.0.0.1%3A$PORT%2F$f&view=sandwich"
    # Once in CI the page loaded without an error but the sandwich view was
    # not drawn within the budget (a loaded machine). Try again with longer
    # budgets before calling it a failure; the check below still decides.
    for budget in 15000 30000 60000; do
        chrome --virtual-time-budget=$budget --dump-dom "$URL" > "$OUT/$f.dom.html"
        has "$HOT" "$OUT/$f.dom.html" && break
        echo "browser_check: '$HOT' not yet in $f's sandwich view after a ${budget} ms budget"
    done
    chrome --virtual-time-budget=15000 --window-size=1280,800 --screenshot="$OUT/$f.png" "$URL" >/dev/null
    check "speedscope: $f loaded (a page, no import error)" sh -c \
        "[ -s '$OUT/$f.dom.html' ] && ! grep -qiE 'Something went wrong|unrecognized format|Failed to load' '$OUT/$f.dom.html'"
    check "speedscope: '$HOT' in the sandwich view of $f" has "$HOT" "$OUT/$f.dom.html"
done
finish
