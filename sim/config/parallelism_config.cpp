// The scenario's `parallelism` object: how the model is split and replicated, and what each
// split is not modelled with. scenario.cpp reads it between the cluster and the training.
#include "sim/config/parallelism_config.hpp"
#include "sim/network/algorithm_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/config/cluster_config.hpp"
#include "sim/config/framework_config.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/suggest.hpp"
#include "strategies/settings.hpp"
#include "strategies/unit.hpp"

namespace dtsim::config {

using units::Dimension;

namespace {

// Asynchronous data parallelism: what it needs and the exchange it implies.
void parse_updates(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  using strategies::Updates;
  const std::string u = r.choice("updates", {"sync", "async", "hogwild", "easgd"}, "sync");
  p.updates = u == "async" ? Updates::Async : u == "hogwild" ? Updates::Hogwild : u == "easgd" ? Updates::Easgd : Updates::Sync;
  if (r.has("staleness_bound") && p.updates != Updates::Async) r.fail("staleness_bound", "needs \"updates\": \"async\"");
  p.staleness_bound = static_cast<int>(r.integer("staleness_bound", 0, 1000000, -1));
  if (r.has("easgd_period") && p.updates != Updates::Easgd) r.fail("easgd_period", "needs \"updates\": \"easgd\"");
  p.easgd_period = static_cast<int>(r.integer("easgd_period", 1, 1000, 1));
  if (p.updates == Updates::Sync) return;
  if (p.tensor > 1 || p.pipeline > 1 || p.zero_stage > 0)
    r.fail("updates", fmt::format("\"{}\" updates are modelled for pure data parallelism (tensor 1, pipeline 1, zero_stage 0)", u));
  if (r.has("gradient_compression")) r.fail("gradient_compression", fmt::format("not modelled with \"{}\" updates", u));
  const bool servers = s.cluster.ps_servers > 0, one_node = s.cluster.nodes == 1;
  using taskgraph::Algorithm;
  Algorithm want = Algorithm::ParameterServer;
  if (p.updates == Updates::Hogwild) {
    if (!one_node) r.fail("updates", "Hogwild shares weights in one host's memory: it needs cluster.nodes = 1");
    want = Algorithm::CentralStorage;
  } else if (p.updates == Updates::Easgd) {
    if (!servers && !one_node)
      r.fail("updates", "EASGD's centre lives on a CPU master: give cluster.parameter_servers, or use one node (host memory)");
    want = servers ? Algorithm::ParameterServer : Algorithm::CentralStorage;
  }
  if (r.has("all_reduce_algorithm") && p.algorithm != want)
    r.fail("all_reduce_algorithm", fmt::format("\"{}\" updates go through \"{}\"", u, network::algorithm_name(want)));
  p.algorithm = want;
}

// Context parallelism's keys beside `context`: how K and V travel and whether causal chunks are
// paired up so every rank does the same attention work.
void parse_context(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  if (const std::string why = s.model.context_split_error(p.context); !why.empty()) r.fail("context", why);
  p.context_all_gather = r.choice("context_comm", {"p2p", "all_gather"}, "p2p") == "all_gather";
  p.context_load_balance = r.boolean("context_load_balance", true);
  if (p.context == 1)
    for (const char* key : {"context_comm", "context_load_balance"})
      if (r.has(key)) r.fail(key, "needs context parallelism (parallelism.context > 1)");
  const models::TransformerSpec* t = s.model.transformer();
  if (p.context > 1 && !p.context_load_balance && t && t->mla())
    r.fail("context_load_balance", "contiguous chunks' uneven attention is modelled for standard attention, not latent attention");
}

// MoE parallel folding (Megatron-Core --expert-tensor-parallel-size): the MoE layers' grid of
// expert_tensor x expert x expert-data ranks over the stage's tensor x context x data ranks.
// Without expert_tensor the experts split over `tensor` as before and the groups come out of
// context x data.
void parse_expert_grid(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  p.expert_tensor = static_cast<int>(r.integer("expert_tensor", 1, kMaxGpus, 0));
  if (p.expert_tensor == 0) {
    if ((p.context * p.data) % p.expert != 0)
      r.fail("expert", fmt::format("{} does not divide context x data ({}): expert-parallel groups are carved out of the "
                                   "context and data-parallel GPUs (give expert_tensor to fold them over tensor ranks too)",
                                   p.expert, p.context * p.data));
    return;
  }
  const auto* m = s.model.transformer();
  if (!m || !m->moe()) r.fail("expert_tensor", "expert tensor parallelism needs a mixture-of-experts model (model.num_experts)");
  if (m->expert_ffn_hidden_size % p.expert_tensor != 0)
    r.fail("expert_tensor", fmt::format("{} does not divide model.expert_ffn_hidden_size ({})", p.expert_tensor, m->expert_ffn_hidden_size));
  const std::int64_t grid = static_cast<std::int64_t>(p.expert) * p.expert_tensor,
                     ranks = static_cast<std::int64_t>(p.tensor) * p.context * p.data;
  if (ranks % grid != 0)
    r.fail("expert_tensor", fmt::format("expert ({}) x expert_tensor ({}) = {} does not divide tensor ({}) x context ({}) x data ({}) "
                                        "= {}: the expert grid folds over a stage's tensor x context x data GPUs",
                                        p.expert, p.expert_tensor, grid, p.tensor, p.context, p.data, ranks));
}

// Expert all-to-all overlap (strategies::ParallelismSpec::MoeOverlap), with what Megatron-Core
// asserts for it (transformer_config.py, overlap_moe_expert_parallel_comm).
void parse_moe_overlap(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  using O = strategies::ParallelismSpec::MoeOverlap;
  const std::string o = r.choice("moe_a2a_overlap", {"none", "megatron-1f1b", "dualpipe"}, "none");
  p.moe_a2a_overlap = o == "megatron-1f1b" ? O::Megatron1F1B : o == "dualpipe" ? O::DualPipe : O::None;
  p.gpus_per_node = s.cluster.gpus_per_node;
  if (r.choice("moe_dispatcher", {"alltoall", "deepep"}, "alltoall") == "deepep") {
    if (p.expert == 1) r.fail("moe_dispatcher", "dispatches tokens to the expert-parallel GPUs: it needs expert > 1");
    p.moe_dispatcher = strategies::ParallelismSpec::MoeDispatcher::DeepEp;
  }
  p.moe_node_limit = static_cast<int>(r.integer("moe_node_limit", 1, kMaxGpus, 0));
  if (p.moe_node_limit > 0 && p.expert == 1) r.fail("moe_node_limit", "limits the nodes a token's experts lie on: it needs expert > 1");
  p.moe_shared_expert_overlap = r.boolean("moe_shared_expert_overlap", false);
  if (p.moe_shared_expert_overlap && p.expert == 1)
    r.fail("moe_shared_expert_overlap", "overlaps the shared experts with the expert all-to-alls: it needs expert > 1");
  // transformer_config.py: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm".
  if (p.moe_shared_expert_overlap && p.moe_a2a_overlap != O::None)
    r.fail("moe_shared_expert_overlap", "Megatron-Core refuses it beside moe_a2a_overlap: give one");
  p.moe_fp8_dispatch = r.choice("moe_dispatch_dtype", {"activation", "fp8"}, "activation") == "fp8";
  if (p.moe_fp8_dispatch && p.expert == 1) r.fail("moe_dispatch_dtype", "sends tokens to the expert-parallel GPUs in FP8: it needs expert > 1");
  // transformer_config.py: "shared_experts recompute cannot work with --moe-shared-expert-overlap".
  if (p.moe_shared_expert_overlap && (p.recompute_modules & models::recompute_module::kSharedExperts))
    r.fail("moe_shared_expert_overlap", "Megatron-Core refuses it beside the shared_experts recompute module: give one");
  if (p.moe_a2a_overlap == O::None) return;
  if (p.expert == 1) r.fail("moe_a2a_overlap", "overlaps expert all-to-alls: it needs expert > 1");
  // transformer_config.py: "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm".
  if (p.recompute_modules & models::recompute_module::kMoe)
    r.fail("moe_a2a_overlap", "Megatron-Core refuses the moe recompute module beside its all-to-all overlap: drop \"moe\" from "
                              "recompute_modules (\"moe_act\" keeps less of the experts without re-running the all-to-alls)");
  if (p.moe_a2a_overlap != O::Megatron1F1B) return;
  if (p.recompute == strategies::Recompute::Full)
    r.fail("moe_a2a_overlap", "Megatron-Core refuses full recomputation with overlap_moe_expert_parallel_comm (use \"dualpipe\" "
                              "or recompute \"selective\")");
  if (p.pipeline > 1 && !p.schedule->chunked)
    r.fail("moe_a2a_overlap", "Megatron-Core's overlap needs virtual pipeline stages when pipeline > 1: set "
                              "\"pipeline_schedule\": \"interleaved-1f1b\"");
}

// The frameworks' ZeRO under expert parallelism: FSDP as torchtitan applies FSDP2 (experts sharded
// over the expert-data-parallel GPUs, the rest over the data-parallel ones, gathered per block:
// strategies/units/framework_zero3.cpp); DeepSpeed's is not modelled.
void refuse_framework_with_experts(Reader& r, const strategies::ParallelismSpec& p) {
  using strategies::Framework;
  const auto& f = p.framework;
  if (f.framework == Framework::DeepSpeed)
    r.fail("framework", "deepspeed's ZeRO with expert parallelism is not modelled: give framework \"fsdp\" (torchtitan's FSDP2 "
                        "with experts) or \"megatron-lm\"");
  if (f.framework != Framework::Fsdp || p.zero_stage != 3) return;
  auto refuse = [&](const char* key, const char* what) {
    r.fail(key, fmt::format("fsdp with expert parallelism gathers and reduce-scatters per block (torchtitan's FSDP2): {} is "
                            "not modelled with it", what));
  };
  if (!f.gather_per_layer) refuse("zero3", "sub-module gathers (zero3.gather \"sub-module\")");
  if (f.reduce_bucket_params > 0) refuse("zero3", "reduce buckets across blocks (zero3.reduce_bucket_params)");
  if (p.moe_a2a_overlap != strategies::ParallelismSpec::MoeOverlap::None)
    refuse("moe_a2a_overlap", "Megatron-Core's or DualPipe's all-to-all overlap");
}

// Expert parallelism (strategies::ParallelismSpec::expert) and the router's load skew, after the
// rest of `parallelism`, with what it is not modelled with.
void parse_expert_parallelism(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  p.expert = static_cast<int>(r.integer("expert", 1, kMaxGpus, 1));
  if (const std::string why = s.model.expert_split_error(p.expert); !why.empty()) r.fail("expert", why);
  parse_expert_grid(r, s);
  parse_moe_overlap(r, s);
  p.expert_skew = r.number("expert_skew", Range{0.0, 10.0}, 0.0);
  p.expert_seed = static_cast<std::uint64_t>(r.integer("expert_seed", 0, std::int64_t{1} << 53, 1));
  if (r.has("expert_skew") && p.expert_skew > 0 && p.expert == 1)
    r.fail("expert_skew", "a skewed router slows one expert-parallel GPU against the others: it needs expert > 1");
  if (p.expert == 1) return;
  auto refuse = [&](const char* key, const char* what) {
    r.fail(key, fmt::format("{} with expert parallelism is not modelled", what));
  };
  if (p.recompute == strategies::Recompute::Stage) refuse("recompute", "recomputing whole pipeline stages");
  if (p.priority_buckets) refuse("bucket_order", "priority order");
  if (p.compression != strategies::Compression::None) refuse("gradient_compression", "gradient compression");
  if (p.updates != strategies::Updates::Sync) refuse("updates", "asynchronous updates");
  if (p.activation_offload) refuse("activation_offload", "activation offload");
  if (p.offload_optimizer) refuse("offload_optimizer", "optimizer offload");
  refuse_framework_with_experts(r, p);
  if (strategies::hybrid_shard(p)) refuse("shard_size", "hybrid sharding (HSDP)");
  if (!p.schedule->with_experts) refuse("pipeline_schedule", "this pipeline schedule");
}

// Megatron-Core's overlapped parameter all-gather (--overlap-param-gather): the distributed
// optimizer's gather, so ZeRO-1 or 2 under megatron-lm, after the framework and the updates.
void parse_param_gather(Reader& r, strategies::ParallelismSpec& p) {
  p.overlap_param_gather = r.boolean("overlap_param_gather", false);
  if (!p.overlap_param_gather) return;
  if (p.zero_stage != 1 && p.zero_stage != 2)
    r.fail("overlap_param_gather", "overlaps the distributed optimizer's parameter all-gather with the next forward: it needs "
                                   "zero_stage 1 or 2 (ZeRO-3 gathers before every layer already)");
  if (p.framework.framework != strategies::Framework::MegatronLM)
    r.fail("overlap_param_gather", "is Megatron-Core's (--overlap-param-gather): give parallelism.framework \"megatron-lm\"");
  auto refuse = [&](const char* key, const char* what) {
    r.fail(key, fmt::format("{} with overlap_param_gather is not modelled", what));
  };
  // megatron/training/arguments.py, validate_args: "Must use --overlap-param-gather with --overlap-grad-reduce".
  if (!p.overlap_grad_reduce)
    r.fail("overlap_param_gather", "Megatron-Core overlaps the parameter gather only with overlap_grad_reduce: give both true");
  if (p.offload_optimizer) refuse("offload_optimizer", "optimizer offload");
  if (p.priority_buckets) refuse("bucket_order", "priority order");
  if (p.updates != strategies::Updates::Sync) refuse("updates", "asynchronous updates");
}

// HSDP: ZeRO-3 inside groups of shard_size data ranks, replicated across data / shard_size groups.
void parse_shard_size(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  p.shard_size = static_cast<int>(r.integer("shard_size", 0, kMaxGpus, 0));
  if (p.shard_size == 0) return;
  if (p.zero_stage != 3)
    r.fail("shard_size", "shards ZeRO-3's parameters in groups (HSDP): it needs zero_stage 3 (or fsdp); did you mean \"zero_stage\": 3?");
  if (p.data % p.shard_size != 0)
    r.fail("shard_size", fmt::format("{} does not divide data ({}): the replicas are data / shard_size groups", p.shard_size, p.data));
  if (!strategies::hybrid_shard(p)) return;
  if (p.offload_optimizer) r.fail("shard_size", "hybrid sharding with the optimizer on the host is not modelled");
  // A framework's ZeRO-3 over one rank gathers nothing; torchtitan runs DDP there (apply_ddp).
  if (p.framework.framework != strategies::Framework::MegatronLM && p.shard_size * p.context == 1)
    r.fail("shard_size", "1 shards nothing: for full replicas under this framework give zero_stage 0 (data parallelism)");
}

// Why module `bit` cannot apply to transformer t, or nothing (Megatron-Core's own checks,
// transformer_config.py, and what would do nothing).
std::string module_refusal(std::uint8_t bit, const models::TransformerSpec& t) {
  using namespace models::recompute_module;
  if (bit == kMoeAct && !t.moe()) return "\"moe_act\" re-runs the experts' activation: the model has no experts";
  if (bit == kMoe && !t.moe()) return "\"moe\" re-runs the MoE layers: the model has no experts (did you mean \"mlp\"?)";
  if (bit == kSharedExperts && t.shared_experts == 0) return "\"shared_experts\" re-runs the shared experts: the model has none";
  if (bit == kMlaUpProj && !t.mla()) return "\"mla_up_proj\" re-runs latent attention's up-projections: the model has no latent attention";
  if (bit == kMlp && t.parallel_layers) return "\"mlp\" with parallel layers would re-run the GEMMs attention shares: not modelled";
  if (bit == kMlp && t.moe() && t.first_dense_layers == 0)
    return "\"mlp\" re-runs dense MLPs and every block of the model is an MoE layer: did you mean \"moe\"?";
  return {};
}

// Megatron-Core's --recompute-modules under selective recomputation
// (megatron/core/transformer/transformer_config.py).
void parse_recompute_modules(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  if (!r.has("recompute_modules")) return;
  if (p.recompute != strategies::Recompute::Selective)
    r.fail("recompute_modules", fmt::format("names the sub-modules selective recomputation runs again, and recompute is \"{}\": did "
                                            "you mean \"recompute\": \"selective\"?",
                                            strategies::to_string(p.recompute)));
  const Json& v = r.raw("recompute_modules");
  if (!v.is_array()) r.fail("recompute_modules", "expected a list of module names, e.g. [\"core_attn\", \"moe_act\"]");
  const models::TransformerSpec* t = s.model.transformer();
  if (!t) r.fail("recompute_modules", "Megatron-Core's recompute modules are a transformer's");
  p.recompute_modules = models::recompute_module::kGiven;
  const auto names = strategies::recompute_module_names();
  for (const auto& m : v) {
    const std::string name = m.is_string() ? m.get<std::string>() : m.dump();
    const std::uint8_t bit = strategies::recompute_module_bit(name);
    if (bit == 0)
      r.fail("recompute_modules", fmt::format("\"{}\" is not a recompute module (one of: {}){}", name, fmt::join(names, ", "),
                                              did_you_mean(name, names)));
    if (const std::string why = module_refusal(bit, *t); !why.empty()) r.fail("recompute_modules", why);
    p.recompute_modules |= bit;
  }
  if ((p.recompute_modules & models::recompute_module::kCoreAttn) && p.context > 1)
    r.fail("recompute_modules", "\"core_attn\" with context parallelism would run the ring's exchange again: not modelled");
}

// `recompute` and which blocks full recomputation reaches (strategies::ParallelismSpec).
void parse_recompute(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  const std::string rc = r.choice("recompute", {"none", "selective", "full", "stage", "op"}, "none");
  p.recompute = rc == "stage"  ? strategies::Recompute::Stage
                : rc == "full" ? strategies::Recompute::Full
                : rc == "selective" ? strategies::Recompute::Selective
                : rc == "op"        ? strategies::Recompute::Op
                                    : strategies::Recompute::None;
  // torchtitan's policy names PyTorch's matmul and attention ops: a transformer's dense blocks.
  if (p.recompute == strategies::Recompute::Op) {
    const models::TransformerSpec* t = s.model.transformer();
    if (!t) r.fail("recompute", "op-level checkpointing (torchtitan's policy) is modelled for transformer blocks, not a CNN's");
    if (t->moe())
      r.fail("recompute", "op-level checkpointing of mixture-of-experts blocks is not modelled (their grouped GEMMs are not "
                          "in torchtitan's save list as dtsim knows it): use \"full\" or \"selective\"");
  }
  parse_recompute_modules(r, s);
  const std::int64_t blocks = std::max<std::int64_t>(1, s.model.blocks());
  p.recompute_layers = static_cast<int>(r.integer("recompute_layers", 1, blocks, 0));
  // torchtitan takes any n: one beyond the blocks checkpoints none.
  p.recompute_every = static_cast<int>(r.integer("recompute_every", 1, 1000000, 0));
  p.recompute_group = static_cast<int>(r.integer("recompute_group", 1, blocks, 1));
  const char* given = nullptr;
  for (const char* key : {"recompute_layers", "recompute_every", "recompute_group"}) {
    if (!r.has(key)) continue;
    if (p.recompute != strategies::Recompute::Full)
      r.fail(key, fmt::format("chooses which blocks full recomputation checkpoints, and recompute is \"{}\": did you mean "
                              "\"recompute\": \"full\"?", rc));
    if (given) r.fail(key, fmt::format("give one of recompute_layers, recompute_every and recompute_group, not {} and {}", given, key));
    given = key;
  }
}

// Uneven pipeline chunks (strategies::ParallelismSpec::stage_blocks): one block count per stage,
// or with virtual stages one per model chunk in model order, chunk j on stage j % pipeline (as
// Megatron-LM assigns layers to virtual pipeline ranks: get_transformer_layer_offset).
void parse_stage_layers(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  const auto& m = s.model;
  if (!r.has("stage_layers")) return;
  const Json& v = r.raw("stage_layers");
  auto bad = [&](const std::string& why) { r.fail("stage_layers", why); };
  const int chunks = p.pipeline * p.virtual_stages;
  if (!v.is_array() || static_cast<int>(v.size()) != chunks)
    bad(p.virtual_stages > 1 ? fmt::format("expected a list of {} block counts, one per model chunk ({} stages x {} virtual "
                                           "stages), chunk j on stage j % {}",
                                           chunks, p.pipeline, p.virtual_stages, p.pipeline)
                             : fmt::format("expected a list of {} block counts, one per pipeline stage", p.pipeline));
  std::int64_t sum = 0;
  for (std::size_t c = 0; c < v.size(); ++c) {
    const Json& n = v[c];
    // The first chunk holds the embedding and the last the head: either may hold no block (a
    // Megatron-Core layout's "E|..." or "...|L").
    const std::int64_t least = c == 0 || c + 1 == v.size() ? 0 : 1;
    if (!n.is_number_integer() || n.get<std::int64_t>() < least || n.get<std::int64_t>() > m.blocks())
      bad(p.virtual_stages > 1 ? "each model chunk needs a whole number of blocks, at least 1 (0 for the first and the last)"
                               : "each stage needs a whole number of blocks, at least 1 (0 for the first and the last)");
    sum += n.get<std::int64_t>();
    p.stage_blocks.push_back(static_cast<int>(n.get<std::int64_t>()));
  }
  if (sum != m.blocks()) bad(fmt::format("the stages hold {} blocks, but {} is {}", sum, m.blocks_key(), m.blocks()));
}

// Gradient compression, and what ZeRO needs of the all-reduce algorithm.
void parse_compression(Reader& r, strategies::ParallelismSpec& p) {
  const std::string comp = r.choice("gradient_compression", {"none", "fp16", "int8", "topk"}, "none");
  p.compression = comp == "fp16"   ? strategies::Compression::Fp16
                  : comp == "int8" ? strategies::Compression::Int8
                  : comp == "topk" ? strategies::Compression::TopK
                                   : strategies::Compression::None;
  p.topk_ratio = r.number("topk_ratio", Range{0.0, 1.0, true}, 0.01);
  if (r.has("topk_ratio") && p.compression != strategies::Compression::TopK)
    r.fail("topk_ratio", fmt::format("applies to gradient_compression \"topk\" only, and this one is \"{}\": did you mean "
                                     "\"gradient_compression\": \"topk\"?", comp));
  if (p.compression != strategies::Compression::None && p.zero_stage > 0)
    r.fail("gradient_compression", "compression with ZeRO's sharded gradients is not modelled");
  const auto& unit = network::unit_of(p.algorithm);
  if (p.zero_stage > 0 && unit.on_servers())
    r.fail("all_reduce_algorithm", "ZeRO shards gradients with reduce-scatter; parameter servers and central storage do not");
  if (p.zero_stage > 0 && !unit.scatter_gather)
    r.fail("all_reduce_algorithm", fmt::format("ZeRO needs reduce-scatter and all-gather, which \"{}\" does not do", unit.name));
}

}  // namespace

void parse_parallelism(Reader r, Scenario& s) {
  auto& p = s.parallelism;
  const auto& m = s.model;
  const std::int64_t gpus = s.cluster.num_gpus();
  p.tensor = static_cast<int>(r.integer("tensor", 1, kMaxGpus, 1));
  p.pipeline = static_cast<int>(r.integer("pipeline", 1, kMaxGpus, 1));
  p.context = static_cast<int>(r.integer("context", 1, kMaxGpus, 1));
  const std::int64_t tp = static_cast<std::int64_t>(p.tensor) * p.pipeline * p.context;
  p.data = static_cast<int>(r.integer("data", 1, kMaxGpus, gpus % tp == 0 ? gpus / tp : 1));
  if (static_cast<std::int64_t>(p.data) * tp != gpus)
    r.fail("data", fmt::format("data ({}) x tensor ({}) x pipeline ({}){} = {}, but the cluster has {} GPUs ({} nodes x {})",
                               p.data, p.tensor, p.pipeline, p.context > 1 ? fmt::format(" x context ({})", p.context) : "",
                               p.data * tp, gpus, s.cluster.nodes, s.cluster.gpus_per_node));
  parse_context(r, s);
  if (const std::string why = m.tensor_split_error(p.tensor); !why.empty()) r.fail("tensor", why);
  p.micro_batch = r.integer("micro_batch_size", 1, 1000000, 1);
  p.schedule = *strategies::schedule_from_string(r.choice("pipeline_schedule", strategies::schedule_names(), "1f1b"));
  if (p.schedule->splits_backward && p.context > 1)  // its B/W split has no K/V exchange
    r.fail("pipeline_schedule", fmt::format("{} with context parallelism is not modelled", p.schedule->name));
  p.virtual_stages = static_cast<int>(r.integer("virtual_stages", 1, 1024, 1));
  if (p.virtual_stages > 1 && !p.schedule->chunked)
    r.fail("virtual_stages", "virtual stages need \"pipeline_schedule\": \"interleaved-1f1b\"");
  const std::int64_t chunks = static_cast<std::int64_t>(p.pipeline) * p.virtual_stages;
  if (chunks > m.blocks())  // every model chunk holds a block at least
    r.fail("pipeline", fmt::format("{} stages x {} virtual stages is more than {} ({}): each model chunk needs a block", p.pipeline,
                                   p.virtual_stages, m.blocks_key(), m.blocks()));
  parse_stage_layers(r, s);
  p.sequence_parallel = r.boolean("sequence_parallel", false);
  if (p.sequence_parallel && p.tensor == 1) r.fail("sequence_parallel", "sequence parallelism needs tensor > 1");
  p.zero_stage = static_cast<int>(r.integer("zero_stage", 0, 3, 0));
  if (r.boolean("fsdp", false)) {
    if (r.has("zero_stage") && p.zero_stage != 3) r.fail("fsdp", "FSDP (full sharding) is ZeRO stage 3");
    p.zero_stage = 3;
  }
  if (p.zero_stage > 0 && p.schedule->updates_per_backward)
    r.fail("zero_stage", fmt::format("{} updates every micro-batch with its stage's whole gradients: ZeRO is not modelled with it",
                                     p.schedule->name));
  p.offload_optimizer = r.boolean("offload_optimizer", false);
  p.pipeline_outer = r.choice("placement", {"tp-pp-dp", "tp-dp-pp"}, "tp-dp-pp") == "tp-dp-pp";
  parse_recompute(r, s);
  p.bucket_bytes = r.quantity("bucket_size", Dimension::Bytes, Range{0.0, 1e13, true}, p.bucket_bytes);
  p.first_bucket_bytes = r.quantity("first_bucket_size", Dimension::Bytes, Range{0.0, 1e13, true}, p.first_bucket_bytes);
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  p.blocking_p2p = r.choice("pipeline_p2p", {"overlapped", "blocking"}, "overlapped") == "blocking";
  // "auto" by default, as NCCL does: its tuner picks per collective.
  p.algorithm = *network::algorithm_named(r.choice("all_reduce_algorithm", network::algorithm_names(), "auto"));
  parse_updates(r, s);
  if (p.context > 1 && p.updates != strategies::Updates::Sync)
    r.fail("context", "context parallelism is modelled with synchronous updates");
  p.priority_buckets = r.choice("bucket_order", {"fifo", "priority"}, "fifo") == "priority";
  if (p.priority_buckets)
    if (const char* why = strategies::priority_order_refusal(p)) r.fail("bucket_order", why);
  if (p.algorithm == taskgraph::Algorithm::CentralStorage && s.cluster.nodes > 1)
    r.fail("all_reduce_algorithm", "central storage keeps variables in one host's memory: it needs cluster.nodes = 1");
  parse_compression(r, p);
  parse_framework(r, s);
  parse_shard_size(r, s);
  parse_expert_parallelism(r, s);
  parse_param_gather(r, p);
  strategies::read_unit_settings(r, p);  // the units that declare settings of their own
  r.finish();
}

// fp16 compression halves fp32 gradients; on gradients of 2 bytes or fewer it would change nothing.
void refuse_idle_compression(const Scenario& s, const Origins& origins) {
  const auto& p = s.parallelism;
  const double bytes = strategies::reduced_grad_bytes(p, s.training.precision);
  if (p.compression != strategies::Compression::Fp16 || bytes > 2.0) return;
  const std::string where = "/parallelism/gradient_compression";
  throw InputError(origins.file_for(where), where,
                   fmt::format("\"fp16\" compression halves fp32 gradients, but with precision \"{}\" they are already {} "
                               "bytes each, so it would change nothing: use \"int8\" or \"topk\", or \"none\"",
                               strategies::to_string(s.training.precision), bytes));
}

}  // namespace dtsim::config
