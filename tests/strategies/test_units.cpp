// The planner's mechanism units (strategies/unit.hpp): each unit's task count, which the budget's
// estimate sums, against the tasks the planner attributes to it while emitting, over every shipped
// scenario and over variations that exercise what the scenarios do not (every replica joining,
// zero-bubble, PipeDream, frameworks, activation offload); each unit's closed-form term against a
// value worked by hand; the schedule's kinds of pass against the schedules themselves.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "helpers.hpp"
#include "moe_scenario.hpp"
#include "sim/config/build_options.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/budget.hpp"
#include "strategies/plan.hpp"
#include "strategies/unit.hpp"
#include "strategies/units/zero.hpp"

using namespace dtsim;
using strategies::Schedule;

namespace {

// What each active unit counts and what the planner attributed to it, by unit name; the tasks of
// the planner's plan of `s`, and the budget's estimate of them.
struct Counted {
  std::map<std::string, double> counted;
  std::map<std::string, std::size_t> emitted;
  std::size_t tasks = 0;
  double estimated = 0;
  // Collective tasks: as the emitter and the units count them (what the budget's flows are
  // priced from), and in the plan.
  double collectives_counted = 0;
  std::size_t collectives = 0;
};
Counted count_and_plan(const config::Scenario& s) {
  const auto graph = s.model.build(config::build_options(s));
  const auto& p = s.parallelism;
  const auto lay = strategies::layout_of(graph, p, s.training);
  const auto plan = strategies::plan_training(graph, lay, p, s.training, s.host);
  const auto units = strategies::make_units(p);
  strategies::Count c{lay, p, s.training, {}, strategies::replicas_join(lay, p), &graph, nullptr};
  for (const auto& u : units) c.units.push_back(u.get());
  Counted out;
  for (const auto* u : c.units) {
    out.counted[u->name()] = u->tasks(c);
    for (const auto& x : u->collectives(c)) out.collectives_counted += x.count;
  }
  for (const auto& x : strategies::emitter_collectives(c)) out.collectives_counted += x.count;
  for (const auto& t : plan.graph.tasks) out.collectives += t.is_collective ? 1 : 0;
  out.emitted = plan.unit_tasks;
  out.tasks = plan.graph.tasks.size();
  out.estimated = results::estimate(s, config::Backend::Analytical, false).tasks;
  return out;
}

void expect_counts_match(const Counted& c) {
  // The budget's estimate (over its own slice of the model) is the emitter's count and the units'.
  EXPECT_EQ(c.estimated, static_cast<double>(c.tasks));
  EXPECT_EQ(c.collectives_counted, static_cast<double>(c.collectives));
  EXPECT_EQ(c.counted.size(), c.emitted.size());
  for (const auto& [name, n] : c.counted) {
    ASSERT_TRUE(c.emitted.count(name)) << name;
    EXPECT_EQ(n, static_cast<double>(c.emitted.at(name))) << name;
  }
}

// GPT-2 on 8 A100s (data 8, micro-batch 4, global batch 64: 2 micro-batches), changed by `change`.
config::Scenario gpt2(const std::function<void(strategies::ParallelismSpec&)>& change) {
  test::TempDir dir;
  auto s = config::load_scenario(dir.file("s.json", test::kValidScenario));
  change(s.parallelism);
  return s;
}

}  // namespace

// Over every shipped scenario, each active unit emits exactly the tasks it counts.
TEST(Units, EveryShippedScenarioEmitsWhatItsUnitsCount) {
  int with_units = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_dir() + "/scenarios")) {
    const auto& path = e.path();
    if (path.extension() != ".json" || path.parent_path().filename() == "base" || path.filename() == "base.json") continue;
    SCOPED_TRACE(path.string());
    const auto s = config::load_scenario(path.string());
    const auto c = count_and_plan(s);
    expect_counts_match(c);
    with_units += c.counted.empty() ? 0 : 1;
  }
  EXPECT_GT(with_units, 10);  // ZeRO and framework scenarios among them
}

