// pipeline_step.cpp: running a pipeline schedule's actions on this rank (see pipeline_step.hpp).
#include "lab/train/pipeline_step.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <torch/csrc/autograd/autograd.h>

#include "lab/comm/comm.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/train/pipeline_plan.hpp"
#include "lab/train/strategy.hpp"
#include "lab/weight_grad_store.hpp"

namespace dtlab {
namespace {

// What one chunk's forward of one micro-batch leaves for its backward (and W).
struct InFlight {
  at::Tensor input;   // received activation (requires grad), or the tokens on virtual stage 0
  at::Tensor output;  // the chunk's output; the weighted loss on the last virtual stage
  // zero_bubble: the linears' inputs and output gradients B leaves for W (the rest of the graph goes after B).
  std::unique_ptr<WeightGradStore> weight_grads;
};

// The p2p tag of what enters virtual stage k for micro-batch i: its activation (kind 0) or its output's gradient
// (kind 1). Unique within a step, so sends and receives pair up whatever order two ranks issue them in.
int p2p_tag(int kind, int k, int micro_batch, const PipeShape& shape) {
  const int K = shape.stages * shape.virtual_stages;
  return Comm::kPipelineP2pTagBase + (kind * K + k) * shape.micro_batches + micro_batch;
}

std::string label(char op, const PipeAction& a) {
  return std::string(1, op) + " c" + std::to_string(a.chunk) + "." + std::to_string(a.micro_batch);
}

// This rank's transfers in one step. Receives are posted ahead, for the next kRecvsAhead actions that wait for one,
// together with each action's send (one batch_isend_irecv), so that what the coming actions need arrives while this
// one computes: a Gloo message moves only once its receive is posted. A backend that coalesces a batch into one
// stream-ordered group (NCCL) would hold every later transfer behind a receive posted ahead, which can wait on one
// of them: there each receive is posted when its action comes up. Sends stay alive until finish().
class P2pWindow {
 public:
  static constexpr size_t kRecvsAhead = 2;

  P2pWindow(Comm& pp, const std::vector<PipeAction>& actions, int pp_rank, const PipeShape& shape,
            std::vector<int64_t> buffer_shape, at::TensorOptions buffer_options)
      : depth_(pp.coalesces_p2p() ? 0 : kRecvsAhead),
        pp_(pp),
        actions_(actions),
        pp_rank_(pp_rank),
        shape_(shape),
        buffer_shape_(std::move(buffer_shape)),
        buffer_options_(buffer_options) {}

  // Posts `send` (if any) and the receives that bring the window back to kRecvsAhead, in one batch.
  void post(std::optional<Comm::P2pOp> send) {
    std::vector<Comm::P2pOp> ops;
    if (send) ops.push_back(std::move(*send));
    std::vector<size_t> receiving;
    for (; pending_.size() + receiving.size() < depth_ && next_ < actions_.size(); ++next_) {
      if (actions_[next_].recv_from < 0) continue;
      ops.push_back(recv_op(next_));
      receiving.push_back(next_);
    }
    if (ops.empty()) return;
    std::vector<at::Tensor> tensors;
    for (const Comm::P2pOp& op : ops) tensors.push_back(op.tensor);
    std::vector<CommHandle> handles = pp_.batch_isend_irecv(std::move(ops));
    size_t h = 0;
    if (send) sends_.emplace_back(std::move(handles[h]), tensors[h]), ++h;
    for (size_t index : receiving) pending_.emplace(index, std::make_pair(std::move(handles[h]), tensors[h])), ++h;
  }

  // What action `index` waits for: its receive, posted by an earlier post() (or now, when nothing is posted ahead).
  at::Tensor take(size_t index) {
    if (depth_ == 0) {
      Comm::P2pOp op = recv_op(index);
      at::Tensor buffer = op.tensor;
      pp_.batch_isend_irecv({std::move(op)}).front().wait();
      return buffer;
    }
    const auto it = pending_.find(index);
    if (it == pending_.end())
      throw std::logic_error("pipeline schedule: action " + std::to_string(index) + " on pp rank " +
                             std::to_string(pp_rank_) + " has no receive posted");
    it->second.first.wait();
    at::Tensor buffer = std::move(it->second.second);
    pending_.erase(it);
    return buffer;
  }

  void finish() {
    for (auto& [handle, tensor] : sends_) handle.wait();
    sends_.clear();
  }

