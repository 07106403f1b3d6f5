#include "sim/results/result.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/cost/stack.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "strategies/settings.hpp"
#include "strategies/unit.hpp"

#include <cmath>
#include <cstdint>

namespace dtsim::results {

namespace {
std::uint64_t whole_bytes(double b) { return static_cast<std::uint64_t>(std::llround(b)); }

// How gradients cross the network: compression, the algorithm configured and, where `auto` or
// NCCL chose another, what the buckets ran as.
void add_gradient_sync(nlohmann::ordered_json& par, const Result& r) {
  const auto& p = r.scenario_spec.parallelism;
  par["gradient_compression"] = strategies::to_string(p.compression);
  if (p.compression == strategies::Compression::TopK) par["topk_ratio"] = p.topk_ratio;
  const std::string configured = network::algorithm_name(p.algorithm);
  par["all_reduce_algorithm"] = configured;
  const auto& ran = r.gradient_sync_runs_as;
  if (ran.empty() || (ran.size() == 1 && ran.begin()->first == configured)) return;
  nlohmann::ordered_json as = nlohmann::ordered_json::object();
  for (const auto& [how, buckets] : ran) as[how] = buckets;
  par["gradient_buckets_ran_as"] = as;
}


// Step time, throughput, FLOPs and the step's breakdown (when timed).
void add_step(nlohmann::ordered_json& j, const Result& r) {
  if (r.timed) {
    j["step_time_s"] = r.step_time_s;
    j["throughput"] = {{"samples_per_s", r.samples_per_s}};
    if (r.scenario_spec.model.tokens_per_sample() > 0) j["throughput"]["tokens_per_s"] = r.tokens_per_s;  // images have none
  }
  j["flops"] = {{"model_flops_per_step", r.model_flops}, {"hardware_flops_per_step", r.hardware_flops}};
  if (r.timed) {
    j["flops"]["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
    j["flops"]["mfu"] = r.mfu;
    j["flops"]["hfu"] = r.hfu;
    j["breakdown_s"] = {{"compute", r.breakdown.compute},
                        {"exposed_communication", r.breakdown.exposed_communication},
                        {"pipeline_bubble", r.breakdown.pipeline_bubble},
                        {"stage_imbalance", r.breakdown.stage_imbalance},
                        {"optimizer", r.breakdown.optimizer},
                        {"straggler_wait", r.breakdown.straggler_wait},
                        {"input_stall", r.breakdown.input_stall}};
    if (r.roles) j["breakdown_s"]["checkpoint"] = r.breakdown.checkpoint;
    if (r.shows_interference()) j["breakdown_s"]["comm_interference"] = r.breakdown.comm_interference;
  }
}

// What PyTorch and nvidia-smi read, only where the stack names an allocator, so that other
// results keep their bytes (docs/memory.md).
void allocator_peaks(const Result& r, nlohmann::ordered_json& memory) {
  const auto& s = r.scenario_spec;
  const auto a = s.training.memory.allocator;
  if (a == strategies::Allocator::None) return;
  const double allocated = r.memory.peak() - s.reserved_bytes;
  memory["allocator"] = strategies::to_string(a);
  memory["allocated_peak_bytes"] = whole_bytes(allocated);                     // torch.cuda.max_memory_allocated
  memory["reserved_peak_bytes"] = whole_bytes(allocated + r.allocator_slack);  // torch.cuda.max_memory_reserved
  memory["device_peak_bytes"] = whole_bytes(r.device_peak());                   // nvidia-smi: the CUDA context too
}

// One GPU's memory, and host memory as a tier of its own.
void add_memory(nlohmann::ordered_json& j, const Result& r) {
  const auto& s = r.scenario_spec;
  j["memory"] = {{"worst_rank", r.worst_rank},
                 {"params_bytes", whole_bytes(r.memory.params)},
                 {"gradients_bytes", whole_bytes(r.memory.gradients)},
                 {"optimizer_bytes", whole_bytes(r.memory.optimizer)},
                 {"activations_bytes", whole_bytes(r.memory.activations)},
                 {"other_bytes", whole_bytes(r.memory.other)},
                 {"peak_bytes", whole_bytes(r.memory.peak())},
                 {"capacity_bytes", whole_bytes(r.capacity_bytes)},
                 {"fits", r.fits}};
  if (!r.fits) j["memory"]["shortfall_bytes"] = whole_bytes(r.device_peak() - r.capacity_bytes);
  allocator_peaks(r, j["memory"]);
  // Host memory as a tier of its own, per node (offload); absent when nothing lives there.
  if (r.plan.host_bytes() > 0 || r.plan.pcie_bytes_per_step > 0) {
    const int per_node = s.cluster.gpus_per_node;
    const double node = r.plan.host_bytes() * per_node;
    j["host_memory"] = {{"optimizer_bytes_per_gpu", whole_bytes(r.plan.host_optimizer_bytes)},
                        {"gradients_bytes_per_gpu", whole_bytes(r.plan.host_gradient_bytes)},
                        {"activations_bytes_per_gpu", whole_bytes(r.plan.host_activation_bytes)},
                        {"bytes_per_node", whole_bytes(node)},
                        {"capacity_bytes_per_node", whole_bytes(s.host.memory_bytes_per_node)},
                        {"fits", node <= s.host.memory_bytes_per_node},
                        {"pcie_bytes_per_gpu_per_step", whole_bytes(r.plan.pcie_bytes_per_step)}};
  }
}

// What several steps, asynchronous updates, the chief's checkpoints and failures add.
void add_step_reports(nlohmann::ordered_json& j, const Result& r) {
  const auto& s = r.scenario_spec;
  if (r.steps) {
    const auto& st = *r.steps;
    nlohmann::ordered_json crit = nlohmann::ordered_json::array();
    for (const auto& [gpu, n] : st.critical) crit.push_back({{"gpu", gpu}, {"steps", n}});
    j["stragglers"] = {{"steps", st.step_times.size()},  {"step_time_mean_s", st.mean}, {"step_time_p50_s", st.p50},
                       {"step_time_p99_s", st.p99},       {"step_time_max_s", st.max},   {"critical_gpus", crit},
                       {"sync_wait_mean_s", st.mean_wait_s}, {"sync_wait_max_s", st.max_wait_s},
                       {"sync_wait_max_gpu", st.max_wait_gpu}};
  }
  if (r.async) {
    const auto& a = *r.async;
    const auto& p = s.parallelism;
    j["async"] = {{"updates", strategies::to_string(p.updates)},
                  {"staleness_bound", p.staleness_bound >= 0 ? nlohmann::ordered_json(p.staleness_bound) : nlohmann::ordered_json()},
                  {"easgd_period", p.easgd_period},
                  {"updates_applied", a.updates},
                  {"window_s", a.window_s},
                  {"samples_per_s", a.samples_per_s},
                  {"staleness_mean", a.staleness_mean},
                  {"staleness_p50", a.staleness_p50},
                  {"staleness_p99", a.staleness_p99},
                  {"staleness_max", a.staleness_max}};
  }
  if (r.roles) {
    const auto& ro = *r.roles;
    j["roles"] = {{"chief", {{"checkpoint_bytes", whole_bytes(ro.checkpoint_bytes)},
                             {"checkpoint_every_steps", ro.every_steps},
                             {"save_s", ro.save_s},
                             {"stall_per_step_s", ro.stall_per_step_s},
                             {"storage_write_GBps", ro.storage_write_GBps}}}};
    if (r.scenario_spec.roles.evaluator)
      j["roles"]["evaluator"] = {{"read_s", ro.evaluator_read_s},
                                 {"shares_storage", r.scenario_spec.roles.evaluator_shares_storage},
                                 {"save_waits_for_read_s", ro.wait_for_storage_s},
                                 {"storage_read_GBps", ro.storage_read_GBps}};
  }
  if (r.faults) {
    const auto& f = *r.faults;
    j["faults"] = {{"system_mtbf_s", f.system_mtbf_s},       {"checkpoint_interval_s", f.interval_s},
                   {"young_interval_s", f.young_interval_s}, {"daly_interval_s", f.daly_interval_s},
                   {"goodput", f.goodput},                   {"goodput_at_daly_interval", f.goodput_at_daly},
                   {"expected_failures", f.expected_failures}, {"ideal_time_to_train_s", f.ideal_time_s},
                   {"expected_time_to_train_s", f.expected_time_s}};
  }
}

// The settings of each unit the strategy used that declares its own (strategies/unit.hpp), as read.
void add_unit_settings(nlohmann::ordered_json& parallelism, const strategies::ParallelismSpec& p) {
  for (const auto& [key, o] : strategies::active_unit_settings(p)) {
    auto& out = parallelism[key];
    out = nlohmann::ordered_json::object();
    for (const auto& [k, v] : o.flags) out[k] = v;
    for (const auto& [k, v] : o.numbers) out[k] = v;
    for (const auto& [k, v] : o.texts) out[k] = v;
  }
}

// The parallelism that ran, with what the planner derived from it.
void add_parallelism(nlohmann::ordered_json& j, const Result& r) {
  const auto& s = r.scenario_spec;
  j["parallelism"] = {{"gpus", r.gpus},
                      {"data", s.parallelism.data},
                      {"tensor", s.parallelism.tensor},
                      {"pipeline", s.parallelism.pipeline},
                      {"micro_batch_size", s.parallelism.micro_batch},
                      {"micro_batches_per_step", r.plan.micro_batches},
                      {"pipeline_schedule", strategies::to_string(s.parallelism.schedule)},
                      {"virtual_stages", s.parallelism.virtual_stages},
                      {"sequence_parallel", s.parallelism.sequence_parallel},
                      {"zero_stage", s.parallelism.zero_stage},
                      {"updates", strategies::to_string(s.parallelism.updates)},
                      {"gradient_buckets", r.plan.gradient_buckets},
                      {"recompute", strategies::to_string(s.parallelism.recompute)}};
  add_gradient_sync(j["parallelism"], r);
  // The framework whose behaviour was modelled, and what ZeRO-3 issued per step on one GPU.
  j["parallelism"]["framework"] = strategies::to_string(s.parallelism.framework.framework);
  if (s.parallelism.zero_stage == 3 && r.plan.zero3_gathers > 0)
    j["parallelism"]["zero3"] = {{"all_gathers_per_step", r.plan.zero3_gathers},
                                 {"reduce_scatters_per_step", r.plan.zero3_reduce_scatters}};
  if (strategies::hybrid_shard(s.parallelism)) j["parallelism"]["shard_size"] = s.parallelism.shard_size;  // HSDP
  if (s.parallelism.overlap_param_gather) j["parallelism"]["overlap_param_gather"] = true;
  if (s.parallelism.activation_offload) j["parallelism"]["activation_offload"] = true;
  if (s.parallelism.recompute_layers > 0) j["parallelism"]["recompute_layers"] = s.parallelism.recompute_layers;
  if (s.parallelism.recompute_every > 0) j["parallelism"]["recompute_every"] = s.parallelism.recompute_every;
  if (s.parallelism.recompute_group > 1) j["parallelism"]["recompute_group"] = s.parallelism.recompute_group;
  if (s.parallelism.recompute == strategies::Recompute::Selective && s.parallelism.recompute_modules)
    j["parallelism"]["recompute_modules"] = strategies::recompute_module_list(s.parallelism.recompute_modules);
  if (s.parallelism.context > 1) {
    j["parallelism"]["context"] = s.parallelism.context;
    j["parallelism"]["context_comm"] = s.parallelism.context_all_gather ? "all_gather" : "p2p";
    j["parallelism"]["context_load_balance"] = s.parallelism.context_load_balance;
  }
  if (s.parallelism.expert > 1) {
    j["parallelism"]["expert"] = s.parallelism.expert;
    j["parallelism"]["expert_data"] = s.parallelism.expert_data();
    if (s.parallelism.expert_tensor > 0) j["parallelism"]["expert_tensor"] = s.parallelism.expert_tensor;
    using O = strategies::ParallelismSpec::MoeOverlap;
    if (const auto o = s.parallelism.moe_a2a_overlap; o != O::None) j["parallelism"]["moe_a2a_overlap"] = o == O::DualPipe ? "dualpipe" : "megatron-1f1b";
    if (s.parallelism.moe_dispatcher == strategies::ParallelismSpec::MoeDispatcher::DeepEp) j["parallelism"]["moe_dispatcher"] = "deepep";
    if (s.parallelism.moe_node_limit > 0) j["parallelism"]["moe_node_limit"] = s.parallelism.moe_node_limit;
    if (s.parallelism.moe_fp8_dispatch) j["parallelism"]["moe_dispatch_dtype"] = "fp8";
    if (s.parallelism.moe_shared_expert_overlap) j["parallelism"]["moe_shared_expert_overlap"] = true;
    j["parallelism"]["expert_skew"] = s.parallelism.expert_skew;
    if (r.timed) {
      j["parallelism"]["all_to_all_s_per_step"] = r.all_to_all_s;
      j["parallelism"]["all_to_all_share"] = r.step_time_s > 0 ? r.all_to_all_s / r.step_time_s : 0.0;
    }
  }
  add_unit_settings(j["parallelism"], s.parallelism);
  if (s.parallelism.pipeline > 1) {
    // Which ranks are neighbours: with one stage both orders are the same.
    j["parallelism"]["placement"] = s.parallelism.pipeline_outer ? "tp-dp-pp" : "tp-pp-dp";
    j["parallelism"]["stage_layers"] = r.plan.stage_layers;
    j["parallelism"]["expected_bubble_fraction"] = strategies::bubble_share(
        s.parallelism.schedule, s.parallelism.pipeline, static_cast<int>(r.plan.micro_batches), s.parallelism.virtual_stages);
    if (strategies::asynchronous(s.parallelism.schedule)) {  // no flush: stashed versions, stale gradients
      j["parallelism"]["weight_versions"] = r.plan.stage_weight_versions;
      j["parallelism"]["weight_staleness_updates"] = r.plan.stage_staleness;
    }
  }
}

// The software stack that ran (docs/stacks.md), each setting as resolved from its preset and
// keys; only where one was named, so that other results keep their bytes.
void add_stack(nlohmann::ordered_json& j, const Result& r) {
  const auto& s = r.scenario_spec;
  const cost::Stack& st = s.device.stack;
  if (st.name == "default" && st.is_default() && s.training.memory == strategies::StackMemory{}) return;
  const auto& m = s.training.memory;
  j["stack"] = {{"preset", st.name},
                {"attention", cost::to_string(st.attention)},
                {"elementwise", cost::to_string(st.elementwise)},
                {"loss", strategies::to_string(st.memory.loss)},
                {"copies", cost::to_string(st.copies)},
                {"norm", cost::to_string(st.norm)},
                {"swiglu", cost::to_string(st.swiglu)},
                {"gemm_shapes", cost::to_string(st.gemm_shapes)},
                {"host_dispatch_us", st.dispatch_s * 1e6},
                {"comm_sms", cost::comm_sms(s.device)},
                {"comm_compute_share", r.comm_share_is_sms ? r.comm_core_share : 0.0},
                {"tp_overlap", cost::to_string(st.tp_overlap)},
                {"gather_copies", s.parallelism.framework.gather_copy_out ? "copy-out" : "none"},
                {"buffers", strategies::to_string(m.buffers)},
                {"fp8_weight_copies", strategies::to_string(m.fp8_weight_copies)},
                {"allocator", strategies::to_string(m.allocator)},
                {"gradients_set_to_none", m.gradients_set_to_none}};
  if (s.parallelism.zero_stage == 3 && s.parallelism.framework.reduce_bytes > 0)
    j["stack"]["zero3_reduce_bytes_per_gradient"] = s.parallelism.framework.reduce_bytes;
  if (st.needs_deepspeed) j["stack"]["zero3_gathers"] = cost::to_string(st.zero3_gathers);
  if (s.parallelism.framework.grad_buffer_bytes > 0)
    j["stack"]["grad_buffer_bytes_per_gradient"] = s.parallelism.framework.grad_buffer_bytes;
  if (st.fusion.on()) {
    j["stack"]["fusion_threshold_bytes"] = st.fusion.threshold_bytes;
    j["stack"]["cycle_time_s"] = st.fusion.cycle_s;
  }
}

// Where compute prices came from, and how the step was simulated.
void add_sources(nlohmann::ordered_json& j, const Result& r) {
  const auto& s = r.scenario_spec;
  j["compute_source"] = {{"measured_share", r.measured_share},
                         {"kernel_table", s.device.kernels ? "measured" : "none"},
                         {"device", s.device.name}};
  if (s.device.kernels && r.timed) {
    // From the table's stored spreads, not a new measurement: result.json stays deterministic.
    // Compute at most moves the step by as much as it moves itself, so the band bounds the step.
    j["compute_source"]["spread"] = r.compute_spread;
    j["compute_source"]["step_time_low_s"] = r.step_time_s * (1.0 - r.compute_spread);
    j["compute_source"]["step_time_high_s"] = r.step_time_s * (1.0 + r.compute_spread);
    j["compute_source"]["launch_overhead_us"] = cost::launch_overhead(s.device, config::compute_dtype(s.training.precision)) * 1e6;
    if (s.device.kernels->noisy) j["compute_source"]["noisy_table"] = true;
  }
  if (r.timed)
    j["simulation"] = {{"backend", r.timeline.backend},
                       {"network_model", r.timeline.network_model},
                       {"tasks", r.plan.graph.tasks.size()},
                       {"flows", r.timeline.flows},
                       {"seed", s.seed}};
  if (r.timed && r.steps) j["simulation"]["steps_replayed"] = r.timeline.steps_replayed;
}

}  // namespace

nlohmann::ordered_json to_json(const Result& r, bool with_wall_time) {
  const auto& s = r.scenario_spec;
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["scenario"] = r.scenario;
  // Only where it is false, so results that fit keep their bytes: every rate, the plan's time and
  // cost below assume memory the GPUs do not have.
  if (!r.fits) j["achievable"] = false;
  add_step(j, r);
  add_memory(j, r);
  j["warnings"] = r.warnings;
  add_step_reports(j, r);
  if (auto plan = plan_json(r); !plan.is_null()) j["plan"] = plan;
  if (r.range) j["range"] = range_json(*r.range);
  j["model"] = {{"name", s.model.name}, {"params", r.params}};
  if (r.active_params < r.params) {  // a mixture of experts
    j["model"]["active_params"] = r.active_params;
    j["model"]["active_params_without_input_embedding"] = r.active_params_without_input_embedding;
  }
  for (const auto& [key, value] : s.model.sizes()) j["model"][key] = value;
  j["training"] = {{"precision", strategies::to_string(s.training.precision)},
                   {"global_batch_size", s.training.global_batch}};
  if (s.training.precision == strategies::Precision::Fp8) j["training"]["fp8_recipe"] = strategies::to_string(s.training.fp8_scaling);
  add_parallelism(j, r);
  add_stack(j, r);
  add_sources(j, r);
  // Not the scenario's path: spelled another way it would change the bytes of result.json.
  j["provenance"] = {{"dtsim_version", DTSIM_VERSION}};
  if (with_wall_time) j["provenance"]["wall_time_s"] = r.wall_time_s;
  return j;
}

}  // namespace dtsim::results