// What the shipped scenarios leave out: every replica joining the collectives, pipelines with
// zero-bubble and PipeDream schedules, DeepSpeed's and FSDP's ZeRO-3 with recomputation,
// activation offload on each of them.
TEST(Units, VariationsEmitWhatTheirUnitsCount) {
  using strategies::Framework;
  std::vector<std::pair<const char*, std::function<void(strategies::ParallelismSpec&)>>> cases = {
      {"zero1", [](auto& p) { p.zero_stage = 1; }},
      {"horovod's fusion, response cache",
       [](auto& p) { p.fusion.cycle_s = 1e-3, p.fusion.threshold_bytes = 128 << 20, p.fusion.response_cache = true; }},
      {"zero2", [](auto& p) { p.zero_stage = 2; }},
      {"zero2, every replica", [](auto& p) { p.zero_stage = 2, p.all_replicas = true; }},
      {"zero3", [](auto& p) { p.zero_stage = 3; }},
      {"zero3, every replica, offload", [](auto& p) { p.zero_stage = 3, p.all_replicas = true, p.activation_offload = true; }},
      {"zero3, context 2", [](auto& p) { p.zero_stage = 3, p.data = 4, p.context = 2; }},
      {"zero3, 2 stages", [](auto& p) { p.zero_stage = 3, p.pipeline = 2, p.data = 4; }},
      {"zero3, 2 stages, gpipe", [](auto& p) { p.zero_stage = 3, p.pipeline = 2, p.data = 4, p.schedule = Schedule::GPipe; }},
      {"zero3, interleaved",
       [](auto& p) { p.zero_stage = 3, p.pipeline = 2, p.data = 2, p.schedule = Schedule::Interleaved, p.virtual_stages = 2; }},
      {"zero3, 2 stages, hsdp, every replica",
       [](auto& p) { p.zero_stage = 3, p.pipeline = 2, p.data = 4, p.shard_size = 2, p.all_replicas = true; }},
      {"hsdp", [](auto& p) { p.zero_stage = 3, p.shard_size = 4; }},
      {"hsdp, full replicas", [](auto& p) { p.zero_stage = 3, p.shard_size = 1; }},
      {"hsdp, context 2", [](auto& p) { p.zero_stage = 3, p.data = 4, p.context = 2, p.shard_size = 2; }},
      {"hsdp, every replica", [](auto& p) { p.zero_stage = 3, p.shard_size = 2, p.all_replicas = true; }},
      {"hsdp, fsdp",
       [](auto& p) { p.zero_stage = 3, p.shard_size = 2, p.framework = strategies::framework_defaults(Framework::Fsdp); }},
      {"deepspeed", [](auto& p) { p.zero_stage = 3, p.framework = strategies::framework_defaults(Framework::DeepSpeed); }},
      {"deepspeed, full recompute, offload, every replica",
       [](auto& p) {
         p.zero_stage = 3, p.framework = strategies::framework_defaults(Framework::DeepSpeed);
         p.recompute = strategies::Recompute::Full, p.activation_offload = true, p.all_replicas = true;
       }},
      {"fsdp, full recompute",
       [](auto& p) {
         p.zero_stage = 3, p.framework = strategies::framework_defaults(Framework::Fsdp);
         p.recompute = strategies::Recompute::Full;
       }},
      {"zero-bubble, zero2, offload",
       [](auto& p) { p.pipeline = 2, p.data = 4, p.schedule = Schedule::ZeroBubbleH1, p.zero_stage = 2, p.activation_offload = true; }},
      {"zero-bubble, zero2", [](auto& p) { p.pipeline = 2, p.data = 4, p.schedule = Schedule::ZeroBubbleH1, p.zero_stage = 2; }},
      {"pipedream, offload",
       [](auto& p) { p.pipeline = 2, p.data = 4, p.schedule = Schedule::PipeDream, p.activation_offload = true; }},
      {"pipedream, offload, every replica (each fetches its own activations: was a cycle)",
       [](auto& p) { p.pipeline = 2, p.data = 4, p.schedule = Schedule::PipeDream, p.activation_offload = true, p.all_replicas = true; }},
      {"interleaved, zero1, offload",
       [](auto& p) {
         p.pipeline = 2, p.data = 2, p.schedule = Schedule::Interleaved, p.virtual_stages = 2;
         p.zero_stage = 1, p.activation_offload = true;
       }},
  };
  auto loader = [](strategies::ParallelismSpec& p) {
    p.input.enabled = true, p.input.cpu_seconds_per_sample = 1e-3, p.input.workers_per_gpu = 2;
    p.input.sample_bytes = 1e5, p.input.storage_bandwidth_per_gpu = 1e9;
  };
  cases.push_back({"input loader", loader});
  cases.push_back({"input loader, deepspeed, every replica", [&](auto& p) {
                     loader(p);
                     p.zero_stage = 3, p.framework = strategies::framework_defaults(Framework::DeepSpeed), p.all_replicas = true;
                   }});
  cases.push_back({"priority order", [](auto& p) { p.priority_buckets = true; }});
  cases.push_back({"priority order, offload, every replica",
                   [](auto& p) { p.priority_buckets = true, p.activation_offload = true, p.all_replicas = true; }});
  cases.push_back({"priority order, 2 stages, every replica",
                   [](auto& p) { p.priority_buckets = true, p.pipeline = 2, p.data = 4, p.all_replicas = true; }});
  cases.push_back({"optimizer offload, zero2", [](auto& p) { p.offload_optimizer = true, p.zero_stage = 2; }});
  cases.push_back({"optimizer offload, 2 stages, compression",
                   [](auto& p) { p.offload_optimizer = true, p.pipeline = 2, p.data = 4, p.compression = strategies::Compression::Int8; }});
  cases.push_back({"optimizer offload, deepspeed, every replica", [](auto& p) {
                     p.offload_optimizer = true, p.zero_stage = 3, p.all_replicas = true;
                     p.framework = strategies::framework_defaults(Framework::DeepSpeed);
                   }});
  cases.push_back({"async", [](auto& p) { p.updates = strategies::Updates::Async; }});
  cases.push_back({"hogwild, input loader", [&](auto& p) { p.updates = strategies::Updates::Hogwild, loader(p); }});
  cases.push_back({"easgd", [](auto& p) { p.updates = strategies::Updates::Easgd, p.easgd_period = 3; }});
  for (const auto& [name, change] : cases) {
    SCOPED_TRACE(name);
    const auto c = count_and_plan(gpt2(change));
    expect_counts_match(c);
    double emitted = 0;  // by the units (ZeRO's has nothing to do beside a framework's ZeRO-3)
    for (const auto& [unit, n] : c.counted) emitted += n;
    EXPECT_GT(emitted, 0);
  }
}

