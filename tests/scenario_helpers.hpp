#pragma once
// Scenarios that extend the shared valid base, for tests that load or simulate them.
#include <string>

#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

namespace dtsim::test {

// What every result shows: a positive step whose breakdown parts are each >= 0 and sum to it.
inline void expect_parts_sum_to_step(const results::Result& r) {
  const auto& b = r.breakdown;
  EXPECT_GT(r.step_time_s, 0.0);
  for (double part : {b.compute, b.exposed_communication, b.pipeline_bubble, b.stage_imbalance, b.optimizer, b.straggler_wait,
                      b.input_stall})
    EXPECT_GE(part, 0.0);
  EXPECT_NEAR(b.total(), r.step_time_s, 1e-6 * r.step_time_s);
}

// tiny-gpt (4 blocks, hidden 256, sequence 256, vocabulary 4096, tied embeddings) on 8 GPUs of
// two 4-GPU nodes, data 8, ZeRO-3, micro-batch 4, global batch 64: 2 micro-batches per step, bf16.
inline constexpr const char* kTinyGptZero3 = R"({
  "schema_version": 1, "name": "tiny",
  "model": {"preset": "tiny-gpt"},
  "hardware": {"device": "a100-sxm-80gb"},
  "cluster": {"nodes": 2, "gpus_per_node": 4,
              "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
              "inter_node": {"nics_per_node": 4, "nic_bandwidth_GBps": 25, "latency_us": 5}},
  "parallelism": {"data": 8, "micro_batch_size": 4, "zero_stage": 3},
  "training": {"global_batch_size": 64, "precision": "bf16"},
  "simulation": {"backend": "analytical"}
})";

// `json` extends "base.json", written beside it as `base`.
inline results::Result simulate_over(const std::string& base, const std::string& json) {
  TempDir dir;
  dir.file("base.json", base);
  return results::simulate(config::load_scenario(dir.file("s.json", json)));
}
inline results::Result simulate_over_base(const std::string& json) { return simulate_over(kValidScenario, json); }

// The input error `json` (extending `base`) gives, as "pointer: reason"; empty when it loads.
inline std::string input_error_over(const std::string& base, const std::string& json) {
  TempDir dir;
  dir.file("base.json", base);
  try {
    config::load_scenario(dir.file("s.json", json));
  } catch (const InputError& e) {
    return e.pointer() + ": " + e.reason();
  }
  return "";
}
inline std::string input_error_over_base(const std::string& json) { return input_error_over(kValidScenario, json); }

// A 4-block Llama-shaped model (hidden 1,024, 16 heads of which 4 KV, SwiGLU 3,072, 2,048-token
// sequences, flash attention) on the base scenario's 8 GPUs as H100s, analytical, with
// `parallelism`'s keys and `global_batch`; its breakdown checked against the step.
inline results::Result small_llama_step(const std::string& parallelism, int global_batch) {
  const auto r = simulate_over_base(R"({"extends": "base.json",
    "model": {"kind": "transformer", "num_layers": 4, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 4,
              "ffn_hidden_size": 3072, "seq_len": 2048, "vocab_size": 32000, "mlp": "swiglu", "norm": "rmsnorm",
              "linear_bias": false, "position_embedding": "rotary", "dropout": false},
    "hardware": {"device": "h100-sxm-80gb"},
    "parallelism": {)" + parallelism + R"(},
    "training": {"global_batch_size": )" + std::to_string(global_batch) + R"(, "attention": "flash"},
    "simulation": {"backend": "analytical"}})");
  expect_parts_sum_to_step(r);
  return r;
}

}  // namespace dtsim::test
