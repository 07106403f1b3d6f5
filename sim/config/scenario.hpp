#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "models/model.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/platform.hpp"
#include "strategies/spec.hpp"
#include "sim/faults/faults.hpp"

namespace dtsim::config {

enum class Backend { SimGrid, Analytical };

// A published measurement the scenario reproduces, for `dtsim validate`.
struct Reference {
  std::string source;
  double step_time_s = 0, tflops_per_gpu = 0, flops_per_step = 0;
  // For `validate --suite`: the group the row's error is summarised in (a stack, a paper), the
  // error it may have and still pass, and the set of rows whose order is compared (Kendall's tau).
  std::string group, ranking;
  double tolerance_percent = 10;
  // A published memory peak and which reading it is: what PyTorch's allocator counts
  // ("allocated"), what it holds ("reserved") or what nvidia-smi shows ("device"). 0: none.
  double peak_memory_bytes = 0;
  std::string memory_reading = "allocated";
};

// TensorFlow's cluster roles beside the workers (cluster.roles). The chief is worker 0 and also
// saves a checkpoint every `checkpoint_every_steps` steps: `checkpoint_bytes` (0: its weights and
// optimizer state, as the memory plan counts them) written to storage at `storage_bandwidth`.
// Synchronous training waits for each save. An evaluator (its own machine) reads every
// checkpoint back; when it shares the storage, a save that finds it still reading waits.
struct Roles {
  bool chief = false;
  int checkpoint_every_steps = 0;
  double checkpoint_bytes = 0, storage_bandwidth = 0;
  bool evaluator = false, evaluator_shares_storage = true;
};

struct Scenario {
  std::string name, description, file;
  std::string model_preset, cluster_preset;  // empty when inline
  models::ModelSpec model;
  cost::DeviceProfile device;
  double reserved_bytes = 0;  // CUDA context, library workspaces, allocator slack
  network::ClusterSpec cluster;
  Roles roles;
  strategies::ParallelismSpec parallelism;
  strategies::TrainingSpec training;
  strategies::HostSpec host;
  std::uint64_t seed = 1;
  Backend backend = Backend::SimGrid;
  std::optional<Reference> reference;
  faults::FaultSpec faults;
  faults::StragglerSpec stragglers;
  int steps_simulated = 1;  // simulation.steps
  std::int64_t steps = 0;  // training.steps: a whole run, for time to train
  double tokens = 0;       // training.tokens when the run was given in tokens (steps then rounds up)
  double price_per_gpu_hour_usd = 0;  // training.price_per_gpu_hour_usd; 0: the device's
  // training.deadline_days / budget_usd: the plan says how likely the run is to finish by the
  // deadline or under the budget (results/ranges.hpp). 0: not asked.
  double deadline_days = 0, budget_usd = 0;
};

// Reads and validates a scenario (SPEC.md). Throws InputError naming file and JSON pointer.
Scenario load_scenario(const std::string& path);

// A model preset from models/presets/NAME.json, as a scenario's {"preset": NAME} would load it.
models::ModelSpec load_model_preset(const std::string& name);

// A device profile from hardware_profiles/NAME.json.
cost::DeviceProfile load_device_profile(const std::string& name);
// A device profile file as written (the presets' schema), e.g. a user's own (hardware.device "./p40.json").
cost::DeviceProfile load_device_profile_file(const std::string& file);

// The dtype whose matrix peak the precision runs at.
std::string compute_dtype(strategies::Precision p);

}  // namespace dtsim::config
