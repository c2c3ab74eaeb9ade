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
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
SNAP=${SNAPSHOT:-$ROOT/snapshots/ptm-t32-retstack}
fail() { echo "browser_check: FAIL: $*" >&2; exit 1; }

command -v chromium >/dev/null || fail "chromium not installed (apt-get install -y chromium)"
cargo build -q -p coresight-tools --bin trc_viz
VIZ=${CARGO_TARGET_DIR:-$ROOT/target}/debug/trc_viz

"$VIZ" report "$SNAP" -o "$OUT/report.html"
"$VIZ" flamegraph "$SNAP" -o "$OUT/flame.svg"
"$VIZ" timeline --format speedscope "$SNAP" -o "$OUT/profile.speedscope.json"
"$VIZ" timeline --format chrome "$SNAP" -o "$OUT/profile.trace.json"
# The hottest function: the first row of the report's table.
HOT=$(python3 - "$OUT/report.html" <<'PY'
import re, sys, html
t = open(sys.argv[1]).read()
m = re.search(r'<table id="hottest">.*?<tr><td>(.*?)</td>', t, re.S)
print(html.unescape(m.group(1)) if m else "")
PY
)
[ -n "$HOT" ] || fail "no hottest function in the report"
echo "browser_check: hottest function: $HOT"

PROFILE_DIR=$(mktemp -d)
chrome() {
    # No network: the pages must need none (a proxy that goes nowhere).
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --disable-dev-shm-usage \
        --user-data-dir="$PROFILE_DIR" --virtual-time-budget=5000 "$@" 2>/dev/null
}

# 1. The report: screenshot and DOM.
chrome --proxy-server=127.0.0.1:9 --window-size=1280,1600 --screenshot="$OUT/report.png" "file://$OUT/report.html" >/dev/null
[ -s "$OUT/report.png" ] || fail "no screenshot of the report"
chrome --proxy-server=127.0.0.1:9 --dump-dom "file://$OUT/report.html" > "$OUT/report.dom.html"
tr -d '\n' < "$OUT/report.dom.html" | grep -q '<div id="flame"> *<svg' || fail "report: the flame graph's SVG is not in the page"
SPANS=$(grep -o 'data-spans="[0-9]*"' "$OUT/report.dom.html" | grep -o '[0-9]*' || true)
[ "${SPANS:-0}" -gt 0 ] || fail "report: the timeline drew nothing (its script did not run?)"
RECTS=$(grep -o '<rect' "$OUT/report.dom.html" | wc -l)
grep -qF "$HOT" "$OUT/report.dom.html" || fail "report: the hottest function $HOT is not on the page"
echo "browser_check: report OK: flame graph SVG present, timeline drew $SPANS spans ($RECTS rects in the page), '$HOT' shown; screenshot $OUT/report.png"

# 2. The SVG flame graph alone.
chrome --proxy-server=127.0.0.1:9 --window-size=1200,800 --screenshot="$OUT/flame.png" "file://$OUT/flame.svg" >/dev/null
[ -s "$OUT/flame.png" ] || fail "no screenshot of the flame graph"
chrome --proxy-server=127.0.0.1:9 --dump-dom "file://$OUT/flame.svg" > "$OUT/flame.dom.html"
grep -q '<svg' "$OUT/flame.dom.html" || fail "flame graph: no SVG in the page"
grep -qF "$HOT" "$OUT/flame.dom.html" || fail "flame graph: $HOT not drawn"
echo "browser_check: flame graph OK: '$HOT' drawn; screenshot $OUT/flame.png"

# 3. speedscope's web app with our files.
if ! command -v npm >/dev/null; then
    [ "${REQUIRE_SPEEDSCOPE:-0}" = 1 ] && fail "npm not installed"
    echo "browser_check: npm not installed: speedscope check skipped"
    exit 0
fi
SS=$(mktemp -d)
(cd "$SS" && npm install --silent --no-audit --no-fund speedscope >/dev/null 2>&1) || fail "npm install speedscope failed"
APP="$SS/node_modules/speedscope/dist/release"
[ -f "$APP/index.html" ] || fail "speedscope ships no web app at $APP"
cp "$OUT/profile.speedscope.json" "$OUT/profile.trace.json" "$APP/"
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
    chrome --virtual-time-budget=15000 --dump-dom "$URL" > "$OUT/$f.dom.html"
    chrome --virtual-time-budget=15000 --window-size=1280,800 --screenshot="$OUT/$f.png" "$URL" >/dev/null
    if grep -qiE 'Something went wrong|unrecognized format|Failed to load' "$OUT/$f.dom.html"; then
        fail "speedscope could not import $f"
    fi
    grep -qF "$HOT" "$OUT/$f.dom.html" || fail "speedscope: $HOT not shown for $f"
    echo "browser_check: speedscope OK with $f: '$HOT' in its sandwich view; screenshot $OUT/$f.png"
done
echo "browser_check: all checks passed; screenshots in $OUT"
