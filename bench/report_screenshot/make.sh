#!/usr/bin/env bash
# A screenshot of kbrl-eval's report.html as a person sees it at 1400 px, checked in beside this
# script (report-1400px.png): the page of the test fixture's generations folder
# (test/data/evalcli/generations: a correct, a wrong, a missing and an unparsable sample), scored
# on the CPU with --backend torch, rendered by Debian's chromium-headless-shell.
#
#   bash bench/report_screenshot/make.sh [BUILD_DIR]     (default build/; about a minute)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/kbrl-eval" --generations "$root/test/data/evalcli/generations" \
  --kernelbench "$root/test/data/problems" --backend torch --trials 2 --perf-trials 3 \
  --output "$out/run" > "$out/eval.log" 2>&1 || { cat "$out/eval.log"; exit 1; }
browser=$(command -v chromium-headless-shell || command -v chromium || true)
[ -n "$browser" ] || browser=/usr/lib/chromium/chromium-headless-shell
# The samples table is folded in the page; the screenshot opens it so its columns show too.
sed 's|<details><summary>\([0-9]* evaluated candidates\)|<details open><summary>\1|' \
  "$out/run/report.html" > "$out/report-open.html"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,3000 \
  --screenshot="$root/bench/report_screenshot/report-1400px.png" "file://$out/report-open.html" \
  > "$out/browser.log" 2>&1 || { cat "$out/browser.log"; exit 1; }
echo "wrote bench/report_screenshot/report-1400px.png"