// Megatron-Core's overlapped parameter gather: a gather per layer in the first forward, not one
// after the step.
TEST(Units, OverlappedParamGatherEmitsWhatItCounts) {
  std::vector<std::pair<const char*, std::function<void(strategies::ParallelismSpec&)>>> cases = {
      {"zero1", [](auto& p) { p.zero_stage = 1, p.overlap_param_gather = true; }},
      {"zero2, every replica", [](auto& p) { p.zero_stage = 2, p.overlap_param_gather = true, p.all_replicas = true; }},
      {"zero1, interleaved",
       [](auto& p) {
         p.pipeline = 2, p.data = 2, p.schedule = Schedule::Interleaved, p.virtual_stages = 2;
         p.zero_stage = 1, p.overlap_param_gather = true;
       }},
  };
  for (const auto& [name, change] : cases) {
    SCOPED_TRACE(name);
    const auto c = count_and_plan(gpt2(change));
    expect_counts_match(c);
    EXPECT_GT(c.counted.at("zero"), 0);
  }
}

// Shared experts beside the all-to-alls (Megatron-Core's overlap): two more tasks per MoE pass.
TEST(Units, SharedExpertOverlapEmitsWhatItCounts) {
  test::TempDir dir;
  for (const char* extra : {"", R"(, "moe_shared_expert_overlap": true)", R"(, "moe_shared_expert_overlap": true, "recompute": "full")",
                            R"(, "moe_shared_expert_overlap": true, "recompute": "selective", "recompute_modules": ["moe"])"}) {
    SCOPED_TRACE(extra);
    const auto s = test::moe_scenario(dir, 2, std::string(R"("data": 16, "expert": 8, "micro_batch_size": 1)") + extra,
                                      R"(, "shared_experts": 1)");
    expect_counts_match(count_and_plan(s));
  }
}

