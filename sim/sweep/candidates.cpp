#include "sim/sweep/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "sim/config/merge.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/units.hpp"
#include "strategies/settings.hpp"

namespace dtsim::sweep {

namespace {

std::string describe(const strategies::ParallelismSpec& p) {
  std::string s = fmt::format("tp{} pp{} dp{} mb{}", p.tensor, p.pipeline, p.data, p.micro_batch);
  if (p.pipeline > 1) s += fmt::format(" {}{}", strategies::to_string(p.schedule), p.virtual_stages > 1 ? fmt::format(" v{}", p.virtual_stages) : "");
  if (p.zero_stage) s += fmt::format(" zero{}", p.zero_stage);
  if (p.recompute != strategies::Recompute::None) s += fmt::format(" recompute={}", strategies::to_string(p.recompute));
  if (p.sequence_parallel) s += " sp";
  if (p.context > 1) s += fmt::format(" cp{}", p.context);
  if (p.expert > 1) s += fmt::format(" ep{}", p.expert);
  if (p.priority_buckets) s += " priority";  // a priority-order scenario keeps it only where it is modelled
  return s;
}

// The scenario's expert grid and all-to-all overlap, where a candidate can keep them (the checks
// of sim/config/scenario.cpp): folding needs expert x expert_tensor to divide tensor x context x data,
// Megatron-Core's overlap no full recomputation and virtual stages under a pipeline. Without
// experts neither applies.
bool keep_moe_settings(strategies::ParallelismSpec& p) {
  using O = strategies::ParallelismSpec::MoeOverlap;
  if (p.expert == 1) {
    p.expert_tensor = 0, p.moe_a2a_overlap = O::None;
    return true;
  }
  if (p.expert_tensor > 0 && (p.tensor * p.context * p.data) % (p.expert * p.expert_tensor) != 0) return false;
  return p.moe_a2a_overlap != O::Megatron1F1B ||
         (p.recompute != strategies::Recompute::Full && (p.pipeline == 1 || p.schedule->chunked));
}

// Expert-parallel sizes to try on `ranks` context x data-parallel GPUs: 1, and for a mixture of
// experts every power of two that divides both the ranks and the experts (what the planner can
// lay out: the groups come out of the context and data ranks).
std::vector<int> expert_sizes(const models::ModelSpec& m, int ranks) {
  std::vector<int> out{1};
  for (int ep = 2; ep <= ranks; ep *= 2)
    if (ranks % ep == 0 && m.expert_split_error(ep).empty()) out.push_back(ep);
  return out;
}

// Tensor-parallel sizes to try: powers of two within a node, whose NVLink or PCIe carries them;
// on a torus, the chips of whole dimensions (every product of some of them, up to 64), which the
// replay lays a group along as JAX lays a mesh axis (results::torus_order).
std::vector<int> tensor_sizes(const config::Scenario& s) {
  std::set<int> out{1};
  const auto& dims = s.cluster.torus_dims;
  if (dims.empty())
    for (int tp = 2; tp <= s.cluster.gpus_per_node; tp *= 2) out.insert(tp);
  for (unsigned subset = 1; subset < (1u << dims.size()); ++subset) {
    std::int64_t chips = 1;
    for (std::size_t k = 0; k < dims.size(); ++k)
      if (subset & (1u << k)) chips *= dims[k];
    if (chips <= 64) out.insert(static_cast<int>(chips));
  }
  return {out.begin(), out.end()};
}

}  // namespace

std::string precision_name(strategies::Precision p) {
  return p == strategies::Precision::Fp8 ? "fp8" : config::compute_dtype(p);
}

// A candidate as the tables name it: its strategy, and its precision when that is FP8.
std::string describe(const strategies::ParallelismSpec& p, strategies::Precision precision) {
  return describe(p) + (precision == strategies::Precision::Fp8 ? " fp8" : "");
}

std::string describe(const Candidate& c) {
  return c.precision_named ? describe(c.p) + " " + precision_name(c.precision) : describe(c.p);
}

// Context parallelism pays off on long sequences (Megatron-Core's long-context recipes start at
// 16K-32K tokens; Llama 3 turns it on for its 128K stage): the sweep tries it from 16K tokens on.
constexpr std::int64_t kContextFromTokens = 16384;

// Every strategy the scenario's model and cluster allow, within a few choices per knob, in each
// of `precisions` the device runs.
std::vector<Candidate> enumerate(const config::Scenario& s, const std::vector<strategies::Precision>& precisions) {
  std::vector<Candidate> out;
  const auto& m = s.model;
  const int gpus = s.cluster.num_gpus();
  std::vector<int> contexts{1};
  if (m.tokens_per_sample() >= kContextFromTokens && s.training.attention == models::Attention::Flash)
    for (int cp = 2; cp <= 16; cp *= 2)
      if (m.context_split_error(cp).empty()) contexts.push_back(cp);
  const std::vector<int> tensors = tensor_sizes(s);
  for (auto precision : precisions) {
    if (precision == strategies::Precision::Fp8 && !s.device.peak_flops.contains("fp8")) continue;
    for (int cp : contexts)
      for (int tp : tensors) {
        if (!m.tensor_split_error(tp).empty()) continue;
        for (int pp = 1; pp <= std::min<std::int64_t>(64, m.blocks()); pp *= 2) {
          if (gpus % (tp * pp * cp)) continue;
          const int dp = gpus / (tp * pp * cp);
          for (std::int64_t mb : {1, 2, 4, 8}) {
            if (s.training.global_batch % (static_cast<std::int64_t>(dp) * mb)) continue;
            const std::int64_t micro = strategies::micro_batches(s.training.global_batch, dp, mb);
            std::vector<std::pair<strategies::Schedule, int>> schedules{{strategies::Schedule::OneFOneB, 1}};
            if (pp > 1 && micro % pp == 0 && m.blocks() % (2 * pp) == 0) schedules.push_back({strategies::Schedule::Interleaved, 2});
            for (auto [sched, v] : schedules)
              for (int zero : {0, 1, 3}) {
                // ZeRO-3 with pipelines is simulated but not searched (the closed form leaves it to the replay).
                if ((zero > 0 && dp * cp == 1) || (zero == 3 && pp > 1)) continue;
                for (int ep : expert_sizes(m, cp * dp)) {
                  for (auto rc : {strategies::Recompute::None, strategies::Recompute::Selective, strategies::Recompute::Full}) {
                    Candidate c;
                    c.p = s.parallelism;
                    c.p.tensor = tp;
                    c.p.pipeline = pp;
                    c.p.data = dp;
                    c.p.micro_batch = mb;
                    c.p.schedule = sched;
                    c.p.virtual_stages = v;
                    c.p.zero_stage = zero;
                    c.p.recompute = rc;
                    // The scenario's Megatron-Core modules are what its selective recomputation runs.
                    if (rc != strategies::Recompute::Selective) c.p.recompute_modules = 0;
                    c.p.recompute_layers = c.p.recompute_every = 0;  // every block, as the label says
                    c.p.recompute_group = 1;
                    c.p.sequence_parallel = tp > 1;
                    c.p.all_replicas = false;
                    c.p.context = cp;
                    if (cp == 1) c.p.context_all_gather = false, c.p.context_load_balance = true;
                    c.p.expert = ep;
                    if (ep == 1) c.p.expert_skew = 0;  // one GPU holds every expert: no GPU gets more than another
                    // The scenario's HSDP shard groups where they still divide the data ranks (not with experts).
                    if (c.p.shard_size > 0 && (dp % c.p.shard_size != 0 || ep > 1)) c.p.shard_size = 0;
                    if (!keep_moe_settings(c.p)) continue;
                    // Where priority order is not modelled (the loader refuses it there), candidates
                    // reduce in backward's order.
                    if (strategies::priority_order_refusal(c.p)) c.p.priority_buckets = false;
                    // Horovod's tensor fusion is data parallelism alone (the scenario loader refuses the rest).
                    if (c.p.fusion.on() && (tp > 1 || pp > 1 || cp > 1 || ep > 1 || zero > 0)) continue;
                    c.precision = precision;
                    c.precision_named = precision == strategies::Precision::Fp8 || precision != precisions.front();
                    out.push_back(c);
                  }
                }
              }
          }
        }
      }
  }
  return out;
}


std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError("", flag, fmt::format("\"{}\" has an empty entry: give a comma-separated list", text));
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "bf16,fp8": the precisions --precisions names, in order, repeats dropped.
std::vector<strategies::Precision> parse_precisions(const std::string& text, strategies::Precision scenario) {
  if (text.empty()) return {scenario};
  std::vector<strategies::Precision> out;
  for (const auto& item : split_list(text, "--precisions")) {
    strategies::Precision p;
    if (item == "bf16") p = strategies::Precision::Bf16;
    else if (item == "fp16") p = strategies::Precision::Fp16;
    else if (item == "fp8") p = strategies::Precision::Fp8;
    else if (item == "fp32") p = strategies::Precision::Fp32;
    else if (item == "tf32") p = strategies::Precision::Tf32;
    else throw InputError("", "--precisions", fmt::format("\"{}\" is not one of bf16, fp16, fp8, tf32, fp32", item));
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

// "256,512,1024": whole numbers of GPUs, each at least 1, in the order given, repeats dropped.
std::vector<int> parse_gpus(const std::string& text) {
  std::vector<int> out;
  for (const auto& item : split_list(text, "--gpus")) {
    const bool digits = item.size() <= 8 && item.find_first_not_of("0123456789") == std::string::npos;
    const long n = digits ? std::stol(item) : 0;
    if (!digits || n < 1 || n > (1 << 20))
      throw InputError("", "--gpus", fmt::format("\"{}\" is not a GPU count from 1 to 1048576", item));
    if (std::find(out.begin(), out.end(), static_cast<int>(n)) == out.end()) out.push_back(static_cast<int>(n));
  }
  return out;
}

// The scenario with `gpus` GPUs of `device`: as `run` would load it with hardware.device and
// cluster.nodes / gpus_per_node set (what --write-best writes).
config::Scenario on_cluster(const config::Scenario& scenario, int gpus, const cost::DeviceProfile* device) {
  config::Scenario s = scenario;
  if (gpus > 0) {
    if (gpus % s.cluster.gpus_per_node && gpus > s.cluster.gpus_per_node)
      throw InputError("", "--gpus", fmt::format("{} GPUs do not fill nodes of {}", gpus, s.cluster.gpus_per_node));
    s.host.memory_bandwidth_per_gpu *= s.cluster.gpus_per_node;
    s.cluster.gpus_per_node = std::min(s.cluster.gpus_per_node, gpus);
    s.cluster.nodes = gpus / s.cluster.gpus_per_node;
    s.host.memory_bandwidth_per_gpu /= s.cluster.gpus_per_node;
  }
  if (device) {
    const cost::Stack stack = s.device.stack;  // the software stack is the scenario's, not the device's
    s.device = *device;
    s.device.stack = stack;
    s.host.pcie_bandwidth = s.device.pcie_bandwidth;
    s.cluster.pcie_bandwidth = s.device.pcie_bandwidth;
  }
  return s;
}

std::string device_stem(const cost::DeviceProfile& d) { return std::filesystem::path(d.file).stem().string(); }

// The scenario file as written (its `extends` merged in, so it runs from anywhere), with the
// winner's device, cluster size and parallelism set.
std::string best_scenario(const std::string& path, const Cluster& c, const strategies::ParallelismSpec& p,
                          strategies::Precision precision) {
  auto doc = config::load_with_extends(path).json;
  doc["hardware"]["device"] = c.device;
  doc["cluster"]["nodes"] = c.base.cluster.nodes;
  doc["cluster"]["gpus_per_node"] = c.base.cluster.gpus_per_node;
  auto& par = doc["parallelism"];
  for (const char* k : {"stage_layers", "fsdp"}) par.erase(k);
  par["tensor"] = p.tensor;
  par["pipeline"] = p.pipeline;
  par["data"] = p.data;
  par["micro_batch_size"] = p.micro_batch;
  par["pipeline_schedule"] = strategies::to_string(p.schedule);
  par["virtual_stages"] = p.virtual_stages;
  par["zero_stage"] = p.zero_stage;
  par["recompute"] = strategies::to_string(p.recompute);
  for (const char* k : {"recompute_layers", "recompute_every", "recompute_group"}) par.erase(k);
  if (p.recompute != strategies::Recompute::Selective) par.erase("recompute_modules");
  par["sequence_parallel"] = p.sequence_parallel;
  if (p.expert > 1) par["expert"] = p.expert;
  else par.erase("expert"), par.erase("expert_skew"), par.erase("expert_seed"), par.erase("expert_tensor"), par.erase("moe_a2a_overlap");
  par.erase("context");
  for (const char* k : {"context_comm", "context_load_balance"}) par.erase(k);
  if (p.context > 1) {
    par["context"] = p.context;
    par["context_comm"] = p.context_all_gather ? "all_gather" : "p2p";
    par["context_load_balance"] = p.context_load_balance;
  }
  if (precision == strategies::Precision::Fp8) doc["training"]["precision"] = "fp8";
  else if (doc["training"].is_object()) {  // the candidate's own precision, without FP8's keys
    doc["training"]["precision"] = precision_name(precision);
    doc["training"].erase("fp8_recipe");
  }
  doc["description"] = fmt::format("dtsim sweep's best for {}: {} on {} x {}", path, describe(p, precision), c.gpus, c.device);
  return doc.dump(2) + "\n";
}

}  // namespace dtsim::sweep
