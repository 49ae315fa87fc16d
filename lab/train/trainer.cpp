// trainer.cpp: the training loop (see trainer.hpp).
#include "lab/train/trainer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include <ATen/Parallel.h>

#include "lab/atomic_file.hpp"
#include "lab/comm/comm.hpp"
#include "lab/data.hpp"
#include "lab/device.hpp"
#include "lab/device_memory.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/instrument/clock.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/peak_flops.hpp"
#include "lab/instrument/step_analysis.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/instrument/trace.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/model_shape.hpp"
#include "lab/results.hpp"
#include "lab/results_schema.hpp"
#include "lab/train/model_plan.hpp"
#include "lab/train/oom_stop.hpp"
#include "lab/train/run_trace.hpp"
#include "lab/train/schedule.hpp"
#include "lab/train/step_schedule.hpp"
#include "lab/train/train_checkpoint.hpp"

namespace dtlab {

namespace {

// Records of every communicator issued since `cursor` (advanced), in issue order per communicator.
std::vector<CollectiveRecord> new_records(World& world, std::map<Comm*, size_t>& cursor) {
  std::vector<CollectiveRecord> out;
  for (Comm* comm : world.all_comms()) {
    auto recs = comm->records_since(cursor[comm]);
    cursor[comm] += recs.size();
    out.insert(out.end(), std::make_move_iterator(recs.begin()), std::make_move_iterator(recs.end()));
  }
  return out;
}

// Detaches the step profiler from the run's trace writer however train() exits.
struct ProfilerSession {
  ProfilerSession(bool nvtx, TraceWriter* trace) { StepProfiler::instance().configure(nvtx, trace); }
  ~ProfilerSession() { StepProfiler::instance().configure(true, nullptr); }
};

// The trainer's loss sum over a strategy's data-parallel communicator (a DistWorld's all_reduce_sum on a group).
double sum_over(Comm& comm, double value) {
  at::Tensor t = at::full({1}, value, at::kDouble);
  comm.all_reduce(t, "metric").wait();
  return t.item<double>();
}

// The strategy's data-parallel ranks times the mesh's model-parallel ranks must tile the world, and the data-parallel
// ranks split the global batch (its spec promised as much to config validation, which derived train.accumulation).
void check_layout(const ParallelLayout& layout, const Strategy& strategy, const DeviceMesh& mesh,
                  const TrainConfig& t) {
  const int64_t model_parallel = mesh.dims().model_parallel();
  if (layout.dp_size * model_parallel != mesh.world_size() || t.global_batch % (t.micro_batch * layout.dp_size) != 0)
    throw std::logic_error(
        "strategy " + strategy.id() + " reports dp " + std::to_string(layout.dp_size) + " ranks beside " +
        std::to_string(model_parallel) + " model-parallel ranks for world_size=" + std::to_string(mesh.world_size()) +
        " and global_batch=" + std::to_string(t.global_batch) + ": its layout() and its spec disagree");
}

// What one optimizer step gives the record besides its timings.
struct StepOutcome {
  double loss = 0, grad_norm = 0, lr = 0;
};

// One optimizer step (0-based `step`): the step schedule runs the micro-batches forward and backward through the
// strategy, then gradient completion, the loss summed over the data-parallel group, the global norm, clipping and the
// optimizer at the scheduled rate. Throws TrainingError on a non-finite loss, or a non-finite norm without dynamic
// loss scaling.
StepOutcome train_step(int64_t step, const Config& config, Strategy& strategy, World& world, Sampler& sampler,
                       const ParallelLayout& layout, StepSchedule& schedule, ModelParallelPlan& plan,
                       const TrainDevice& device) {
  const TrainConfig& t = config.train;
  strategy.zero_grad();
  const double loss_weight = 1.0 / static_cast<double>(std::max<int64_t>(1, sampler.global_target_count(step)));
  const MicroBatchSource batches = [&sampler, &device](int64_t at_step, int64_t micro) {
    ScopedPhase data(Phase::data, "batch-generator");
    MemoryScope inputs(MemoryCategory::activations);  // the micro-batch's tokens, as the activation model counts
    Batch batch = sampler.batch(at_step, micro);
    batch.inputs = to_device(batch.inputs, device);  // pinned, non-blocking: ordered before the forward reads it
    batch.targets = to_device(batch.targets, device);
    return batch;
  };
  const double local_loss = schedule.run(step, loss_weight, batches, strategy);
  {
    // Strategies tag their own buffers (wire copies, reduce-scatter outputs); what else finishing allocates is
    // `other`: a scalar operand ATen wraps in a 0-dim tensor, a finite check's flags.
    MemoryScope temporaries(MemoryCategory::other);
    strategy.finish_gradients();  // in time: its blocking waits are comm_wait spans (lab/comm), the rest `other`
  }
  StepOutcome out;
  out.loss = layout.dp_comm != nullptr ? sum_over(*layout.dp_comm, local_loss) : world.all_reduce_sum(local_loss);
  if (!std::isfinite(out.loss))
    throw TrainingError("training: loss is " + std::string(std::isnan(out.loss) ? "nan" : "inf") + " at step " +
                        std::to_string(step + 1) + "/" + std::to_string(t.steps) +
                        "; stopping (lower train.lr, enable train.grad_clip, or check the data)");
  // The strategy's sum covers this rank's slices; the plan adds the other model-parallel ranks' (identity: none).
  out.grad_norm = std::sqrt(plan.sum_over_model_parallel(strategy.grad_sum_of_squares()));
  // The norm is global (agreed by every rank), so every rank stops here together. With dynamic loss scaling a
  // non-finite norm is expected: the strategy skips the step and halves the scale.
  if (!std::isfinite(out.grad_norm) && config.precision.loss_scale != "dynamic")
    throw TrainingError("training: gradient norm is " + std::string(std::isnan(out.grad_norm) ? "nan" : "inf") +
                        " at step " + std::to_string(step + 1) + "/" + std::to_string(t.steps) + " (loss " +
                        std::to_string(out.loss) +
                        "); stopping before the optimizer spreads it into the parameters (lower train.lr, enable "
                        "train.grad_clip, use precision.loss_scale=dynamic for fp16, or check the data)");
  if (t.grad_clip > 0.0 && out.grad_norm > t.grad_clip) strategy.scale_gradients(t.grad_clip / (out.grad_norm + 1e-6));
  out.lr = learning_rate(t, step);
  inject_delay("before_optimizer", world.rank());
  {
    ScopedPhase optimizer(Phase::optimizer, "optimizer-step");
    strategy.optimizer_step(out.lr);
  }
  return out;
}

// The step's record from its outcome, the profiler's view of it and its collectives.
StepRecord step_record(int64_t step, const StepOutcome& outcome, const StepComm& comm, const Strategy& strategy,
                       double tokens_per_step, double flops_per_token, double peak_tflops, const TrainDevice& device) {
  const StepProfiler& profiler = StepProfiler::instance();
  StepRecord record;
  record.step = step + 1;
  record.loss = outcome.loss;
  record.lr = outcome.lr;
  record.grad_norm = outcome.grad_norm;
  record.step_ms = (profiler.step_end_us() - profiler.step_start_us()) / 1000.0;
  record.tokens_per_s = tokens_per_step / (record.step_ms / 1000.0);
  record.phases_ms = profiler.phase_ms();
  record.comm_wait_ms = record.phases_ms[static_cast<int>(Phase::comm_wait)];
  record.comm_ms = comm.comm_ms;
  record.exposed_comm_ms = comm.exposed_ms;
  record.overlap_pct = comm.overlap_pct;
  record.tflops = flops_per_token * record.tokens_per_s / 1e12;
  record.mfu_pct = peak_tflops > 0 ? 100.0 * record.tflops / peak_tflops : 0.0;
  // On a GPU the tensors live in the CUDA caching allocator: its peak of live tensor bytes.
  const std::optional<CudaMemory> cuda = device.cuda() ? cuda_memory() : std::nullopt;
  record.memory_bytes = cuda ? cuda->allocated_peak_bytes : cpu_tensor_memory().peak_bytes;
  record.loss_scale = strategy.loss_scale();
  record.skipped = strategy.step_skipped();
  return record;
}

// The last step's phase spans and collectives: the timeline of the report (rank<r>/timeline.json).
struct LastStep {
  std::vector<PhaseSpan> spans;
  double start_us = 0, end_us = 0;
  nlohmann::json records;
};

// result.json's opening keys: schema version, context, config and model.
nlohmann::json result_header(const Config& config, const Strategy& strategy, const World& world,
                             const std::string& command, int threads, int64_t parameters) {
  nlohmann::json result;
  result[schema::kSchemaVersion] = schema::kVersion;
  result[schema::kContext] =
      run_context(world.world_size(), world.local_world_size(), world.launcher(), strategy.id(), command, threads);
  result[schema::kConfig] = to_json(config);
  result[schema::kModel] = {{schema::kParams, parameters},
                            {schema::kFlopsPerToken, model_counts(config.model).flops_per_token},
                            {schema::kPreset, config.model.preset}};
  return result;
}

// How far a run got, for stopping it part-way: the step running (0 = setup) and the results writer.
struct RunProgress {
  int64_t step = 0;
  std::atomic<bool> wrapped{false};  // the strategy is whole: its state_bytes() can be asked (from any thread)
  std::unique_ptr<ResultsWriter> writer;
};

// This rank's memory for an out-of-memory record: the strategy's state once it is whole, the measured categories
// always (a refusal inside wrap() leaves a strategy half-built).
nlohmann::json memory_now(const Strategy& strategy, const World& world, const RunProgress& progress) {
  return memory_report(progress.wrapped ? strategy.state_bytes() : StateBytes{}, world.rank());
}

// The out-of-memory stop on the rank whose allocation was refused (lab/train/oom_stop.hpp): agree with the other
// ranks, write result.json with status oom — the refusal, every rank's memory, the steps done — and throw.
[[noreturn]] void stop_out_of_memory(const Config& config, Strategy& strategy, World& world,
                                     const TrainOptions& options, const RefusedAllocation& refused,
                                     const TrainOutcome& outcome, const RunProgress& progress, OomAgreement& oom) {
  const std::string where = progress.step == 0 ? "in setup" : "at step " + std::to_string(progress.step);
  const std::string message =
      "rank " + std::to_string(world.rank()) + " ran out of memory " + where + ": " + describe(refused);
  nlohmann::json refusal = to_json(refused);
  refusal["rank"] = world.rank();
  refusal["step"] = progress.step;
  refusal["message"] = message;
  const std::vector<nlohmann::json> memory = oom.claim(refusal);  // another rank's claim ends this process here
  if (progress.writer) {
    nlohmann::json result = result_header(config, strategy, world, options.command,
                                          static_cast<int>(at::get_num_threads()), model_counts(config.model).params);
    result[schema::kStatus] = schema::kStatusOom;
    result[schema::kOom] = refusal;
    result[schema::kMemory] = memory_now(strategy, world, progress);
    result[schema::kMemory][schema::kRanks] = memory;
    nlohmann::json steps = nlohmann::json::array();
    for (const StepRecord& r : outcome.steps) steps.push_back(step_json(r, config.precision.loss_scale == "dynamic"));
    result[schema::kSteps] = steps;
    if (options.predict) result[schema::kPrediction] = options.predict(config, world.rank());
    progress.writer->write_result(result);
  }
  oom.written();
  throw OutOfMemoryStop(message);
}

// Saves the state after `step` steps; the trainer's own positions are the step count (the sampler and the schedule
// are functions of it). Prints where it went on rank 0.
void save_checkpoint(CheckpointSaver& saver, int64_t step, Strategy& strategy, World& world,
                     const TrainOptions& options) {
  const std::map<std::string, double> positions = {{"train.steps_done", static_cast<double>(step)},
                                                   {"data.next_step", static_cast<double>(step)},
                                                   {"lr_schedule.next_step", static_cast<double>(step)}};
  saver.save(step, strategy, positions);
  const SaveRecord& r = saver.records().back();
  if (world.is_main() && options.print_steps) {
    const bool async = r.snapshot_bytes > 0;  // the write is still going on: say what was copied for it
    std::printf("checkpoint step %lld -> %s | %.2f MiB %s | %.1f ms blocking%s\n", static_cast<long long>(step),
                r.path.c_str(), static_cast<double>(async ? r.snapshot_bytes : r.bytes_here) / (1024.0 * 1024.0),
                async ? "copied" : "here", r.blocking_ms, async ? " (async: written in the background)" : "");
    std::fflush(stdout);
  }
}

// result.json "checkpoints": where the run resumed from and this rank's saves.
nlohmann::json checkpoints_json(const std::optional<ResumePoint>& resumed, const CheckpointSaver* saver) {
  nlohmann::json j = {{schema::kRestartCount, restart_count()}};
  if (resumed)
    j[schema::kResumedFrom] = {{"path", resumed->path},
                               {"step", resumed->step},
                               {"saved_by", resumed->saved_by},
                               {"load_ms", resumed->load_ms},
                               {"bytes_read", resumed->bytes_read}};
  nlohmann::json saves = nlohmann::json::array();
  if (saver)
    for (const SaveRecord& r : saver->records()) saves.push_back(to_json(r));
  j[schema::kSaves] = saves;
  return j;
}

}  // namespace

std::string format_step_line(const StepRecord& r, int64_t total_steps) {
  char buf[320];
  int n = std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | lr %.1e | %.1f ms | %.0f tok/s",
                        static_cast<long long>(r.step), static_cast<long long>(total_steps), r.loss, r.lr, r.step_ms,
                        r.tokens_per_s);
  if (r.tflops > 0)
    n +=
        std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | %.3g TFLOPS | mfu %.1f%%", r.tflops, r.mfu_pct);
  if (r.memory_bytes > 0)
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | mem %.2f GiB",
                       static_cast<double>(r.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  if (r.comm_ms > 0)
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | comm %.1f ms, %.1f exposed (overlap %.0f%%)",
                  r.comm_ms, r.exposed_comm_ms, r.overlap_pct);
  if (r.skipped) return std::string(buf) + " | skipped: non-finite gradients, loss scale now halved";
  return buf;
}

