#pragma once
// A small MoE transformer for the expert-parallelism tests (test_moe.cpp, test_moe_folding.cpp).
#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"

namespace dtsim::test {

// A small MoE transformer on `nodes` DGX H100 nodes, analytical backend; `parallelism` and
// `extra_model` are spliced into the JSON.
inline config::Scenario moe_scenario(const TempDir& dir, int nodes, const std::string& parallelism,
                              const std::string& extra_model = "", int experts = 16) {
  const std::string json = R"({"name": "moe", "model": {"kind": "transformer", "num_layers": 4, "hidden_size": 1024,
      "num_heads": 8, "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu",
      "tied_embeddings": false, "linear_bias": false, "dropout": false, "num_experts": )" +
                           std::to_string(experts) + R"(, "experts_per_token": 2, "expert_ffn_hidden_size": 2048)" +
                           extra_model + R"(},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": )" +
                           std::to_string(nodes) + R"(},
    "parallelism": {)" + parallelism + R"(},
    "training": {"global_batch_size": 64, "attention": "flash"}, "simulation": {"backend": "analytical"}})";
  return config::load_scenario(dir.file("moe.json", json));
}

}  // namespace dtsim::test
