#include "sim/config/scenario.hpp"
#include "strategies/settings.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "sim/config/cluster_config.hpp"
#include "sim/config/merge.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/parallelism_config.hpp"
#include "sim/config/stragglers.hpp"
#include "sim/config/framework_config.hpp"
#include "sim/config/scenario_text.hpp"
#include "sim/config/stack_config.hpp"
#include "sim/config/tensor_fusion_inputs.hpp"
#include "sim/config/training_config.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::config {

using units::Dimension;

models::ModelSpec load_model_preset(const std::string& name) {
  Document doc;
  doc.origins = std::make_shared<Origins>();
  doc.origins->default_file = "--model";
  doc.json = Json{{"model", Json{{"preset", name}}}};
  const std::string preset = expand_preset(doc, "model", "models/presets", "model");
  Reader root(doc.json, "", doc.origins);
  return parse_model(root.object("model"), preset, doc.origins);
}

namespace {
// A published measurement of the scenario (dtsim validate), with what `validate --suite`
// summarises it under.
Reference parse_reference(Reader& ref) {
  Reference r;
  r.source = ref.text("source");
  r.step_time_s = ref.number_in("step_time_s", Dimension::Time, 1.0, Range{0.0, 1e9, true});
  // A paper gives its throughput; a step we timed ourselves has none to quote (0: none).
  r.tflops_per_gpu = ref.number("tflops_per_gpu", Range{0.0, 1e6, true}, 0.0);
  r.flops_per_step = ref.number("flops_per_step", Range{0.0, 1e30, true}, 0.0);
  r.group = ref.text("group", "");
  r.ranking = ref.text("ranking", "");
  r.tolerance_percent = ref.number("tolerance_percent", Range{0.0, 1000.0, true}, 10.0);
  const auto peak = ref.optional_quantity("peak_memory", Dimension::Bytes, Range{0.0, 1e18, true});
  r.peak_memory_bytes = peak.value_or(0.0);
  r.memory_reading = ref.choice("memory_reading", {"allocated", "reserved", "device"}, "allocated");
  if (ref.has("memory_reading") && !peak)
    ref.fail("memory_reading", "says which reading peak_memory is: give peak_memory (e.g. peak_memory_gib) too");
  ref.finish();
  return r;
}
// hardware: the device profile, its reserved memory and the host beside it.
void parse_hardware(Reader& root, const Document& doc, const std::string& cluster_preset, Scenario& s) {
  // A cluster preset is the machines' network, not their GPU model: say so where it is missed.
  const std::string no_device =
      cluster_preset.empty() ? "required key is missing"
                             : fmt::format("required key is missing: cluster.preset \"{}\" sets the cluster, not the device; "
                                           "give hardware.device (dtsim list devices)", cluster_preset);
  if (!root.has("hardware")) root.fail("hardware", no_device);
  Reader hw = root.object("hardware");
  if (!hw.has("device")) hw.fail("device", no_device);
  std::string device = hw.text("device");
  try {
    s.device = names_a_file(device) ? load_device_profile_file(resolve_named_file(doc, "/hardware/device", device, "hardware_profiles"))
                                    : load_device_profile(device);
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;
    hw.fail("device", e.reason());
  }
  s.reserved_bytes = hw.quantity("reserved", Dimension::Bytes, Range{0.0, 1e15}, 1.0 * units::kGiB);
  // Host memory bandwidth a node's CPUs reach, shared by its GPUs' offloaded optimizers.
  const double host_bw = hw.quantity("host_memory_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true}, 200e9);
  s.host.memory_bandwidth_per_gpu = host_bw / s.cluster.gpus_per_node;
  s.host.pcie_bandwidth = s.device.pcie_bandwidth;
  s.cluster.host_memory_bandwidth = host_bw;
  s.cluster.pcie_bandwidth = s.device.pcie_bandwidth;
  // The host side of offload, per node: memory (DGX A100: 1 TB, NVIDIA DGX A100 datasheet), CPU
  // cores (2x 64-core AMD EPYC 7742) and each core's fp32 rate (2.25 GHz x 2 AVX2 FMA units x 8
  // lanes x 2 = 72 GFLOP/s, AMD EPYC 7742 product page / Zen 2 microarchitecture).
  s.host.memory_bytes_per_node = hw.quantity("host_memory", Dimension::Bytes, Range{0.0, 1e16, true}, 1e12);
  const double cores = static_cast<double>(hw.integer("host_cores", 1, 100000, 128));
  s.host.cores_per_gpu = cores / s.cluster.gpus_per_node;
  s.host.core_flops = hw.quantity("host_core", Dimension::FlopRate, Range{0.0, 1e15, true}, 72e9);
  hw.finish();
}

// Keys of different sections that refuse each other.
void refuse_unmodelled_pairs(const Scenario& s) {
  if (s.parallelism.framework.fp8_all_gather && s.training.precision != strategies::Precision::Fp8)
    throw InputError(s.file, "/parallelism/zero3/fp8_all_gather",
                     "gathers the FP8 GEMMs' weights in FP8: it needs training.precision \"fp8\"");
  if (s.parallelism.moe_fp8_dispatch && s.training.precision != strategies::Precision::Fp8)
    throw InputError(s.file, "/parallelism/moe_dispatch_dtype",
                     "\"fp8\" sends the experts' FP8 GEMM inputs as they are quantized: it needs training.precision \"fp8\"");
  if (s.parallelism.context > 1 && s.training.attention != models::Attention::Flash)
    throw InputError(s.file, "/parallelism/context",
                     "context parallelism runs on fused attention (Transformer Engine's, as Megatron-Core does): set "
                     "training.attention to \"flash\"");
  if (s.roles.chief) {
    const auto& p = s.parallelism;
    if (p.updates != strategies::Updates::Sync)
      throw InputError(s.file, "/cluster/roles/chief", "the chief's checkpoints are modelled for synchronous updates");
    if (s.roles.checkpoint_bytes == 0 && (p.tensor > 1 || p.pipeline > 1 || p.zero_stage > 0))
      throw InputError(s.file, "/cluster/roles/chief",
                       "with the model state sharded (tensor, pipeline or ZeRO), give checkpoint_GB: the chief's "
                       "own state is not the whole checkpoint");
  }
}

void parse_straggler_section(Reader& st, Scenario& s, const std::shared_ptr<Origins>& origins) {
  // The skewed router's most loaded GPU is stood for by another replica's GPU (plan_experts.cpp),
  // which every replica simulated leaves no room for.
  if (s.parallelism.expert > 1 && s.parallelism.expert_skew > 0)
    throw InputError(s.file, "/stragglers", "stragglers with expert parallelism are modelled with an even router: leave expert_skew at 0");
  // Every replica's tasks join its expert-parallel group by data rank; a folded group spans tensor ranks too.
  if (s.parallelism.expert > 1 && s.parallelism.expert_tensor_size() != s.parallelism.tensor)
    throw InputError(s.file, "/stragglers", "stragglers with folded expert parallelism (expert_tensor other than tensor) are not modelled");
  if (s.parallelism.expert > 1 && s.parallelism.context > 1)
    throw InputError(s.file, "/stragglers", "stragglers with expert parallelism over context ranks are not modelled");
  parse_stragglers(st, s, origins);
}

void parse_faults(Reader& f, Scenario& s) {
  auto& fs = s.faults;
  fs.enabled = true;
  fs.gpu_mtbf_s = f.quantity("gpu_mtbf", Dimension::Time, Range{0.0, 1e13, true}, 0.0);
  fs.node_mtbf_s = f.quantity("node_mtbf", Dimension::Time, Range{0.0, 1e13, true}, 0.0);
  if (fs.gpu_mtbf_s == 0 && fs.node_mtbf_s == 0) f.fail_here("give gpu_mtbf_hours or node_mtbf_hours");
  fs.checkpoint_interval_s = f.quantity("checkpoint_interval", Dimension::Time, Range{0.0, 1e9, true}, 0.0);
  fs.checkpoint_save_s = f.quantity("checkpoint_save", Dimension::Time, Range{0.0, 1e6});
  fs.restart_s = f.quantity("restart", Dimension::Time, Range{0.0, 1e6});
  f.finish();
}

void parse_input_pipeline(Reader& in, Scenario& s) {
  auto& ip = s.parallelism.input;
  ip.enabled = true;
  ip.cpu_seconds_per_sample = in.quantity("cpu_per_sample", Dimension::Time, Range{0.0, 3600.0}, 0.0);
  ip.workers_per_gpu = static_cast<int>(in.integer("loader_workers_per_gpu", 1, 1024, 1));
  ip.sample_bytes = in.quantity("sample", Dimension::Bytes, Range{0.0, 1e12}, 0.0);
  const double storage = in.quantity("storage_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true}, 1e15);
  ip.storage_bandwidth_per_gpu = storage / s.cluster.gpus_per_node;  // per node, shared by its GPUs
  in.finish();
  // Unless simulation.steps says: the first step waits for its first micro-batch from empty
  // loaders, later ones for what the loaders keep up with.
  s.steps_simulated = std::max(s.steps_simulated, 4);
}

void parse_simulation(Reader& sim, Scenario& s) {
  s.seed = static_cast<std::uint64_t>(sim.integer("seed", 0, (std::int64_t{1} << 53), 1));
  s.backend = sim.choice("backend", {"simgrid", "analytical"}, "simgrid") == "analytical" ? Backend::Analytical
                                                                                        : Backend::SimGrid;
  s.steps_simulated = static_cast<int>(sim.integer("steps", 1, 100000, s.steps_simulated));
  if (s.parallelism.updates != strategies::Updates::Sync && s.steps_simulated < 2)
    sim.fail("steps", "asynchronous updates are measured over several steps: give 2 or more");
  if (s.parallelism.priority_buckets && s.steps_simulated < 2)
    sim.fail("steps", "priority order overlaps one step's updates with the next forward: give 2 or more");
  if ((!s.stragglers.throttles.empty() || !s.stragglers.flapping_links.empty()) && s.backend == Backend::Analytical)
    sim.fail("backend", "throttled periods and flapping links change over time: only the simgrid backend replays them");
  sim.finish();
}

// SimGrid gets a route between every pair of chips of a torus up to 256 chips; beyond, only
// between chips on one line of it, which is all the data-parallel all-reduce uses.
void refuse_large_torus_routes(const Scenario& s) {
  const auto& par = s.parallelism;
  if (s.backend == Backend::SimGrid && !s.cluster.torus_dims.empty() && s.cluster.num_gpus() > 256 &&
      (par.tensor > 1 || par.pipeline > 1 || par.updates != strategies::Updates::Sync))
    throw InputError(s.file, "/simulation/backend",
                     "on a torus of more than 256 chips the simgrid backend routes only data-parallel all-reduces: "
                     "use \"backend\": \"analytical\"");
}

Scenario read_scenario(Document doc, const std::string& path) {
  const std::string model_preset = expand_preset(doc, "model", "models/presets", "model");
  const std::string cluster_preset = expand_preset(doc, "cluster", "hardware_profiles/clusters", "cluster");

  Scenario s;
  s.file = path;
  Reader root(doc.json, "", doc.origins);
  if (root.integer("schema_version", 1, 1, 1) != 1) root.fail("schema_version", "only version 1 is known");
  s.name = root.text("name");
  if (s.name.empty()) root.fail("name", "must not be empty");
  s.description = root.text("description", "");
  s.model_preset = model_preset;
  s.cluster_preset = cluster_preset;
  s.model = parse_model(root.object("model"), model_preset, doc.origins);
  s.cluster = parse_cluster(root.object("cluster"), cluster_preset, s.roles);
  parse_hardware(root, doc, cluster_preset, s);

  parse_parallelism(root.object("parallelism"), s);
  // Unless simulation.steps says: asynchronous updates and priority buckets show over several steps.
  if (s.parallelism.updates != strategies::Updates::Sync) s.steps_simulated = 10;
  if (s.parallelism.priority_buckets) s.steps_simulated = 4;
  // A flush-free pipeline's first step carries its fill; later ones show the steady state.
  if (strategies::asynchronous(s.parallelism.schedule)) s.steps_simulated = 4;
  parse_training(root.object("training"), s);
  parse_stack(root, s);
  refuse_idle_compression(s, *doc.origins);
  refuse_unmodelled_pairs(s);
  if (auto st = root.optional_object("stragglers")) parse_straggler_section(*st, s, doc.origins);
  if (auto f = root.optional_object("faults")) parse_faults(*f, s);
  if (auto in = root.optional_object("input_pipeline")) parse_input_pipeline(*in, s);
  if (auto sim = root.optional_object("simulation")) parse_simulation(*sim, s);
  refuse_large_torus_routes(s);
  if (auto ref = root.optional_object("reference")) s.reference = parse_reference(*ref);
  root.finish();
  price_tensor_fusion(s);  // the strategy, precision and device all read
  return s;
}
}  // namespace

Scenario load_scenario(const std::string& path) { return read_scenario(load_with_extends(path), path); }

Scenario load_scenario_text(const std::string& text, const std::string& name) {
  return read_scenario(load_with_extends_text(text, name), name);
}

}  // namespace dtsim::config
