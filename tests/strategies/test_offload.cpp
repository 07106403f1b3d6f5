// Issue 17 item 3: host memory as a memory tier of its own, ZeRO-Offload's PCIe traffic and CPU
// optimizer step as tasks, and activation offload.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "helpers.hpp"
#include "pipeline_offload_case.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"
#include "strategies/memory.hpp"

using namespace dtsim;

namespace {

// A 10B GPT (50 blocks of hidden 4096: 12 x 50 x 4096^2 = 10.07e9 in the blocks) on one V100 of
// a host with 100 GB/s of memory bandwidth, 48 cores and `host_memory`: ZeRO-2 with the
// optimizer offloaded, fp16.
const char* kTenB = R"({
  "schema_version": 1, "name": "offload-10b",
  "model": {"kind": "transformer", "num_layers": 50, "hidden_size": 4096, "num_heads": 32, "seq_len": 1024,
            "vocab_size": 50257},
  "hardware": {"device": "v100-sxm-32gb", "host_memory_bandwidth_GBps": 100, "host_cores": 48, "host_memory_GB": HOST},
  "cluster": {"nodes": 1, "gpus_per_node": 1, "intra_node": {"bandwidth_GBps": 150, "latency_us": 3},
              "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 12.5, "latency_us": 5}},
  "parallelism": {"micro_batch_size": 4, "zero_stage": 2, "offload_optimizer": true, "recompute": "full",
                  "framework": "deepspeed"},
  "training": {"global_batch_size": 8, "precision": "fp16"},
  "simulation": {"backend": "analytical"}
})";

std::string ten_b(const std::string& host_gb) {
  std::string s = kTenB;
  s.replace(s.find("HOST"), 4, host_gb);
  return s;
}

results::Result simulate_text(const std::string& json) {
  test::TempDir dir;
  return results::simulate(config::load_scenario(dir.file("s.json", json)));
}

// tiny-gpt on `gpus` A100s of one node, with `parallelism`.
std::string tiny_base(int gpus, const std::string& parallelism) {
  return R"({
    "schema_version": 1, "name": "tiny",
    "model": {"preset": "tiny-gpt"},
    "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"nodes": 1, "gpus_per_node": )" + std::to_string(gpus) + R"(, "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
                "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 25, "latency_us": 5}},
    "parallelism": )" + parallelism + R"(,
    "training": {"global_batch_size": )" + std::to_string(16 * gpus) + R"(},
    "simulation": {"backend": "analytical"}
  })";
}

// tiny-gpt on one A100, GPipe over 4 micro-batches (all forwards, then all backwards).
results::Result tiny(const std::string& extra) {
  test::TempDir dir;
  dir.file("base.json", tiny_base(1, R"({"micro_batch_size": 4, "pipeline_schedule": "gpipe"})"));
  return results::simulate(config::load_scenario(
      dir.file("s.json", R"({"extends": "base.json", "parallelism": {"pipeline_schedule": "gpipe")" + extra + "}}")));
}

}  // namespace

// ZeRO-Offload keeps the fp32 master weights and Adam's two moments (12 bytes per parameter) and
// the fp32 gradient partition (4) in host memory: 16 bytes per parameter, 161 GB for 10B, which a
// 1.5 TB DGX-2 holds and a 128 GB host does not.
TEST(Offload, HostHoldsSixteenBytesPerParameterForAdam) {
  const auto r = simulate_text(ten_b("1500"));
  const double p = r.params;
  EXPECT_GT(p, 10e9);
  EXPECT_NEAR(r.plan.host_optimizer_bytes, 12.0 * p, 1e-6 * p);
  EXPECT_NEAR(r.plan.host_gradient_bytes, 4.0 * p, 1e-6 * p);
  const auto j = results::to_json(r, false);
  ASSERT_TRUE(j.contains("host_memory"));
  EXPECT_NEAR(j["host_memory"]["bytes_per_node"].get<double>(), 16.0 * p, 1.0);
  EXPECT_EQ(j["host_memory"]["capacity_bytes_per_node"].get<double>(), 1.5e12);
  EXPECT_TRUE(j["host_memory"]["fits"].get<bool>());

  const auto small = simulate_text(ten_b("128"));
  const auto js = results::to_json(small, false);
  EXPECT_FALSE(js["host_memory"]["fits"].get<bool>());
  bool warned = false;
  for (const auto& w : small.warnings) warned = warned || w.find("host memory does not fit") != std::string::npos;
  EXPECT_TRUE(warned);
}

