// profile.hpp: a machine profile — the measured or spec-sheet rates the cost models turn plans into times with
// (torch-free).
//
//   MachineProfile p = load_profile("analysis/profiles/h100_sxm.json");   // throws ProfileError naming file + key
//   save_profile(p, "results/calibration/profile.json");                  // `dtlab calibrate` writes this way
//
// JSON layout (keys marked optional may be absent; every other key is required):
//   {"name": "h100_sxm",
//    "kind": "measured" | "spec-sheet",
//    "source": "dtlab calibrate on <host> ..." | "<datasheet citation>",
//    "device": "cpu" | "H100 SXM" | ...,
//    "compute": {"matmul_tflops": {"float32": .., "bfloat16": .., "float16": ..},   // dense GEMM rate per rank
//                "train_efficiency": 0.45,      // a training step's FLOP rate over the matmul rate, (0, 4]:
//                                               //   above 1 where the step beats the GEMMs (bf16 held to AVX2)
//                "train_efficiency_by_dtype": {"bfloat16": 0.2},  // optional: per dtype, wins for that dtype
//                "train_efficiency_by_width": {"float32": {"128": 0.4, "256": 0.6}},  // optional: per dtype and width
//                "gemm_overhead_us": {"bfloat16": 900},  // optional: fixed time per linear layer per micro-step
//                                               //   (forward + backward), by dtype; absent = 0 (compute_model.hpp)
//                "memory_GBps": 3350,           // per rank, for optimizer and elementwise passes
//                "threads": 1,                  // optional: CPU threads per rank the rates were measured with
//                "cores": 2,                    // optional: cores per node (CPU: ranks share them)
//                "ranks": 2},                   // optional: processes that shared those cores, each with `threads`
//                                               //   threads, while the rates were measured (dtlab calibrate's ranks)
//    "comm": {"ranks_per_node": 8,
//             "intra_node": <CommModel JSON>,   // analysis/cost/comm_model.hpp
//             "inter_node": <CommModel JSON>,   // optional: groups that span nodes use it when present
//             "measured_world_size": 2,         // optional: the largest group the fit measured (0 = none)
//             "ranks_per_link": 1,              // optional: ranks of a node that share one inter-node link
//                                               //   (1: a NIC per rank, as GPU nodes; the emulated cluster: K)
//             "inter_link_bps": 1e9,            // optional: the link rate inter_node was measured at (bit/s)
//             "intra_link_bps": 0},             // optional: the intra-node rate it was measured at (0 = unshaped)
//    "host_device_GBps": 55,                    // optional: offload copies between host and device memory
//    "notes": ["..."]}                          // optional: assumptions, e.g. stated α values
// matmul_tflops needs at least one dtype; a dtype it lacks falls back to float32's rate (noted in predictions).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/comm_model.hpp"