// A small MoE transformer (4 blocks of 16 SwiGLU experts, top-2) on two DGX H100 nodes,
// micro-batch 1, global batch 64, with `parallelism` merged in (and `extra` keys).
config::Scenario moe(const std::string& parallelism, const std::string& extra = "") {
  test::TempDir dir;
  return config::load_scenario(dir.file("moe.json", R"({"name": "moe", "model": {"kind": "transformer", "num_layers": 4,
      "hidden_size": 1024, "num_heads": 8, "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu",
      "tied_embeddings": false, "linear_bias": false, "dropout": false, "num_experts": 16, "experts_per_token": 2,
      "expert_ffn_hidden_size": 2048},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
    "parallelism": {"micro_batch_size": 1, )" + parallelism + R"(},
    "training": {"global_batch_size": 64, "attention": "flash"}, "simulation": {"backend": "analytical"})" + extra + "}"));
}

// Expert parallelism's MoE passes and all-to-alls, with ZeRO's expert halves, a skewed router's
// most loaded GPU, full recomputation's forward again, and every replica joining its group's
// all-to-alls.
TEST(Units, ExpertParallelismEmitsWhatItCounts) {
  for (const char* parallelism :
       {R"("data": 16, "expert": 8)", R"("data": 16, "expert": 8, "zero_stage": 1)", R"("data": 16, "expert": 8, "zero_stage": 2)",
        R"("data": 16, "expert": 8, "zero_stage": 3)", R"("data": 16, "expert": 8, "zero_stage": 1, "overlap_param_gather": true)", R"("data": 16, "expert": 4, "expert_skew": 0.5, "recompute": "full")",
        R"("data": 8, "expert": 4, "pipeline": 2, "zero_stage": 2)", R"("data": 8, "expert": 4, "pipeline": 2, "zero_stage": 3)",
        // folded over tensor x data ranks (expert > data), and expert tensor parallelism 1 under TP 2
        R"("tensor": 2, "data": 8, "expert": 16, "expert_tensor": 1, "sequence_parallel": true)",
        R"("tensor": 2, "data": 8, "expert": 4, "expert_tensor": 1, "zero_stage": 2)",
        R"("tensor": 2, "data": 8, "expert": 4, "expert_tensor": 1, "zero_stage": 3)",
        // the all-to-alls inline on the pieces before them, paired or alone
        R"("data": 16, "expert": 8, "moe_a2a_overlap": "megatron-1f1b")",
        R"("data": 8, "expert": 4, "pipeline": 2, "pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2, "moe_a2a_overlap": "megatron-1f1b")",
        R"("data": 16, "expert": 4, "expert_skew": 0.5, "recompute": "full", "moe_a2a_overlap": "dualpipe")",
        // the fsdp framework's gathers per block, the MoE layers handed to the experts unit; expert-data 2 and 1
        R"("data": 16, "expert": 8, "zero_stage": 3, "framework": "fsdp")",
        R"("data": 16, "expert": 4, "expert_skew": 0.5, "recompute": "full", "zero_stage": 3, "framework": "fsdp")",
        R"("tensor": 2, "data": 8, "expert": 16, "expert_tensor": 1, "zero_stage": 3, "framework": "fsdp")",
        // expert parallelism over context ranks (with the ring inline in the attention's piece)
        R"("data": 8, "context": 2, "expert": 8, "zero_stage": 1)",
        R"("tensor": 2, "data": 4, "context": 2, "expert": 8, "expert_tensor": 1, "sequence_parallel": true, "recompute": "full")",
        R"("data": 8, "context": 2, "expert": 8, "zero_stage": 3, "framework": "fsdp")",
        R"("data": 4, "context": 2, "pipeline": 2, "expert": 8, "zero_stage": 2)",
        R"("data": 8, "context": 2, "expert": 8, "moe_a2a_overlap": "megatron-1f1b")",
        // Megatron-Core's moe recompute module: each MoE layer's forward again, all-to-alls included
        R"("data": 16, "expert": 4, "expert_skew": 0.5, "recompute": "selective", "recompute_modules": ["moe"])",
        R"("tensor": 2, "data": 8, "expert": 4, "sequence_parallel": true, "recompute": "selective", "recompute_modules": ["moe", "layernorm"])",
        R"("data": 16, "expert": 8, "zero_stage": 3, "framework": "fsdp", "recompute": "selective", "recompute_modules": ["moe"])"}) {
    SCOPED_TRACE(parallelism);
    const auto c = count_and_plan(moe(parallelism));
    ASSERT_TRUE(c.counted.count("experts"));
    EXPECT_GT(c.counted.at("experts"), 0);
    expect_counts_match(c);
  }
  for (const char* zero : {"1", "2", "3"}) {  // every replica joining
    SCOPED_TRACE(std::string("every replica, zero ") + zero);
    expect_counts_match(count_and_plan(moe(std::string(R"("data": 16, "expert": 8, "zero_stage": )") + zero, R"(, "stragglers": {"seed": 1})")));
  }
  SCOPED_TRACE("every replica, fsdp");
  expect_counts_match(count_and_plan(moe(R"("data": 16, "expert": 8, "zero_stage": 3, "framework": "fsdp")", R"(, "stragglers": {"seed": 1})")));
}

