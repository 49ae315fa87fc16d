#!/usr/bin/env bash
# browser_test.sh: the report of every fixture study (real runs, tests/analysis/fixtures/) rendered by dtlab-report
# and opened in headless Chromium by browser_check.py: no console errors, every chart and PNG loads, every table has
# rows, the contents links resolve; a screenshot lands next to the report. Exit 77 (skip) without Chromium.
#   browser_test.sh DTLAB_REPORT FIXTURES_DIR OUT_DIR
set -euo pipefail
report_bin=$1 fixtures=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out" && mkdir -p "$out"
mapfile -t studies < <(find "$fixtures" -name scenario.json -printf '%h\n' | sort)
[[ ${#studies[@]} -gt 0 ]] || { echo "browser_test: no scenario.json under $fixtures" >&2; exit 1; }
"$report_bin" "${studies[@]}" -o "$out/report" > "$out/report.log" 2>&1 ||
  { echo "browser_test: dtlab-report failed:" >&2; tail -20 "$out/report.log" >&2; exit 1; }
python3 "$here/browser_check.py" "$out/report"

# The control: a copy with one PNG and one chart's SVG gone, a table without rows and a script that logs an error must
# fail, naming each.
cp -r "$out/report" "$out/broken"
mapfile -t pngs < <(find "$out/broken" -name '*.png' ! -name screenshot.png | sort)
png=${pngs[0]}
rm "$png"
mapfile -t svgs < <(find "$out/broken" -name '*.svg' | sort)
svg=$(basename "${svgs[-1]}")
rm "${svgs[-1]}"
sed -i 's|</main>|<table><tr><th>empty</th></tr></table><script>console.error("planted error")</script></main>|' \
  "$out/broken/index.html"
if python3 "$here/browser_check.py" "$out/broken" > "$out/broken.log" 2>&1; then
  echo "browser_test: the check passed a broken report" >&2; cat "$out/broken.log" >&2; exit 1
fi
for want in "PNG does not load as an image: file://$png" "chart's SVG does not load as an image: chart-${svg%.svg} $svg" \
  "table without a row of data" "console error: planted error"; do
  grep -qF "$want" "$out/broken.log" || { echo "browser_test: the check missed: $want" >&2; cat "$out/broken.log" >&2; exit 1; }
done
echo "browser_test: the control (a missing PNG, a missing SVG, an empty table, a console error) failed as it must"
