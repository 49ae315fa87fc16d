#!/usr/bin/env bash
# only.sh: a study's --only (scenarios/runner.cpp) against a real run of scenario_pipeline --quick. A swept run's own
# name picks its points; the runs it leaves out keep their entries in scenario.json (an earlier invocation's, here
# written by hand); a name that is no run of the study is refused, naming the study's runs; a scenario.json that is
# not a manifest is refused, naming it, and left alone.
#   only.sh BIN_DIR
set -euo pipefail
bin=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/pipeline"
cat > "$out/pipeline/scenario.json" <<'JSON'
{"scenario": "pipeline", "runs": [{"name": "gpipe@m4", "dir": "gpipe@m4", "note": "kept"},
                                  {"name": "zero_bubble_p4@m4", "dir": "zero_bubble_p4@m4", "note": "kept"}]}
JSON
"$bin/scenario_pipeline" --out "$out" --quick --only 1f1b_p4 > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
grep -q '^== pipeline/1f1b_p4@m4$' "$out/log" || { echo "only.sh: --only 1f1b_p4 did not run 1f1b_p4@m4"; cat "$out/log"; exit 1; }
names=$(python3 -c 'import json,sys; print(" ".join(r["name"] for r in json.load(open(sys.argv[1]))["runs"]))' \
  "$out/pipeline/scenario.json")
[ "$names" = "gpipe@m4 1f1b_p4@m4 zero_bubble_p4@m4" ] ||
  { echo "only.sh: scenario.json runs are '$names', want the kept two and the new one in study order"; exit 1; }
[ -f "$out/pipeline/1f1b_p4@m4/result.json" ] || { echo "only.sh: no result.json for 1f1b_p4@m4"; exit 1; }
if "$bin/scenario_pipeline" --out "$out" --quick --only nope > "$out/log" 2>&1; then
  echo "only.sh: --only nope was accepted"; exit 1
fi
grep -q -- '--only nope names no run of the study; its runs: gpipe@m2' "$out/log" ||
  { echo "only.sh: the refusal does not name the study's runs"; cat "$out/log"; exit 1; }
# A scenario.json that is not a study's manifest is refused, naming it, and left as it was.
echo 'not json' > "$out/pipeline/scenario.json"
if "$bin/scenario_pipeline" --out "$out" --quick --only 1f1b_p4 > "$out/log" 2>&1; then
  echo "only.sh: --only over a broken scenario.json was accepted"; exit 1
fi
grep -q "pipeline/scenario.json: not a study's scenario.json" "$out/log" ||
  { echo "only.sh: the refusal does not name the file"; cat "$out/log"; exit 1; }
[ "$(cat "$out/pipeline/scenario.json")" = "not json" ] || { echo "only.sh: the broken scenario.json was changed"; exit 1; }
echo "only.sh: OK"