// The counts by hand for GPT-2's 14 layers (embedding, 12 blocks, head) on one stage, 2
// micro-batches: ZeRO-3 gathers every layer before its forward and backward and reduce-scatters
// it after its backward, 3 x 14 x 2 = 84; ZeRO-2 reduce-scatters after every micro-batch but the
// last, 1, and gathers the parameters after the step, 1; activation offload copies each layer
// down and back, 2 x 14 x 2 = 56 (every layer keeps activations).
TEST(Units, CountsByHandForGpt2) {
  const auto zero3 = count_and_plan(gpt2([](auto& p) { p.zero_stage = 3; }));
  EXPECT_EQ(zero3.counted.at("zero"), 84);
  const auto zero2 = count_and_plan(gpt2([](auto& p) { p.zero_stage = 2; }));
  EXPECT_EQ(zero2.counted.at("zero"), 2);
  const auto offload = count_and_plan(gpt2([](auto& p) { p.activation_offload = true; }));
  EXPECT_EQ(offload.counted.at("activation-offload"), 56);
  EXPECT_EQ(offload.emitted.at("activation-offload"), 56u);
  // Asynchronous workers, each with its own tasks: 8 x (push and pull, take the new weights) = 16;
  // EASGD every 3 local steps: 8 x (2 local steps between, 1 before the exchange, the exchange,
  // the elastic update) = 40.
  const auto async = count_and_plan(gpt2([](auto& p) { p.updates = strategies::Updates::Async; }));
  EXPECT_EQ(async.counted.at("async-updates"), 16);
  const auto easgd = count_and_plan(gpt2([](auto& p) { p.updates = strategies::Updates::Easgd, p.easgd_period = 3; }));
  EXPECT_EQ(easgd.counted.at("async-updates"), 40);
}