int configure_threads(const Config& config, const World& world) {
  int threads = static_cast<int>(config.train.threads);
  if (threads == 0) {
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, world.host_ranks()));
  }
  at::set_num_threads(threads);
  return threads;
}

namespace {

// The run after its checks: setup, the steps and the results. `progress` says how far it got, for a stop.
void run_training(const Config& config, Strategy& strategy, World& world, const DeviceMesh& mesh,
                  const TrainOptions& options, const TrainDevice& device, TrainOutcome& outcome,
                  RunProgress& progress) {
  const int threads = configure_threads(config, world);
  const TrainConfig& t = config.train;

  if (device.cuda()) {  // device memory by category from here on (the allocator is set up by its first allocation)
    (void)at::empty({1}, at::TensorOptions().device(device.device));
    install_device_category_counts();
  }
  auto model = [&] {
    MemoryScope params(MemoryCategory::params);  // the strategy's wrap re-tags what it replaces or adds
    auto gpt = std::make_shared<GPT>(config.model, t.seed);
    if (device.cuda()) gpt->to(device.device);  // made on the host from the seed: the CPU reference's weights
    return gpt;
  }();
  auto source = make_token_source(config.data, config.model.vocab_size);
  // The three seams, in order: the mesh's communicators, the model-parallel plan on the model, the data-parallel
  // strategy around it; then the step schedule over the micro-batches (docs/architecture.md, "Three seams").
  MeshComms comms(mesh, world);
  const std::unique_ptr<ModelParallelPlan> plan = make_model_plan(config);
  plan->apply(*model, comms);
  const StateLayout state_layout_here = state_layout(plan->splits(*model), mesh, world.rank());  // for checkpoints
  strategy.wrap(model, config, comms);
  progress.wrapped = true;
  // The data each rank reads, the accumulation and the loss sum follow the strategy's data-parallel layout.
  const ParallelLayout layout = strategy.layout();
  check_layout(layout, strategy, mesh, t);
  const int64_t accumulation = t.global_batch / (t.micro_batch * layout.dp_size);
  const std::unique_ptr<StepSchedule> schedule = make_step_schedule(config, accumulation, comms);
  Sampler sampler(*source, config.model.seq_len, t.global_batch, t.micro_batch, accumulation, layout.dp_rank,
                  layout.dp_size, config.data.seed, config.data.mask_token);
  // A checkpoint to continue from (checkpoint.resume), then the saver of this run's checkpoints.
  const std::optional<ResumePoint> resumed = resume_if_asked(config, strategy, world, state_layout_here);
  const int64_t first_step = resumed ? resumed->step : 0;
  std::unique_ptr<CheckpointSaver> saver =
      config.checkpoint.dir.empty()
          ? nullptr
          : std::make_unique<CheckpointSaver>(config, world, strategy.id(), state_layout_here);
  const JobPeak peak = [&] {
    const UncappedScope measuring;  // the probe's matrices are the lab's, not the run's
    return job_peak_tflops(config, world, threads, device.cuda() ? device.device.index() : -1);
  }();
  const std::string attention = [&] {  // its probe tensor is the lab's, not the run's
    const UncappedScope measuring;
    return attention_kernel(t.micro_batch, config.model.n_heads, config.model.seq_len,
                            config.model.d_model / config.model.n_heads,
                            scalar_type_named(config.precision.param_dtype, "precision.param_dtype"), device);
  }();
  reset_peak_cpu_tensor_memory();  // the peak of training, not of construction
  reset_peak_device_memory(device);
  std::map<Comm*, size_t> first_training_seq;  // collectives before this are setup
  for (Comm* comm : world.all_comms()) first_training_seq[comm] = comm->record_count();
  std::map<Comm*, size_t> record_cursor = first_training_seq;

  const ModelCounts counts = model_counts(config.model);
  // The model's parameters, not this rank's: under tensor parallelism a rank holds only its slices.
  nlohmann::json result = result_header(config, strategy, world, options.command, threads, counts.params);
  result[schema::kContext][schema::kDevice] = device.name;
  result[schema::kContext][schema::kAttention] = attention;
  if (world.is_main() && options.print_config) {
    std::printf("%s", format_table(config).c_str());
    const std::string on_this_rank =
        config.parallel.tp > 1 ? " (each rank holds " + std::to_string(model->parameter_count()) + ": its tp " +
                                     std::to_string(config.parallel.tp) + " slices)"
        : config.parallel.pp > 1 ? " (rank 0 holds " + std::to_string(model->parameter_count()) +
                                       ": its pipeline stage's, schedule " + schedule->id() + ")"
                                 : "";
    std::printf(
        "model: %lld parameters%s, %.3g training FLOPs/token | strategy %s | world %d | %d threads/rank | device %s\n",
        static_cast<long long>(counts.params), on_this_rank.c_str(), counts.flops_per_token, strategy.id().c_str(),
        world.world_size(), threads, device.name.c_str());
    std::fflush(stdout);
  }

  ResultsWriter* writer = progress.writer.get();
  RunTrace trace(config, world, config.instrument.trace && writer);
  std::unique_ptr<TensorBoardWriter> tensorboard;  // instrument.tensorboard: <out>/tensorboard/rank<r>/
  if (config.instrument.tensorboard && writer)
    tensorboard = std::make_unique<TensorBoardWriter>(writer->out_dir() + "/" + schema::kTensorBoardDir + "/rank" +
                                                      std::to_string(world.rank()));
  ProfilerSession profiler_session(config.instrument.nvtx, trace.writer());
  StepProfiler& profiler = StepProfiler::instance();

  RunTotals totals;
  totals.planned_steps = t.steps;
  totals.warmup_steps = t.steps > config.instrument.warmup_steps ? config.instrument.warmup_steps : 0;
  totals.tokens_per_step = static_cast<double>(t.global_batch * config.model.seq_len);
  totals.flops_per_token = counts.flops_per_token;
  totals.peak_tflops = peak.tflops;
  totals.peak_source = peak.source;
  totals.traced = trace.writer() != nullptr;
  totals.dynamic_scaling = config.precision.loss_scale == "dynamic";
  CommRecordLog comm_log;
  LastStep last;
  double cpu_s_at_measure = 0, wall_us_at_measure = 0;
  if (world.is_main() && options.print_steps && (resumed || restart_count() > 0)) {
    const std::string restart = restart_count() > 0 ? "restart " + std::to_string(restart_count()) + ": " : "";
    if (resumed)
      std::printf("%sresumed from %s: %lld of %lld steps done (saved by %s)\n", restart.c_str(), resumed->path.c_str(),
                  static_cast<long long>(first_step), static_cast<long long>(t.steps), resumed->saved_by.c_str());
    else
      std::printf("%sno complete checkpoint to resume from: starting at step 1\n", restart.c_str());
    std::fflush(stdout);
  }
  const auto run_start = std::chrono::steady_clock::now();
  const int64_t last_step = options.stop_after_step > 0 ? std::min(t.steps, options.stop_after_step) : t.steps;
  if (last_step <= first_step)
    throw std::invalid_argument("training: --stop-after " + std::to_string(options.stop_after_step) +
                                " is not after the checkpoint's step " + std::to_string(first_step) +
                                ": nothing to run");
  totals.planned_steps = last_step - first_step;
  for (int64_t step = first_step; step < last_step; ++step) {
    if (step == std::max(first_step, totals.warmup_steps)) {
      cpu_s_at_measure = process_cpu_seconds();
      wall_us_at_measure = lab_clock_us();
    }
    set_fault_step(step + 1);
    progress.step = step + 1;
    profiler.begin_step(step + 1);
    const StepOutcome stepped = train_step(step, config, strategy, world, sampler, layout, *schedule, *plan, device);
    synchronize(device);  // the step ends when the device's queued work has run, not when the host queued it
    profiler.end_step();
    const StepComm comm =
        analyse_step_comm(profiler.spans(), new_records(world, record_cursor), step + 1, profiler.step_end_us());
    StepRecord record =
        step_record(step, stepped, comm, strategy, totals.tokens_per_step, counts.flops_per_token, peak.tflops, device);
    if (trace.writer()) trace.compute(compute_intervals(profiler.spans()));  // untraced steps skip the work
    for (const auto& r : comm.records) {
      trace.collective(r);
      comm_log.add(r);
    }
    if (step + 1 == last_step)
      last = {profiler.spans(), profiler.step_start_us(), profiler.step_end_us(), comm.records};
    record.trace_ms = trace.writer() ? profiler.trace_ms() : 0.0;
    outcome.steps.push_back(record);
    if (writer) {
      const nlohmann::json line = step_json(record, totals.dynamic_scaling);
      writer->append_step(line);
      if (tensorboard) write_tensorboard_step(*tensorboard, line);
    }
    if (world.is_main() && options.print_steps &&
        ((step + 1) % config.instrument.log_every == 0 || step + 1 == last_step)) {
      std::printf("%s\n", format_step_line(record, t.steps).c_str());
      std::fflush(stdout);
    }
    if (options.after_step) options.after_step(step + 1, strategy);
    if (saver && saver->due(step + 1, last_step)) save_checkpoint(*saver, step + 1, strategy, world, options);
    inject_fault("step_end", world.rank());
  }
  if (saver) saver->finish();
  totals.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  totals.cpu_util_pct =
      100.0 * (process_cpu_seconds() - cpu_s_at_measure) / std::max(1e-9, (lab_clock_us() - wall_us_at_measure) / 1e6);
  totals.phase_clock = profiler.phase_clock();

  add_run_results(result, outcome.steps, totals, comm_log, first_training_seq, strategy, world);
  if (resumed || saver || restart_count() > 0) result[schema::kCheckpoints] = checkpoints_json(resumed, saver.get());
  if (options.predict) result[schema::kPrediction] = options.predict(config, world.rank());
  if (writer) {
    if (!outcome.steps.empty())
      write_file_atomic(
          writer->rank_dir() + "/" + schema::kTimelineFile,
          step_timeline(world.rank(), outcome.steps.back().step, last.start_us, last.end_us, last.spans, last.records)
              .dump(1));
    trace.finish(writer->rank_dir() + "/" + schema::kTraceFile);
    if (!world.is_main())
      write_file_atomic(writer->rank_dir() + "/" + schema::kCommRecordsFile,
                        nlohmann::json{{schema::kRank, world.rank()},
                                       {schema::kRecords, comm_log.records()},
                                       {schema::kRecordsTruncated, comm_log.truncated()}}
                            .dump(1));
  }
  if (writer && world.is_main()) writer->write_result(result);
  outcome.result = std::move(result);
}

}  // namespace