namespace dtlab::analysis {

struct ProfileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A training step's efficiency is the rate of its FLOPs that grow with the tokens over the matmul rate of its dtype
// (GEMMs at the model's shapes). It may pass 1: not all of a step's FLOPs are such GEMMs (attention's run in other
// kernels), and where those beat the dtype's GEMMs so does the step (with kernels held to AVX2, bf16 and fp16 steps
// at d_model 128 ran 1.35-1.41x their GEMM rate). The loader refuses more: past it the GEMMs did not time the
// kernels the step runs.
inline constexpr double kMaxTrainEfficiency = 4.0;

struct ComputeRates {
  std::map<std::string, double> matmul_tflops;  // key: float32 | bfloat16 | float16
  double train_efficiency = 1.0;                // (0, 4]: training-step FLOP rate / matmul rate
  // Optional, per dtype (float32 | bfloat16 | float16): a training step in that dtype over that dtype's matmul
  // rate. Wins over train_efficiency for its dtype: on CPUs a bf16 GEMM speeds up far more than a bf16 step.
  std::map<std::string, double> train_efficiency_by_dtype;
  // Optional, per dtype, by model width (d_model): the same efficiency measured on models of these widths. Wins over
  // both above for its dtype; between two widths it is interpolated on log2(d_model), outside them the nearest width's
  // holds. `dtlab calibrate` measures the config's width and half of it: on CPUs a narrow model's GEMMs (inner
  // dimension d) run well below a wide one's.
  std::map<std::string, std::map<int64_t, double>> train_efficiency_by_width;
  // Optional, per dtype, >= 0: the time of a micro-step that does not grow with its tokens, per linear layer
  // (forward and backward of it), in µs. `dtlab calibrate` solves it from steps of two micro-batch sizes: on CPUs a
  // small micro-batch's GEMMs run far below the rate of large ones. Absent = 0.
  std::map<std::string, double> gemm_overhead_us;
  double memory_GBps = 0;  // > 0
  int threads = 0;         // 0 = not recorded (GPU profiles): rates are per rank as they are
  int cores = 0;           // 0 = not recorded
  // The processes that loaded the cores while the rates were measured (the rank and its companions); 0 = not recorded.
  // With more threads than cores among them, the rates are a shared core's: compute_model.hpp counts it.
  int ranks = 0;
};

struct CommProfile {
  int ranks_per_node = 1;
  CommModel intra_node;
  std::optional<CommModel> inter_node;
  int measured_world_size = 0;  // 0 = not measured (spec-sheet)
  int ranks_per_link = 1;       // streams of one node's ranks that share an inter-node link (step_model.hpp)
  double inter_link_bps = 0;    // the rate inter_node holds for; 0 = not recorded
  double intra_link_bps = 0;    // the shaped intra-node rate intra_node holds for; 0 = unshaped / not recorded
};

struct MachineProfile {
  std::string name;
  std::string kind;  // measured | spec-sheet
  std::string source;
  std::string device;
  ComputeRates compute;
  CommProfile comm;
  std::optional<double> host_device_GBps;
  std::optional<double> disk_write_GBps;  // where checkpoints are written (analysis/cost/checkpoint_model.hpp)
  std::vector<std::string> notes;
  // Not part of the file: what analysis/cost/topology.hpp changed for the cluster predicted (predict() copies them
  // into its notes, so a prediction says which links it assumed).
  std::vector<std::string> adjustments;

  nlohmann::json to_json() const;
  // `origin` names the file (or "<text>") in error messages; every missing or ill-typed key is named.
  static MachineProfile from_json(const nlohmann::json& j, const std::string& origin);
};

// Reads and validates a profile file. Throws ProfileError "<path>: <key>: <rule>", or "<path>: not valid JSON ..."
// / "<path>: a machine profile must be a JSON object ..., got <type>" for a file that is not one JSON object.
MachineProfile load_profile(const std::string& path);
// Writes the profile as pretty JSON (creates parent directories). Throws ProfileError when it cannot write.
void save_profile(const MachineProfile& profile, const std::string& path);

// The matmul rate for a config dtype name (fp32 | bf16 | fp16) or a comm dtype name (float32 | ...), in
// TFLOP/s per rank; falls back to float32 when the profile lacks the dtype. `fell_back` tells which happened.
double matmul_tflops_for(const MachineProfile& profile, const std::string& dtype, bool* fell_back = nullptr);
// The training efficiency for a config or comm dtype name: train_efficiency_by_dtype's entry, else train_efficiency.
double train_efficiency_for(const MachineProfile& profile, const std::string& dtype);
// The same for a model of width d_model: train_efficiency_by_width's entries for the dtype when it has them
// (interpolated on log2(d_model) between the two nearest widths, the nearest one's outside them), else the above.
double train_efficiency_for(const MachineProfile& profile, const std::string& dtype, int64_t d_model);
// The per-linear-layer micro-step overhead for a config or comm dtype name (µs): gemm_overhead_us's entry, else 0.
double gemm_overhead_us_for(const MachineProfile& profile, const std::string& dtype);

}  // namespace dtlab::analysis