// ZeRO-3's step, worked by hand for two layers (gathers 1 and 2 s, reduce-scatters 0.5 s,
// forwards 3 s, backwards 4 s, the optimizer 1 s). First micro-batch: gathers end at 1 and 3,
// forwards at 4 and 7; backward of layer 1 after its gather (3 + 2 = 5) at 11, its reduce at
// 11.5; layer 0's gather at 12.5, its backward at 16.5, its reduce at 17: with the optimizer 18.
// A second micro-batch starts its gathers at 17: 18, 20; forwards 21, 24; layer 1 backward 28,
// reduce 28.5; gather 29.5, backward 33.5, reduce 34: 35.
TEST(Units, Zero3ClosedFormTermByHand) {
  strategies::Zero3Prices z;
  z.gather = {1, 2};
  z.reduce = {0.5, 0.5};
  z.forward = {3, 3};
  z.backward = {4, 4};
  z.optimizer = 1;
  z.micro_batches = 1;
  EXPECT_DOUBLE_EQ(strategies::zero3_step_seconds(z), 18);
  z.micro_batches = 2;
  EXPECT_DOUBLE_EQ(strategies::zero3_step_seconds(z), 35);
  // ZeRO-1: the step of the shard, then the parameters' all-gather.
  EXPECT_DOUBLE_EQ(strategies::zero1_stage_end(2, 3, 4), 9);
  // Overlapped (overlap_param_gather): gathers 2, 0 (no parameters), 5 against forwards 1, 1, 1:
  // the forwards end at 3, 4 and max(4, 7) + 1 = 8 where they would end at 3 without gathers.
  EXPECT_DOUBLE_EQ(strategies::overlapped_gather_delay({2, 0, 5}, {1, 1, 1}), 5);
  EXPECT_DOUBLE_EQ(strategies::overlapped_gather_delay({0.5, 0.5}, {1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(strategies::overlapped_gather_delay({}, {}), 0);
}

// What the closed form leaves to the replay, unit by unit; a strategy without them has no unit.
TEST(Units, SayWhatTheClosedFormLeavesToTheReplay) {
  auto gap = [](const std::function<void(strategies::ParallelismSpec&)>& change, const std::string& name) {
    strategies::ParallelismSpec p;
    change(p);
    return strategies::replay_only(strategies::make_units(p), name, p);
  };
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 2, p.data = 8; }, "zero"), "ZeRO stage");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 1, p.data = 8; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 1, p.data = 8, p.overlap_param_gather = true; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 1, p.data = 4, p.pipeline = 2, p.overlap_param_gather = true; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 3, p.data = 8; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 3, p.data = 8, p.pipeline = 2; }, "zero"), "ZeRO-3 with pipeline parallelism");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 3, p.data = 8, p.shard_size = 4; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 3, p.data = 8, p.shard_size = 1; }, "zero"), "hybrid sharding without shards (shard_size 1)");
  EXPECT_EQ(gap([](auto& p) { p.zero_stage = 3, p.data = 8, p.shard_size = 8; }, "zero"), "");
  EXPECT_EQ(gap([](auto& p) { p.activation_offload = true; }, "activation-offload"), "activation offload");
  EXPECT_EQ(gap(
                [](auto& p) {
                  p.zero_stage = 3, p.data = 8, p.framework = strategies::framework_defaults(strategies::Framework::Fsdp);
                },
                "framework-zero3"),
            "framework behaviour (deepspeed, fsdp)");
  EXPECT_EQ(gap([](auto& p) { p.input.enabled = true; }, "input-loader"), "input pipeline");
  EXPECT_EQ(gap([](auto& p) { p.offload_optimizer = true; }, "optimizer-offload"), "optimizer offload");
  EXPECT_EQ(gap([](auto& p) { p.expert = 2, p.data = 2; }, "experts"), "expert parallelism");
  EXPECT_EQ(gap([](auto& p) { p.priority_buckets = true; }, "priority-buckets"), "priority buckets");
  EXPECT_EQ(gap([](auto& p) { p.updates = strategies::Updates::Hogwild; }, "async-updates"), "asynchronous updates");
  EXPECT_EQ(gap([](auto& p) { p.fusion.cycle_s = 5e-3, p.fusion.threshold_bytes = 64 << 20; }, "tensor-fusion"), "tensor fusion (Horovod)");
  EXPECT_EQ(gap([](auto& p) { p.framework = strategies::framework_defaults(strategies::Framework::DeepSpeed); }, "bf16-optimizer"),
            "DeepSpeed's BF16_Optimizer");
  EXPECT_TRUE(strategies::make_units(strategies::ParallelismSpec{}).empty());
  EXPECT_EQ(strategies::unit_names(), (std::vector<std::string>{"input-loader", "activation-offload", "priority-buckets", "experts",
                                                                 "zero", "optimizer-offload", "framework-zero3", "async-updates", "tensor-fusion",
                                                                 "bf16-optimizer"}));
}