// Each step 16-bit gradients go down and 16-bit parameters come up (Ren et al. 2021, Sec. 4.1:
// 2M bytes each way): 4 bytes per parameter over PCIe, as copy tasks. The CPU Adam step reads and
// writes 30 bytes per parameter at the host's memory bandwidth (it is memory-bound: 12 FLOP per
// parameter on 48 cores of 72 GFLOP/s takes far less).
TEST(Offload, PcieTrafficAndTheHostStepAreTasks) {
  const auto r = simulate_text(ten_b("1500"));
  const double p = r.params;
  EXPECT_NEAR(r.plan.pcie_bytes_per_step, 4.0 * p, 1e-6 * p);
  int copies = 0;
  for (const auto& t : r.plan.graph.tasks) copies += t.category == taskgraph::Category::Copy;
  EXPECT_GE(copies, 2);
  double host_step = -1;
  for (const auto& w : r.plan.graph.works)
    if (w.name == "host optimizer") host_step = w.fixed_seconds;
  EXPECT_NEAR(host_step, 30.0 * p / 100e9, 1e-9);
  // The GPU holds fp16 weights and two 5e8-element gradient buckets, not 2 bytes per gradient.
  EXPECT_NEAR(r.memory.gradients, 2 * 5e8 * 2.0, 1.0);
  EXPECT_TRUE(r.fits);
}

// Gradients go down bucket by bucket as backward produces them: the first copy starts before the
// backward ends.
TEST(Offload, GradientCopiesOverlapTheBackward) {
  const auto r = simulate_text(ten_b("1500"));
  const auto& g = r.plan.graph;
  double first_copy = 1e30, last_backward = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].category == taskgraph::Category::Copy && g.tasks[i].label().rfind("gradients to host", 0) == 0)
      first_copy = std::min(first_copy, r.timeline.start[i]);
    if (g.tasks[i].category == taskgraph::Category::Compute) last_backward = std::max(last_backward, r.timeline.end[i]);
  }
  EXPECT_LT(first_copy, last_backward);
}

// Activation offload: each layer's saved activations go to the host after its forward and come
// back before its backward. Under GPipe 4 micro-batches are alive at once: the host holds all 4,
// the GPU two layers' worth (the one computed and the one in flight). Copies on the compute
// stream (DeepSpeed's cpu_checkpointing, FSDP's save_on_cpu) add their time to the step exactly;
// Megatron-Core's overlapped copies add less.
TEST(Offload, ActivationOffloadMovesActivationsOverPcie) {
  const auto plain = tiny("");
  const double kept = plain.memory.activations / 4.0;  // GPipe's peak: 4 micro-batches
  const auto blocking = tiny(R"(, "activation_offload": true, "framework": "fsdp")");
  const auto overlapped = tiny(R"(, "activation_offload": true)");
  EXPECT_NEAR(blocking.plan.host_activation_bytes, 4.0 * kept, 1.0);
  const auto& sc = blocking.scenario_spec;
  const auto graph = sc.model.build(models::BuildOptions{sc.parallelism.micro_batch, strategies::activation_bytes(sc.training.precision),
                                                         sc.training.attention, 1, false});
  double layer = 0;
  for (const auto& l : graph.layers) layer = std::max(layer, strategies::kept_activations({&l}, strategies::Recompute::None));
  EXPECT_LT(2.0 * layer, kept);
  EXPECT_NEAR(blocking.memory.activations, 2.0 * layer, 1.0);
  EXPECT_NEAR(blocking.plan.pcie_bytes_per_step, 8.0 * kept, 1.0);
  // Each copy also pays the latencies of the GPU's PCIe link and the host's memory link.
  const double pcie = blocking.scenario_spec.host.pcie_bandwidth;
  int copies = 0;
  for (const auto& t : blocking.plan.graph.tasks) copies += t.category == taskgraph::Category::Copy;
  EXPECT_NEAR(blocking.step_time_s - plain.step_time_s, 8.0 * kept / pcie + copies * 2e-6, 1e-9);
  EXPECT_LT(overlapped.step_time_s, blocking.step_time_s);
  const auto j = results::to_json(blocking, false);
  EXPECT_NEAR(j["host_memory"]["activations_bytes_per_gpu"].get<double>(), 4.0 * kept, 1.0);
}