TrainOutcome train(const Config& config, Strategy& strategy, World& world, const DeviceMesh& mesh,
                   const TrainOptions& options) {
  const TrainDevice device = resolve_train_device(config.train.device, world.local_rank());
  if (!config.model.trainable && !device.cuda())
    throw std::invalid_argument("model.preset=" + config.model.preset +
                                " is a prediction-only shape on a CPU (too large for this machine); use `dtlab "
                                "predict`, a trainable preset (tiny | small | medium), or train.device=cuda on a GPU");
  validate_fault_injection();    // a malformed DTLAB_INJECT_* fails before any work
  install_counting_allocator();  // before the model exists, so every tensor of the run is counted
  // The cap before the model exists: its own tensors count against it, as on a GPU.
  set_cpu_tensor_memory_limit(injected_memory_limit(world.rank()).value_or(memory_limit_bytes(config.memory)));
  TrainOutcome outcome;
  RunProgress progress;
  OomAgreement oom(world.board(), world.rank(), world.world_size(),
                   [&strategy, &world, &progress] { return memory_now(strategy, world, progress); });
  oom.listen();
  if (!options.out_dir.empty()) progress.writer = std::make_unique<ResultsWriter>(options.out_dir, world.rank());
  try {
    run_training(config, strategy, world, mesh, options, device, outcome, progress);
  } catch (const std::exception& e) {
    const std::optional<RefusedAllocation> refused = refused_allocation();
    if (!refused) throw;
    stop_out_of_memory(config, strategy, world, options, *refused, outcome, progress, oom);
  }
  return outcome;
}

}  // namespace dtlab
