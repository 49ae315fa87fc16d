#!/usr/bin/env bash
# install_and_consume.sh: installs the build under test into a fresh prefix (cmake --install) and uses it as an
# outside project would. Checks, in order:
#   - every header of the tree that an exported library's sources include is installed (but *_internal.hpp);
#   - each installed header includes only installed headers, and none includes torch; the control: the same check
#     on a copy of the prefix without lab/config.hpp must name a header that includes it;
#   - the installed programs run (full configuration: dtlab, and it trains from the installed config);
#   - consumer/ configures with find_package(dtlab) against the prefix alone, builds, and checks a run's numbers with
#     the installed cost models. The run: trained by the installed dtlab (full), else a copy of a fixture run.
#   install_and_consume.sh CMAKE BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX FIXTURE_RUN_DIR SOURCE_LISTS_DIR MODE
# SOURCE_LISTS_DIR: one <library>.txt per exported library: its source dir, then its sources, one a line.
# MODE: full | analysis-only (DTLAB_ANALYSIS_ONLY: no dtlab, no scenario programs).
set -euo pipefail
cmake=$1 build=$2 work=$3 consumer=$4 generator=$5 cxx=$6 fixture_run=$7 source_lists=$8 mode=$9
prefix=$work/prefix
rm -rf "$work" && mkdir -p "$work"
fail() { echo "install_and_consume: $*" >&2; exit 1; }
quoted_includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }

"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log" >&2; fail "cmake --install $build failed"; }
echo "installed $(find "$prefix" -type f | wc -l) files under $prefix"

missing=
for list in "$source_lists"/*.txt; do
  mapfile -t lines < "$list"
  for source in "${lines[@]:1}"; do
    [[ $source == /* ]] || source=${lines[0]}/$source
    while IFS= read -r target; do
      [[ $target =~ ^(lab|strategies|analysis)/.*\.hpp$ && $target != *_internal.hpp ]] || continue
      [[ -f $prefix/include/$target ]] || missing+="  $source ($(basename "$list" .txt)) includes \"$target\""$'\n'
    done < <(quoted_includes "$source")
  done
done
[[ -z $missing ]] || fail "not installed (the header list in cmake/DtlabInstall.cmake):"$'\n'"$missing"
echo "✓ every header the $(ls "$source_lists" | wc -l) exported libraries include is installed"

# The installed headers under $1 whose quoted includes are not there, or that include torch: one a line.
header_problems() {
  local include=$1 header target
  while IFS= read -r header; do
    while IFS= read -r target; do
      [[ -f $include/$target ]] || echo "${header#"$include"/} includes \"$target\", not installed"
    done < <(quoted_includes "$header")
    grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<\(torch\|ATen\|c10\)/' "$header" || true
  done < <(find "$include" -type f -name '*.hpp' | sort)
}
problems=$(header_problems "$prefix/include")
[[ -z $problems ]] || fail "the installed headers do not stand alone:"$'\n'"$problems"
echo "✓ $(find "$prefix/include" -type f -name '*.hpp' | wc -l) headers installed; each includes only installed" \
  "headers, none torch"
cp -r "$prefix/include" "$work/include-control" && rm "$work/include-control/lab/config.hpp"
control=$(header_problems "$work/include-control")
grep -q 'includes "lab/config.hpp", not installed' <<< "$control" ||
  fail "the header check passed a prefix without lab/config.hpp"
echo "✓ control: a prefix without lab/config.hpp is flagged"

"$prefix/bin/dtlab-report" --help > /dev/null || fail "$prefix/bin/dtlab-report --help failed"
echo "✓ $prefix/bin/dtlab-report runs"
run=$work/run
if [[ $mode == full ]]; then
  "$prefix/bin/dtlab" version || fail "$prefix/bin/dtlab version failed"
  for program in "$build"/bin/scenario_*; do
    [[ -x $prefix/bin/$(basename "$program") ]] || fail "$(basename "$program") is not installed in $prefix/bin"
  done
  echo "✓ every scenario program installed"
  # An installed scenario program reads its study and configs from the prefix, not from the checkout.
  # (run from a sibling of the prefix, so the printed paths are absolute)
  mkdir -p "$work/elsewhere"
  (cd "$work/elsewhere" && "$prefix/bin/scenario_baseline" --print-runs --out "$work/study") > "$work/print-runs.log" 2>&1 ||
    { cat "$work/print-runs.log" >&2; fail "the installed scenario_baseline --print-runs failed"; }
  grep -qF -- "--config $prefix/share/dtlab/scenarios/configs/" "$work/print-runs.log" ||
    { head -20 "$work/print-runs.log" >&2; fail "the installed scenario_baseline does not read the installed configs"; }
  [[ -f $prefix/share/dtlab/scenarios/studies/baseline.yaml ]] || fail "the study specs are not installed"
  echo "✓ the installed scenario programs read the installed study specs and configs"
  config=$prefix/share/dtlab/scenarios/configs/baseline.yaml
  "$prefix/bin/dtlab" train --config "$config" model.preset=tiny data.source=synthetic train.steps=4 \
    train.warmup_steps=1 train.global_batch=2 train.micro_batch=2 instrument.warmup_steps=1 \
    instrument.log_every=1000 --out "$run" > "$work/train.log" 2>&1 ||
    { tail -20 "$work/train.log" >&2; fail "the installed dtlab could not train from $config"; }
  echo "✓ the installed dtlab trained from the installed config: $run/result.json"
else
  cp -r "$fixture_run" "$run"
fi

"$cmake" -S "$consumer" -B "$work/consumer-build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" 2>&1 ||
  { cat "$work/consumer-configure.log" >&2; fail "the consumer project does not configure against $prefix"; }
grep -F -- "-- dtlab " "$work/consumer-configure.log"
grep -qF "from $prefix/" "$work/consumer-configure.log" || fail "find_package(dtlab) found a dtlab outside $prefix"
"$cmake" --build "$work/consumer-build" > "$work/consumer-build.log" 2>&1 ||
  { tail -40 "$work/consumer-build.log" >&2; fail "the consumer project does not build against $prefix"; }
"$work/consumer-build/consumer" "$run"
