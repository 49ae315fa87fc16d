// results_schema.hpp: the one owner of result.json's version and key names, and of the run-directory and
// scenario.json names the report reads. Header-only and torch-free: the lab writes with it, analysis/ reads with it
// (an include path is all it needs; nothing here links lab/ or LibTorch).
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
// Optional (absent = ok): "oom" when the run stopped out of memory under memory.limit; then kOom holds the refusal
// (rank, step (0 = setup), category, requested_bytes, in_use_bytes, limit_bytes, in_use_by_category, message),
// memory.ranks each rank's memory when it stopped, and there is no summary.
inline constexpr const char* kStatus = "status";
inline constexpr const char* kStatusOom = "oom";
inline constexpr const char* kOom = "oom";
// `dtlab train`'s exit status (every rank's, and `dtlab launch`'s) when the run stopped out of memory, so scripts
// and studies can tell it from a crash.
inline constexpr int kOutOfMemoryExitCode = 3;
// Optional: training checkpoints (checkpoint.*): kResumedFrom {path, step, saved_by, load_ms, bytes_read} when the
// run continued from one, kSaves rank 0's saves [{step, path, bytes_here, total_bytes, blocking_ms, write_ms,
// snapshot_bytes, extra_bytes}], kRestartCount the attempt `dtlab launch --max-restarts` started again (0: the first).
inline constexpr const char* kCheckpoints = "checkpoints";
inline constexpr const char* kRestartCount = "restart_count";
inline constexpr const char* kResumedFrom = "resumed_from";
inline constexpr const char* kSaves = "saves";
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
// The strategy's catalogue lines (strategies/spec.hpp doc, choose_when) and the id the report sets every strategy
// against (strategies/catalog.hpp kComparisonBaseline). Optional: results written before them have none.
inline constexpr const char* kStrategyDoc = "strategy_doc";
inline constexpr const char* kChooseWhen = "choose_when";
inline constexpr const char* kBaseline = "baseline";
// The CPU the run ran on, from cpuid (lab/cpu_features.hpp): {model, cores, avx2, avx512f, avx512_bf16, amx_bf16,
// kernels_capped_by, native_bf16}. Optional (results written before it have none; kernels_capped_by is newer still):
// bf16 step times flip with native_bf16.
inline constexpr const char* kCpu = "cpu";
// Where the model trained (train.device resolved; lab/device.hpp): "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)".
// Optional: results written before it have none (they ran on the CPU).
inline constexpr const char* kDevice = "device";
// The fused attention kernel SDPA picks for the run's shapes on its device (lab/device.hpp attention_kernel):
// "flash_attention", "efficient_attention", "math", ... Optional, like kDevice.
inline constexpr const char* kAttention = "attention";
// The job's topology: nodes (1 on one machine; M on `dtlab launch --nodes M`), ranks per node, and the link rates:
// inter_link / intra_link as text ("1 Gbit/s", "unshaped"; "unknown" under a launcher that does not say; inter_link is
// null on one node), inter_link_bps / intra_link_bps in bits per second (0 = unshaped; null = unknown or one node).
inline constexpr const char* kNodes = "nodes";
inline constexpr const char* kRanksPerNode = "ranks_per_node";
inline constexpr const char* kInterLink = "inter_link";
inline constexpr const char* kInterLinkBps = "inter_link_bps";
inline constexpr const char* kIntraLink = "intra_link";
inline constexpr const char* kIntraLinkBps = "intra_link_bps";

// model
inline constexpr const char* kParams = "params";
inline constexpr const char* kFlopsPerToken = "flops_per_token";
inline constexpr const char* kPreset = "preset";

// steps[i] (also one line of rank<r>/steps.jsonl)
inline constexpr const char* kStep = "step";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kStepMs = "step_ms";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kCommWaitMs = "comm_wait_ms";  // optional: exposed communication wait of the step
// optional (world > 1, steps after the warm-up, result.json only): the least comm wait of any rank in this step
inline constexpr const char* kCommWaitLeastMs = "comm_wait_least_ms";
inline constexpr const char* kLossScale = "loss_scale";  // optional: dynamic loss scaling, the scale of the step
inline constexpr const char* kSkipped = "skipped";       // optional: the step was skipped (non-finite gradients)

// summary
inline constexpr const char* kStepMsMedian = "step_ms_median";
inline constexpr const char* kStepMsMin = "step_ms_min";
inline constexpr const char* kStepMsMax = "step_ms_max";
inline constexpr const char* kCommWaitMsMedian = "comm_wait_ms_median";  // optional
// optional (world > 1): per measured step the least comm wait of any rank, median over the steps. The rank that
// reaches the collectives last waits for the communication only; the others wait for it too.
inline constexpr const char* kCommWaitLeastMsMedian = "comm_wait_least_ms_median";
// optional (world > 1): every rank's median forward, backward and comm_wait phase times over the measured steps
// ([{rank, forward_ms, backward_ms, comm_wait_ms}]): a pipeline stage's busy (forward + backward) and idle time.
inline constexpr const char* kPhasesByRank = "phases_by_rank";
inline constexpr const char* kForwardMs = "forward_ms";
inline constexpr const char* kBackwardMs = "backward_ms";
inline constexpr const char* kFinalLoss = "final_loss";
inline constexpr const char* kTflops = "tflops";  // model FLOPs rate (6N + 12Lhs per token), all ranks
inline constexpr const char* kWallS = "wall_s";
inline constexpr const char* kMeasuredSteps = "measured_steps";  // steps after instrument.warmup_steps
inline constexpr const char* kMfuPct = "mfu_pct";                // optional: TFLOPS / peak (CPU: measured GEMM rate)
inline constexpr const char* kGemmTflops = "gemm_tflops";        // optional: the peak used for mfu_pct

