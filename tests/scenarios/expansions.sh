#!/usr/bin/env bash
# expansions.sh: what every scenario program does, as text: each study's runs (--print-runs, with and without
# --quick, with a calibration profile, with --only) and scenario_instrument's tracing-overhead comparison over
# made-up results (printed lines and overhead.json). Paths are replaced by <bin>, <src> and <work>.
# Usage: expansions.sh BIN_DIR SOURCE_DIR [GOLDEN]  (with GOLDEN: compare with it, exit 1 on a difference)
set -euo pipefail
bin=$(cd "$1" && pwd -P)
src=$(cd "$2" && pwd -P)
golden=${3:+$(cd "$(dirname "$3")" && pwd -P)/$(basename "$3")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
work=$(pwd -P)

# result.json with summary.step_ms_median (and trace_overhead_pct when given) for run $2 of results tree $1.
fake_result() {
  mkdir -p "$1/instrument/$2"
  if [ -n "${4:-}" ]; then
    printf '{"summary": {"step_ms_median": %s, "trace_overhead_pct": %s}}\n' "$3" "$4" >"$1/instrument/$2/result.json"
  else
    printf '{"summary": {"step_ms_median": %s}}\n' "$3" >"$1/instrument/$2/result.json"
  fi
}

expand() {
  for study in baseline ddp sharding instrument; do
    for quick in "" "--quick"; do
      echo "### scenario_$study --print-runs $quick"
      "$bin/scenario_$study" --print-runs $quick --out none
    done
  done
  mkdir -p calibrated/calibration
  echo '{}' >calibrated/calibration/profile.json
  echo "### scenario_ddp --print-runs --quick --only ddp_w4 --out calibrated (a calibration profile exists)"
  "$bin/scenario_ddp" --print-runs --quick --only ddp_w4 --out calibrated
  echo "### scenario_baseline --print-runs --out calibrated"
  "$bin/scenario_baseline" --print-runs --out calibrated

  # Tree a: ddp complete; fsdp_full_shard lacks a trace-off run (as after --only), so it is left out.
  fake_result a ddp_trace_off_a 100.0
  fake_result a ddp_trace_on_a 101.5 0.25
  fake_result a ddp_trace_on_b 102.25 0.5
  fake_result a ddp_trace_off_b 99.0
  fake_result a fsdp_full_shard_trace_off_a 200.0
  fake_result a fsdp_full_shard_trace_on_a 201.0 0.125
  fake_result a fsdp_full_shard_trace_on_b 202.0 0.125
  # Tree b: both complete; one fsdp_full_shard trace-on run has no trace_overhead_pct (nan in the direct figure).
  fake_result b ddp_trace_off_a 50.0
  fake_result b ddp_trace_on_a 50.5 0.75
  fake_result b ddp_trace_on_b 49.75 1.0
  fake_result b ddp_trace_off_b 50.25
  fake_result b fsdp_full_shard_trace_off_a 300.0
  fake_result b fsdp_full_shard_trace_on_a 330.0
  fake_result b fsdp_full_shard_trace_on_b 310.0 1.5
  fake_result b fsdp_full_shard_trace_off_b 305.0
  for tree in a b; do
    echo "### scenario_instrument comparison over results tree $tree"
    "$bin/scenario_instrument" --compare-only --out $tree | grep '^tracing overhead' || true
    echo "### $tree/instrument/overhead.json"
    cat $tree/instrument/overhead.json
  done
}

expand 2>&1 | sed -e "s#$bin#<bin>#g" -e "s#$src#<src>#g" -e "s#$work#<work>#g" >"$work/expansions.txt"
if [ -z "$golden" ]; then
  cat "$work/expansions.txt"
elif ! diff -u "$golden" "$work/expansions.txt"; then
  echo "expansions.sh: the scenario programs' runs differ from $golden (above: - golden, + now)" >&2
  exit 1
fi