 private:
  Comm::P2pOp recv_op(size_t index) const {
    const PipeAction& a = actions_[index];
    const bool forward = a.op == PipeOp::forward;
    return {.kind = Comm::P2pOp::Kind::recv,
            .tensor = at::empty(buffer_shape_, buffer_options_),
            .peer = a.recv_from,
            .p2p_tag = p2p_tag(forward ? 0 : 1, a.chunk * shape_.stages + pp_rank_, a.micro_batch, shape_),
            .tag = forward ? "pp.activation" : "pp.gradient"};
  }

  size_t depth_;  // receives posted ahead
  Comm& pp_;
  const std::vector<PipeAction>& actions_;
  int pp_rank_;
  PipeShape shape_;
  std::vector<int64_t> buffer_shape_;
  at::TensorOptions buffer_options_;
  size_t next_ = 0;                                              // the first action not yet looked at for a receive
  std::map<size_t, std::pair<CommHandle, at::Tensor>> pending_;  // action index -> its posted receive
  std::vector<std::pair<CommHandle, at::Tensor>> sends_;         // each tensor lives until its send is done
};

// Chunk `chunk`'s model units on x, with the strategy's hooks around each of its groups when it hands them in.
at::Tensor run_chunk(const PipelineAccess& access, ModelRunner& runner, const std::vector<int>& units, int chunk,
                     at::Tensor x) {
  if (access.chunk_groups.empty()) {
    for (int m : units) x = runner.run_unit(m, x);
    return x;
  }
  const UnitGroups& groups = access.chunk_groups.at(static_cast<size_t>(chunk));
  for (size_t g = 0; g < groups.units.size(); ++g) {
    if (groups.before) groups.before(g);
    for (int m : groups.units[g]) x = runner.run_unit(m, x);
    if (groups.after) groups.after(g, x);
  }
  return x;
}

// The strategy's hook before or after an action, if it has one.
void around(const std::function<void(PipeOp, int)>& hook, const PipeAction& a) {
  if (hook) hook(a.op, a.chunk);
}

Comm::P2pOp send_op(at::Tensor tensor, int to, int tag, std::string name) {
  return {
      .kind = Comm::P2pOp::Kind::send, .tensor = std::move(tensor), .peer = to, .p2p_tag = tag, .tag = std::move(name)};
}

}  // namespace

PipelineStepSchedule::PipelineStepSchedule(const Config& config, int64_t micro_batches, MeshComms& comms)
    : StepSchedule(micro_batches), config_(config) {
  const std::optional<PipeSchedule> schedule = parse_pipe_schedule(config.parallel.pp_schedule);
  if (!schedule) throw std::invalid_argument("parallel.pp_schedule=" + config.parallel.pp_schedule + " is unknown");
  schedule_ = *schedule;
  shape_ = {.stages = static_cast<int>(config.parallel.pp),
            .micro_batches = static_cast<int>(micro_batches),
            .virtual_stages = static_cast<int>(config.parallel.pp_virtual_stages)};
  pp_ = &comms.comm({MeshDim::pp});
  pp_rank_ = pp_->rank();
  actions_ = pipe_program(schedule_, shape_)[static_cast<size_t>(pp_rank_)];
  chunk_units_ = pipeline_chunk_units(config, pp_rank_);
}

double PipelineStepSchedule::run(int64_t step, double loss_weight, const MicroBatchSource& batches,
                                 Strategy& strategy) {
  const std::optional<PipelineAccess> access = strategy.pipeline_access();
  if (!access)
    throw std::logic_error("pipeline schedule: strategy " + strategy.id() +
                           " cannot run under a pipeline (config validation should have refused it)");
  GPT& model = *access->model;
  ModelRunner runner(access->model, config_.parallel);
  const int P = shape_.stages, K = P * shape_.virtual_stages;
  const bool split_backward = schedule_ == PipeSchedule::zero_bubble;
  const at::TensorOptions activation_options = model.parameters().front().tensor->options().requires_grad(false);
  // What crosses a stage boundary: the residual stream, whole on every tp rank, or 1/tp of the sequence on each
  // under sequence parallelism (each tp rank sends its part to the same tp rank of the next stage).
  const int64_t sequence_part = config_.parallel.sequence_parallel ? config_.parallel.tp : 1;
  const std::vector<int64_t> activation_shape = {config_.train.micro_batch, config_.model.seq_len / sequence_part,
                                                 config_.model.d_model};

  MemoryScope activations(MemoryCategory::activations);
  std::map<std::pair<int, int>, InFlight> in_flight;  // (chunk, micro-batch) -> tensors
  P2pWindow p2p(*pp_, actions_, pp_rank_, shape_, activation_shape, activation_options);
  p2p.post(std::nullopt);  // the first receives
  // B's output: the gradient of the chunk's input, for the previous virtual stage (none on virtual stage 0).
  const auto send_gradient = [&](const InFlight& slot, const PipeAction& a, int k,
                                 int mb) -> std::optional<Comm::P2pOp> {
    if (k == 0) return std::nullopt;
    return send_op(slot.input.grad(), a.send_to, p2p_tag(1, k - 1, mb, shape_), "pp.gradient");
  };
  double local_loss = 0.0;
  for (size_t index = 0; index < actions_.size(); ++index) {
    const PipeAction& a = actions_[index];
    const int k = a.chunk * P + pp_rank_, mb = a.micro_batch;
    around(access->before_action, a);
    if (a.op == PipeOp::forward) {
      InFlight slot;
      std::optional<Batch> batch;
      if (k == 0 || k == K - 1) batch = batches(step, mb);
      if (k == 0) {
        slot.input = batch->inputs;
      } else {
        slot.input = p2p.take(index).requires_grad_(true);
      }
      {
        ScopedPhase forward(Phase::forward, "forward-compute " + label('F', a));
        std::optional<WeightGradCapture> capture;
        if (split_backward) capture.emplace(*(slot.weight_grads = std::make_unique<WeightGradStore>()));
        const at::Tensor x =
            run_chunk(*access, runner, chunk_units_[static_cast<size_t>(a.chunk)], a.chunk, slot.input);
        slot.output = k == K - 1 ? model.loss(x, batch->targets) * loss_weight : x;
      }
      if (k == K - 1) {
        local_loss += slot.output.item<double>();
        p2p.post(std::nullopt);
      } else {
        p2p.post(send_op(slot.output.detach(), a.send_to, p2p_tag(0, k + 1, mb, shape_), "pp.activation"));
      }
      in_flight.emplace(std::make_pair(a.chunk, mb), std::move(slot));
      around(access->after_action, a);
      continue;
    }
    const auto it = in_flight.find({a.chunk, mb});
    if (it == in_flight.end())
      throw std::logic_error("pipeline schedule: " + label(pipe_op_letter(a.op), a) + " before its forward");
    InFlight& slot = it->second;
    if (a.op == PipeOp::backward) {
      at::Tensor grad = k == K - 1 ? at::full({}, access->loss_factor, slot.output.options()) : p2p.take(index);
      if (mb == 1 && mutation("drop_micro_batch_grad")) grad = at::zeros_like(grad);  // the deliberate bug
      {
        // The activations' gradients (and the norms' and embedding's weights'); under zero bubble the linears file
        // theirs for W. The graph is retained then only for the weights' own casts or views, which W
        // backpropagates through; dropping the output and input below frees the rest of it.
        ScopedPhase backward(Phase::backward, "backward-compute " + label('B', a));
        torch::autograd::backward({slot.output}, {grad}, /*retain_graph=*/split_backward);
      }
      p2p.post(send_gradient(slot, a, k, mb));
      if (split_backward)
        slot.output = at::Tensor(), slot.input = at::Tensor();
      else
        in_flight.erase(it);
      around(access->after_action, a);  // outside the compute span: a strategy's collectives are not compute
      continue;
    }
    {
      ScopedPhase weight(Phase::backward, "backward-compute " + label('W', a));
      if (!mutation("skip_weight_pass")) slot.weight_grads->apply();  // the deliberate bug: W never runs
    }
    in_flight.erase(it);
    around(access->after_action, a);
    p2p.post(std::nullopt);
  }
  p2p.finish();
  if (!in_flight.empty())
    throw std::logic_error("pipeline schedule: " + std::to_string(in_flight.size()) +
                           " micro-batch chunks never ran their backward on pp rank " + std::to_string(pp_rank_));
  at::Tensor sum = at::full({1}, local_loss, at::kDouble);
  pp_->all_reduce(sum, "pp.loss").wait();
  return sum.item<double>();
}

}  // namespace dtlab
