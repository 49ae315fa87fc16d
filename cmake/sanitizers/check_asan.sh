#!/usr/bin/env bash
# check_asan.sh BUILD_DIR: what `make check-asan` runs in a DTLAB_SANITIZE=address build (docs/testing.md, "Sanitizers").
#   1. the torch-free test programs, in process (analysis, config + checkpoint format, process, layers, study specs),
#      and the launcher's tests (launch_tests drives the instrumented `dtlab launch`)
#   2. short two-rank training runs of the instrumented dtlab on `tiny` under `dtlab launch -n 2`: a token file built
#      by `dtlab data build`; ddp with traces, TensorBoard and async checkpoints; fsdp_full_shard with the lab's ring
#      reduce-scatter (the comm's serial thread) and async checkpoints, then resumed from its last checkpoint
# Any sanitizer report fails the program that hit it (ASan halts, UBSan does not recover), and this script with it.
# The options and the suppressions (leaks of LibTorch's own, uninstrumented code) are in cmake/sanitizers/.
set -euo pipefail
build=$(cd "${1:?usage: check_asan.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source=$(cd "$here/../.." && pwd)
dtlab=$build/bin/dtlab
work=$build/asan-work
if ! grep -q '^DTLAB_SANITIZE:STRING=address$' "$build/CMakeCache.txt"; then
  echo "check_asan: $build is not a DTLAB_SANITIZE=address build" >&2
  exit 2
fi
# shellcheck source=cmake/sanitizers/options.sh
source "$here/options.sh"
export CUDA_VISIBLE_DEVICES=  # as every CPU test (tests/CMakeLists.txt)
rm -rf "$work" && mkdir -p "$work"
failed=()
step() {  # step NAME DIR COMMAND...: runs COMMAND in DIR, output in $work/NAME.log, time and verdict printed
  local name=$1 dir=$2 start=$SECONDS
  shift 2
  if (cd "$dir" && timeout 900 "$@") >"$work/$name.log" 2>&1; then
    echo "check-asan: $name passed ($((SECONDS - start)) s)"
  else
    echo "check-asan: $name FAILED ($((SECONDS - start)) s); the end of $work/$name.log:"
    grep -n -m 5 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$work/$name.log" || true
    tail -n 40 "$work/$name.log"
    failed+=("$name")
  fi
}

# 1. In-process tests: each program from its own build directory, as ctest runs it.
for entry in analysis_tests:tests/analysis config_tests:tests/unit process_tests:tests/unit \
             layers_tests:tests/layers study_tests:tests/scenarios launch_tests:tests/launch; do
  step "${entry%%:*}" "$build/${entry#*:}" "$build/bin/${entry%%:*}" --gtest_brief=1
done

# 2. Two-rank training runs.
run=(model.preset=tiny train.steps=4 train.warmup_steps=1 train.global_batch=8 train.micro_batch=4 instrument.warmup_steps=1
     instrument.log_every=1 data.source=file "data.path=$work/corpus.bin" checkpoint.every=2 checkpoint.async=true)
step data_build "$source" "$dtlab" data build --out "$work/corpus.bin"
step train_ddp "$source" "$dtlab" launch -n 2 "$dtlab" train --config scenarios/configs/ddp.yaml \
  parallel.strategy=ddp "${run[@]}" instrument.trace=true instrument.tensorboard=true \
  "checkpoint.dir=$work/ddp-ckpt" --out "$work/ddp"
step train_fsdp "$source" "$dtlab" launch -n 2 "$dtlab" train --config scenarios/configs/ddp.yaml \
  parallel.strategy=fsdp_full_shard parallel.reduce_scatter=ring "${run[@]}" "checkpoint.dir=$work/fsdp-ckpt" \
  --out "$work/fsdp"
step train_fsdp_resume "$source" "$dtlab" launch -n 2 "$dtlab" train --config scenarios/configs/ddp.yaml \
  parallel.strategy=fsdp_full_shard parallel.reduce_scatter=ring "${run[@]}" train.steps=6 \
  "checkpoint.dir=$work/fsdp-ckpt" checkpoint.resume=auto --out "$work/fsdp-resume"

if ((${#failed[@]})); then
  echo "check-asan: FAILED: ${failed[*]} (logs in $work)"
  exit 1
fi
echo "check-asan: every program ran clean under ASan + UBSan (logs in $work)"
