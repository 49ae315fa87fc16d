#!/usr/bin/env bash
# gpu_check.sh: the GPU path's checks and figures on a machine with a CUDA device, from a cuda build (make build-cuda).
#   1. the GPU test cases (gpu_tests; NCCL at world 2 skips on one GPU) and the CUDA kernels' unit tests
#      (stochastic rounding bit for bit, the fused RoPE and cross-entropy against the unfused path);
#   2. single-GPU MFU of the 125m and 1b presets in bf16 (single strategy, fp32 masters), with the prediction of the
#      shipped spec-sheet profile (H100 SXM, or H200 SXM on an H200) beside the measured step;
#   3. tokens/s of every strategy with 2 ranks sharing the one GPU (Gloo carries their collectives), medium preset;
#   calibrate: `dtlab calibrate` on the GPU (125m, bf16, 2 ranks: GEMMs per dtype, the training step at two
#      micro-batches, memory and copy rates, comm-bench on GPU buffers); the MFU runs then predict with that
#      measured profile beside the spec sheet's;
#   trace: one traced 125m run and where its GPU time goes (tests/gpu/kernel_time.py).
# Usage: bash tests/gpu/gpu_check.sh [OUT]   (BUILD=build-cuda by default; OUT=/tmp/dtlab-gpu;
#        PARTS="tests calibrate mfu strategies trace" by default: name fewer to run fewer)
# Writes OUT/*.log and one result directory per run; prints a summary table at the end (docs/performance.md).
set -u
BUILD=${BUILD:-build-cuda}
OUT=${1:-/tmp/dtlab-gpu}
mkdir -p "$OUT"
DTLAB="$BUILD/bin/dtlab"
CONFIG=tests/strategy/tiny_ddp.yaml
PROFILE=analysis/profiles/h100_sxm.json  # the spec sheet's prediction beside the measured step (H200: its own sheet)
PARTS=${PARTS:-tests calibrate mfu strategies trace}
STRATEGIES="single ddp zero1 fsdp_shard_grad_op fsdp_full_shard fsdp_no_shard fsdp_hybrid"
has() { [[ " $PARTS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
grep -q H200 "$OUT/device.txt" && PROFILE=analysis/profiles/h200_sxm.json

if has tests; then
  echo "== GPU test cases"
  "$BUILD/bin/gpu_tests" 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED TEST"
  "$BUILD/bin/unit_tests" --gtest_filter='StochasticRound.*:GpuStatus.*:Cupti*:FusedKernels.*:FusedOps.*' 2>&1 \
    | tee "$OUT/unit_tests.log" | grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED TEST"
fi

MEASURED=$OUT/calibration/profile.json
if has calibrate; then
  echo "== dtlab calibrate on the GPU (125m, bf16, 2 ranks sharing it)"
  "$DTLAB" calibrate --out "$MEASURED" --ranks 2 --config $CONFIG model.preset=125m train.device=cuda \
    precision.param_dtype=bf16 train.micro_batch=8 train.global_batch=16 2>&1 | tee "$OUT/calibrate.log" | tail -25
fi

summary() {  # run label, result dir [, dtlab predict output with the measured profile]
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
label, out, measured = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(out + "/result.json"))
except Exception as e:
    print(f"{label:28s} no result ({e})"); sys.exit()
s, c = r["summary"], r["context"]
pred = r.get("prediction", {}).get("step_ms")
mem = r["memory"].get("cuda", {}).get("allocated_peak_bytes", 0) / 2**30
print(f"{label:28s} step {s['step_ms_median']:9.1f} ms | {s['tokens_per_s']:10.0f} tok/s | mfu {s.get('mfu_pct', 0):5.1f}% "
      f"| peak {mem:6.2f} GiB | predicted {pred if pred is None else round(pred, 1)} ms | {c.get('attention')} | {c.get('device')}")
try:  # the prediction of the profile dtlab calibrate measured on this GPU
    print(f"{'':28s} measured profile predicts {json.load(open(measured))['step_ms']:.1f} ms")
except Exception:
    pass
PY
}

# preset, micro-batch, accumulation: one micro-step per optimizer step, then 4 (a global batch of 4 micro-batches, as
# real training accumulates; the optimizer's fixed cost is shared by 4x the tokens)
MFU_RUNS=${MFU_RUNS:-"125m:16:1 125m:16:4 1b:4:1 1b:4:4"}
if has mfu; then
  echo "== single-GPU MFU, bf16"
  for spec in $MFU_RUNS; do
    IFS=: read -r preset micro acc <<< "$spec"
    "$DTLAB" train --config $CONFIG --out "$OUT/mfu_${preset}_m${micro}_acc$acc" model.preset=$preset parallel.strategy=single \
      train.device=cuda precision.param_dtype=bf16 train.micro_batch=$micro train.global_batch=$((micro * acc)) \
      train.steps=12 instrument.warmup_steps=4 instrument.log_every=6 instrument.profile=$PROFILE \
      > "$OUT/mfu_${preset}_m${micro}_acc$acc.log" 2>&1 || tail -5 "$OUT/mfu_${preset}_m${micro}_acc$acc.log"
    if [ -f "$MEASURED" ]; then  # the measured profile's prediction of the same run (no training: dtlab predict)
      "$DTLAB" predict --config $CONFIG --profile "$MEASURED" model.preset=$preset parallel.strategy=single \
        train.device=cuda precision.param_dtype=bf16 train.micro_batch=$micro train.global_batch=$((micro * acc)) \
        > "$OUT/predict_${preset}_m${micro}_acc$acc.txt" 2>&1 || tail -5 "$OUT/predict_${preset}_m${micro}_acc$acc.txt"
    fi
  done
fi

if has trace; then
  echo "== where a 125m bf16 step's GPU time goes (traced run)"
  "$DTLAB" train --config $CONFIG --out "$OUT/trace_125m" model.preset=125m parallel.strategy=single \
    train.device=cuda precision.param_dtype=bf16 train.micro_batch=16 train.global_batch=16 train.steps=8 \
    instrument.warmup_steps=4 instrument.trace=true > "$OUT/trace_125m.log" 2>&1 || tail -5 "$OUT/trace_125m.log"
  python3 tests/gpu/kernel_time.py "$OUT/trace_125m" --skip-steps 4 --top 20 | tee "$OUT/kernel_time.txt"
fi

has strategies && echo "== every strategy, 2 ranks on one GPU (Gloo), medium preset"
for strategy in $STRATEGIES; do
  has strategies || break
  n=2; [ $strategy = single ] && n=1
  "$DTLAB" launch -n $n "$DTLAB" train --config $CONFIG --out "$OUT/w2_$strategy" model.preset=medium \
    parallel.strategy=$strategy train.device=cuda train.micro_batch=8 train.global_batch=16 train.steps=8 \
    instrument.warmup_steps=3 instrument.log_every=8 > "$OUT/w2_$strategy.log" 2>&1 || tail -5 "$OUT/w2_$strategy.log"
done

echo "== summary"
if has mfu; then
  for spec in $MFU_RUNS; do
    IFS=: read -r preset micro acc <<< "$spec"
    summary "$preset bf16 micro $micro acc $acc" "$OUT/mfu_${preset}_m${micro}_acc$acc" \
      "$OUT/predict_${preset}_m${micro}_acc$acc.txt"
  done
fi
if has strategies; then
  for strategy in $STRATEGIES; do summary "medium $strategy" "$OUT/w2_$strategy"; done
fi