// The kinds of pass a stage's chunk runs, counted from the schedule itself: what the units count with.
TEST(Units, PassKindsAreWhatTheSchedulesRun) {
  for (const Schedule sched : strategies::all_schedules())
    for (int p : {1, 2, 4})
      for (int m : {4, 8}) {
        const int v = sched->chunked ? 2 : 1;
        for (int stage = 0; stage < p; ++stage) {
          SCOPED_TRACE(std::string(strategies::to_string(sched)) + " p" + std::to_string(p) + " m" + std::to_string(m) + " s" +
                       std::to_string(stage));
          const auto q = strategies::stage_schedule(sched, p, stage, m, v);
          std::map<int, std::size_t> last_backward;
          for (std::size_t i = 0; i < q.size(); ++i)
            if (!q[i].forward) last_backward[q[i].chunk] = i;
          std::map<std::tuple<bool, int, bool, bool, bool>, std::int64_t> seen, want;
          auto key = [](const strategies::PassKind& k) {
            return std::make_tuple(k.forward, static_cast<int>(k.part), k.final, k.first, k.previous_step);
          };
          for (std::size_t i = 0; i < q.size(); ++i)
            if (q[i].chunk == 0) ++seen[key(strategies::kind_of(q[i], !q[i].forward && last_backward[0] == i))];
          for (const auto& [kind, n] : strategies::pass_kinds(sched, p, stage, m)) want[key(kind)] += n;
          EXPECT_EQ(seen, want);
        }
      }
}

// The layout every consumer reads (strategies/layout.hpp): micro-batches from the batch, chunks
// from the schedule, the ranks summing gradients, the replicas given their own tasks.
TEST(Layout, DerivedOnceFromTheStrategyAndTheBatch) {
  strategies::ParallelismSpec p;
  p.data = 4, p.pipeline = 2, p.tensor = 2, p.context = 2, p.micro_batch = 2;
  p.schedule = Schedule::Interleaved, p.virtual_stages = 3;
  strategies::TrainingSpec t;
  t.global_batch = 64;
  const auto k = strategies::layout_of(p, t);
  EXPECT_EQ(k.micro_batches, 8);  // 64 / (4 x 2)
  EXPECT_EQ(k.virtual_stages, 3);
  EXPECT_EQ(k.chunks, 6);
  EXPECT_EQ(k.stage_of(5), 1);
  EXPECT_EQ(k.grad_ranks, 8);  // data x context
  EXPECT_EQ(k.gpus(), 32);
  EXPECT_EQ(k.replicas, 1);
  p.schedule = Schedule::OneFOneB;  // virtual stages only interleave under interleaved 1F1B
  EXPECT_EQ(strategies::layout_of(p, t).chunks, 2);
  p.all_replicas = true;
  EXPECT_EQ(strategies::layout_of(p, t).replicas, 4);
  // Laid out over a model: each chunk's layers, the embedding first and the head last.
  const auto s = gpt2([](auto& q) { q.pipeline = 2, q.data = 4; });
  const auto graph = s.model.build(config::build_options(s));
  const auto laid = strategies::layout_of(graph, s.parallelism, s.training);
  ASSERT_EQ(laid.chunk_layers.size(), 2u);
  EXPECT_EQ(laid.chunk_layers[0].front()->kind, models::LayerKind::Embedding);
  EXPECT_EQ(laid.chunk_layers[1].back()->kind, models::LayerKind::Head);
  EXPECT_EQ(laid.stage_layers(0).size() + laid.stage_layers(1).size(), graph.layers.size());
  // The planner's checks, before anything is emitted.
  auto odd = s.parallelism;
  odd.micro_batch = 3;
  EXPECT_THROW(strategies::layout_of(graph, odd, s.training), std::invalid_argument);
}
