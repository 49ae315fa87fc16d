// results_schema.hpp: the one owner of result.json's version and key names (torch-free).
//
// analysis/schema.hpp keeps its own copy of these names (analysis never includes lab/);
// tests/analysis/schema_agreement_test.cpp checks that both agree.
#pragma once

namespace dtlab::schema {

inline constexpr int kVersion = 1;

// top level
inline constexpr const char* kSchemaVersion = "schema_version";
inline constexpr const char* kContext = "context";
inline constexpr const char* kConfig = "config";
inline constexpr const char* kModel = "model";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kSummary = "summary";
inline constexpr const char* kMemory = "memory";
inline constexpr const char* kDtypes =
    "dtypes";  // optional: dtype audit {params, master, grads, ..., collectives{op: [dtypes]}}
inline constexpr const char* kCollectives =
    "collectives";  // optional: per (op, group, dtype) count and bytes of the run

// context
inline constexpr const char* kDtlabVersion = "dtlab_version";
inline constexpr const char* kGitSha = "git_sha";
inline constexpr const char* kTorchVersion = "torch_version";
inline constexpr const char* kHost = "host";
inline constexpr const char* kWorldSize = "world_size";
inline constexpr const char* kLauncher = "launcher";
inline constexpr const char* kStartedAt = "started_at";
inline constexpr const char* kCommand = "command";  // the exact command line that reproduces the run
inline constexpr const char* kThreads = "threads";
inline constexpr const char* kStrategy = "strategy";

// model
inline constexpr const char* kParams = "params";
inline constexpr const char* kFlopsPerToken = "flops_per_token";
inline constexpr const char* kPreset = "preset";

// steps[i]
inline constexpr const char* kStep = "step";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kStepMs = "step_ms";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kCommWaitMs = "comm_wait_ms";  // optional: exposed communication wait of the step
inline constexpr const char* kLossScale = "loss_scale";     // optional: dynamic loss scaling, the scale of the step
inline constexpr const char* kSkipped = "skipped";          // optional: the step was skipped (non-finite gradients)

// summary
inline constexpr const char* kStepMsMedian = "step_ms_median";
inline constexpr const char* kStepMsMin = "step_ms_min";
inline constexpr const char* kStepMsMax = "step_ms_max";
inline constexpr const char* kCommWaitMsMedian = "comm_wait_ms_median";  // optional
inline constexpr const char* kFinalLoss = "final_loss";
inline constexpr const char* kTflops = "tflops";  // model FLOPs rate (6N + 12Lhs per token), all ranks
inline constexpr const char* kWallS = "wall_s";
inline constexpr const char* kMeasuredSteps = "measured_steps";  // steps after instrument.warmup_steps
inline constexpr const char* kMfuPct = "mfu_pct";                // optional: TFLOPS / peak (CPU: measured GEMM rate)
inline constexpr const char* kGemmTflops = "gemm_tflops";        // optional: the peak used for mfu_pct

// memory (per rank; rank 0's in result.json)
inline constexpr const char* kRank = "rank";
inline constexpr const char* kRanks = "ranks";  // every rank's figures, in rank order
inline constexpr const char* kParamsBytes = "params_bytes";
inline constexpr const char* kGradsBytes = "grads_bytes";
inline constexpr const char* kOptimizerBytes = "optimizer_bytes";
inline constexpr const char* kBuffersBytes = "buffers_bytes";
inline constexpr const char* kActivationsBytes = "activations_bytes";  // optional: estimate (peak minus the rest)
inline constexpr const char* kTensorPeakBytes = "tensor_peak_bytes";   // optional: counting allocator
inline constexpr const char* kTensorCurrentBytes = "tensor_current_bytes";
inline constexpr const char* kRssBytes = "rss_bytes";
inline constexpr const char* kHwmBytes = "hwm_bytes";

// collectives[i]
inline constexpr const char* kBytesPerStep = "bytes_per_step";

}  // namespace dtlab::schema
