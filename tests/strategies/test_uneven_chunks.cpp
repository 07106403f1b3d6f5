// Issue 30 item 2: uneven virtual pipeline stages (parallelism.stage_layers with one count per model
// chunk), against the interleaved schedule's closed forms.
#include <gtest/gtest.h>

#include <string>

#include "llama_spec.hpp"
#include "helpers.hpp"
#include "models/model_graph.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "strategies/plan.hpp"

using namespace dtsim;

namespace {

// Llama-shaped, no dropout: the embedding keeps nothing, so a chunk keeps its blocks' alone.
models::ModelGraph llama(int layers) {
  return models::build_transformer(test::small_llama(layers), {1, 2, models::Attention::Flash, 1, false});
}

// 4 stages of 2 virtual stages, 8 samples a step, the model chunks holding `blocks`.
strategies::PlanLayout interleaved(const models::ModelGraph& g, std::vector<int> blocks, strategies::Recompute r) {
  strategies::ParallelismSpec p;
  p.pipeline = 4;
  p.virtual_stages = 2;
  p.schedule = strategies::Schedule::Interleaved;
  p.recompute = r;
  p.stage_blocks = std::move(blocks);
  strategies::TrainingSpec t;
  t.global_batch = 8;
  return strategies::plan_layout(g, p, t, {});
}

}  // namespace

// Megatron-LM's uneven first and last stages under interleaving (--decoder-first/last-pipeline-
// num-layers 4 of 24 layers, 4 stages, 2 virtual stages): chunks [2, 4, 4, 2, 2, 4, 4, 2], each
// stage's two chunks alike. Interleaved 1F1B holds stage s's first W_s + 1 forwards at its peak,
// W_s = 2 (p - s - 1) + (v - 1) p (Megatron's schedules.py warm-up): under full recomputation
// (W_s + 1) x blocks per chunk x one block's input, and one block rebuilt.
TEST(UnevenChunks, InterleavedMemoryIsTheWarmUpsChunksInFlight) {
  const auto g = llama(24);
  const auto laid = interleaved(g, {2, 4, 4, 2, 2, 4, 4, 2}, strategies::Recompute::Full);
  const auto& b = g.layers[1];
  const int blocks[] = {2, 4, 4, 2};
  for (int s = 0; s < 3; ++s) {  // the last stage also keeps the head's logits
    const int warm = 2 * (4 - s - 1) + (2 - 1) * 4;
    EXPECT_DOUBLE_EQ(laid.plan.stage_memory[static_cast<std::size_t>(s)].activations,
                     (warm + 1) * blocks[s] * b.input_bytes + b.saved_bytes())
        << s;
  }
  EXPECT_EQ(laid.plan.stage_layers, (std::vector<int>{4, 8, 8, 4}));
}

namespace {
std::string error_of(const std::string& parallelism) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  try {
    config::load_scenario(dir.file("c.json", R"({"extends": "base.json", "cluster": {"nodes": 2}, "parallelism": )" + parallelism + "}"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(UnevenChunks, OneCountPerModelChunk) {
  const std::string base = R"({"data": 2, "pipeline": 4, "tensor": 2, "micro_batch_size": 4, "pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2, )";
  EXPECT_EQ(error_of(base + R"("stage_layers": [1, 2, 2, 1, 1, 2, 2, 1]})"), "");
  const std::string four = error_of(base + R"("stage_layers": [3, 3, 3, 3]})");
  EXPECT_NE(four.find("expected a list of 8 block counts, one per model chunk"), std::string::npos) << four;
  const std::string sum = error_of(base + R"("stage_layers": [1, 2, 2, 1, 1, 2, 2, 2]})");
  EXPECT_NE(sum.find("the stages hold 13 blocks, but model.num_layers is 12"), std::string::npos) << sum;
  // The first chunk holds the embedding and the last the head: either may hold no block (a
  // Megatron-Core layout's "E|..." and "...|L"); a middle one may not.
  EXPECT_EQ(error_of(base + R"("stage_layers": [0, 3, 2, 1, 1, 2, 3, 0]})"), "");
  const std::string zero = error_of(base + R"("stage_layers": [1, 3, 0, 1, 1, 2, 3, 1]})");
  EXPECT_NE(zero.find("each model chunk needs a whole number of blocks, at least 1 (0 for the first and the last)"), std::string::npos)
      << zero;
}

// A first chunk of the embedding alone and a last of the head alone: the layers fall where the
// counts say.
TEST(UnevenChunks, TheFirstAndLastChunksMayHoldNoBlock) {
  const auto g = llama(12);
  const auto laid = interleaved(g, {0, 2, 2, 2, 2, 2, 2, 0}, strategies::Recompute::None);
  EXPECT_EQ(laid.plan.stage_layers, (std::vector<int>{2, 4, 4, 2}));
  const auto& first = laid.layout.chunk_layers.front();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first.front()->kind, models::LayerKind::Embedding);
  const auto& last = laid.layout.chunk_layers.back();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last.front()->kind, models::LayerKind::Head);
}