// SimGrid runs the copies on the copy engines beside the GPU, as the analytical replay does: with
// one GPU and no network both give the same step (the only SimGrid test of this binary).
TEST(Offload, SimGridRunsCopiesBesideTheGpu) {
  const auto analytical = tiny(R"(, "activation_offload": true)");
  test::TempDir dir;
  dir.file("base.json", R"({
    "schema_version": 1, "name": "tiny-1",
    "model": {"preset": "tiny-gpt"},
    "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"nodes": 1, "gpus_per_node": 1, "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
                "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 25, "latency_us": 5}},
    "parallelism": {"micro_batch_size": 4, "pipeline_schedule": "gpipe", "activation_offload": true},
    "training": {"global_batch_size": 16},
    "simulation": {"backend": "simgrid"}
  })");
  const auto simgrid = results::simulate(config::load_scenario(dir.path("base.json")));
  EXPECT_EQ(simgrid.timeline.backend, "simgrid");
  EXPECT_NEAR(simgrid.step_time_s, analytical.step_time_s, 1e-6 * analytical.step_time_s);
}

// ZeRO-2 keeps only its shard of the gradients, so each micro-batch but the last reduce-scatters
// them; activation offload splits the backward per layer, and must not lose those reduces.
TEST(Offload, ActivationOffloadKeepsZero2PerMicroBatchReduces) {
  test::TempDir dir;
  dir.file("base.json", tiny_base(2, R"({"micro_batch_size": 4, "data": 2, "zero_stage": 2})"));
  auto reduces = [&](const std::string& extra) {
    const auto r = results::simulate(config::load_scenario(dir.file("s.json", R"({"extends": "base.json")" + extra + "}")));
    int n = 0;
    for (const auto& t : r.plan.graph.tasks) n += t.is_collective && t.label().rfind("zero2 reduce", 0) == 0;
    return n;
  };
  EXPECT_EQ(reduces(""), 3);  // 4 micro-batches per replica
  EXPECT_EQ(reduces(R"(, "parallelism": {"activation_offload": true})"), 3);
}

// Pipeline parallelism: each stage's GPU copies on its own copy engines, so stage 1's copies never
// queue behind stage 0's (they did when all stages shared one copy stream), whether the copies
// are overlapped or on the compute stream.
TEST(Offload, PipelineStagesCopyOnTheirOwnEngines) {
  for (const char* copies : {"overlapped", "blocking"}) {
    SCOPED_TRACE(copies);
    const auto r = test::pipeline_offload(
        2, 1, 2, std::string(R"(, "activation_offload": true, "activation_offload_copies": ")") + copies + "\"", "analytical");
    test::expect_copies_apart(r);
    test::expect_parts_sum_to_step(r);
  }
}

// ZeRO-Offload with two stages: stage 1 finishes its backward first and its gradients go down at
// once, not after stage 0's.
TEST(Offload, PipelineStagesSendGradientsToTheHostApart) {
  const auto r = test::pipeline_offload(2, 1, 2, R"(, "zero_stage": 1, "offload_optimizer": true)", "analytical");
  test::expect_copies_apart(r);
  test::expect_parts_sum_to_step(r);
  const auto& g = r.plan.graph;
  double first[2] = {1e30, 1e30};
  for (std::size_t i = 0; i < g.tasks.size(); ++i)  // stage s on GPU s
    if (g.tasks[i].label().rfind("gradients to host", 0) == 0) {
      double& f = first[g.tasks[i].rank == 0 ? 0 : 1];
      f = std::min(f, r.timeline.start[i]);
    }
  EXPECT_LT(first[1], first[0]);
}

// Two stages on GPUs of different nodes share no PCIe switch and no host memory: each copy takes
// what the same bytes take on one GPU alone, bytes / 32 GB/s plus two 1 us latencies.
TEST(Offload, StagesOnTwoNodesCopyAsOneGpuAlone) {
  const std::string offload = R"(, "activation_offload": true)";
  const auto alone = test::pipeline_offload(1, 1, 1, offload, "analytical");
  const auto r = test::pipeline_offload(2, 2, 1, offload, "analytical");
  test::expect_copies_as_alone(r, alone);
  test::expect_copies_apart(r);
  test::expect_parts_sum_to_step(r);
}

// With every replica simulated (stragglers on, none slow) each replica's stages copy apart too,
// and the step is the representative's.
TEST(Offload, EveryReplicaAndStageCopiesApart) {
  const std::string offload = R"(, "activation_offload": true, "data": 2)";
  const auto every = test::pipeline_offload(2, 1, 4, offload, "analytical", "", R"(, "stragglers": {"seed": 1})");
  const auto one = test::pipeline_offload(2, 1, 4, offload, "analytical");
  ASSERT_GT(every.plan.replicas, 1);
  test::expect_copies_apart(every);
  test::expect_copies_apart(one);
  test::expect_parts_sum_to_step(every);
  EXPECT_NEAR(every.step_time_s, one.step_time_s, 1e-9 * one.step_time_s);
}