// files inside a run directory
inline constexpr const char* kResultFile = "result.json";
inline constexpr const char* kStepsFile = "steps.jsonl";  // under rank<r>/
inline constexpr const char* kRankDirPrefix = "rank";

// config paths the report reads (config is the resolved YAML, stored as-is)
inline constexpr const char* kConfigParallel = "parallel";
inline constexpr const char* kConfigPrecision = "precision";
inline constexpr const char* kConfigParamDtype = "param_dtype";  // fp32 | bf16 | fp16
inline constexpr const char* kConfigInstrument = "instrument";
inline constexpr const char* kConfigWarmupSteps = "warmup_steps";  // steps excluded from summary statistics

// scenario.json, written by the scenario runner into results/<scenario>/
// {scenario, title, question, description, look_for, notes, quick, runs: [{name, dir, command, world_size, wall_s,
// note}]}; question and look_for are optional (scenario.json files written before them have none)
inline constexpr const char* kScenarioFile = "scenario.json";
inline constexpr const char* kScenario = "scenario";
inline constexpr const char* kTitle = "title";
inline constexpr const char* kDescription = "description";
inline constexpr const char* kQuestion = "question";  // the one question the study answers
inline constexpr const char* kLookFor = "look_for";   // what to look for in its charts
inline constexpr const char* kNotes = "notes";
inline constexpr const char* kQuick = "quick";  // the scenario ran with its quick overrides
inline constexpr const char* kRuns = "runs";
inline constexpr const char* kRunName = "name";
inline constexpr const char* kRunDir = "dir";
inline constexpr const char* kRunNote = "note";  // runs[i]; also command, world_size, wall_s (keys above)

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
inline constexpr const char* kHostBytes = "host_bytes";  // optional: of the state, offload's host buffers
inline constexpr const char* kDeviceSidePeakBytes = "device_side_peak_bytes";  // optional: the peak outside them
inline constexpr const char* kRssBytes = "rss_bytes";
inline constexpr const char* kHwmBytes = "hwm_bytes";

// collectives[i]
inline constexpr const char* kBytesPerStep = "bytes_per_step";

// ---- instrumentation (issue 5): phases, metrics, per-collective records -------------------------
// steps[i], optional
inline constexpr const char* kPhasesMs = "phases_ms";  // {data, forward, backward, comm_wait, optimizer, other}
inline constexpr const char* kCommMs = "comm_ms";      // union of the step's collective intervals
inline constexpr const char* kExposedCommMs = "exposed_comm_ms";  // of which not hidden behind compute
inline constexpr const char* kOverlapPct = "overlap_pct";         // hidden share of comm_ms, percent
inline constexpr const char* kTraceMs = "trace_ms";  // instrument.trace: time writing the step's trace events
// summary, optional
inline constexpr const char* kStepMsMean = "step_ms_mean";
inline constexpr const char* kStepMsP95 = "step_ms_p95";
inline constexpr const char* kTokensPerSPerRank = "tokens_per_s_per_rank";
inline constexpr const char* kMfuPeakSource = "mfu_peak_source";        // where gemm_tflops came from
inline constexpr const char* kPhaseClock = "phase_clock";               // steady_clock | cuda_events
inline constexpr const char* kTraceMsMedian = "trace_ms_median";        // instrument.trace only
inline constexpr const char* kTraceOverheadPct = "trace_overhead_pct";  // trace_ms_median / step_ms_median
inline constexpr const char* kCpuUtilPct = "cpu_util_pct";              // rank 0; 100 = one core busy
inline constexpr const char* kMemoryMaxAllocatedBytes = "memory_max_allocated_bytes";
inline constexpr const char* kMemoryMaxReservedBytes = "memory_max_reserved_bytes";
inline constexpr const char* kOverlapPctMedian = "overlap_pct_median";
// comm: {records: [...], records_truncated, ranks: [{rank, comm_ms_per_step, exposed_ms_per_step, overlap_pct,
//        cpu_util_pct}]}
inline constexpr const char* kComm = "comm";
inline constexpr const char* kRecords = "records";
inline constexpr const char* kRecordsTruncated = "records_truncated";
inline constexpr const char* kSeq = "seq";
inline constexpr const char* kStartUs = "start_us";
inline constexpr const char* kEndUs = "end_us";
inline constexpr const char* kTimeUs = "time_us";
inline constexpr const char* kAlgbwGBps = "algbw_GBps";
inline constexpr const char* kBusbwGBps = "busbw_GBps";
inline constexpr const char* kExposedUs = "exposed_us";
inline constexpr const char* kOverlappedUs = "overlapped_us";
inline constexpr const char* kCommMsPerStep = "comm_ms_per_step";
inline constexpr const char* kExposedMsPerStep = "exposed_ms_per_step";
// prediction (analysis/cost/predict.hpp)
inline constexpr const char* kPrediction = "prediction";
// files inside rank<r>/
inline constexpr const char* kTimelineFile = "timeline.json";
// Every rank but 0: {rank, records, records_truncated}, its own comm records as result.json's comm holds rank 0's
// (under pipeline stages the ranks' calls differ).
inline constexpr const char* kCommRecordsFile = "comm_records.json";
inline constexpr const char* kTraceFile = "trace.json.gz";
inline constexpr const char* kTensorBoardDir = "tensorboard";  // instrument.tensorboard: <run>/tensorboard/rank<r>/

}  // namespace dtlab::schema
