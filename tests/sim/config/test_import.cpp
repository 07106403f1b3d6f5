// `dtsim import hf`: a Hugging Face config.json becomes a scenario whose model is the one the
// shipped preset of that model describes, and what could not be mapped is named.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "helpers.hpp"
#include "run_dtsim.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;
const std::string kData = std::string(DTSIM_SOURCE_DIR) + "/tests/data/hf/";

double params_bytes(const std::string& scenario, const TempDir& dir) {
  const auto r = run_dtsim({"memory", scenario, "--format", "json"}, dir);
  EXPECT_EQ(r.code, 0) << scenario << ": " << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["memory"]["params_bytes"].get<double>() : -1;
}

TEST(ImportHf, EachFamilyHasTheParametersOfItsShippedPreset) {
  TempDir dir;
  for (const auto& [config, preset, seq] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"llama-3-8b.json", "llama-3-8b", "8192"}, {"mixtral-8x7b.json", "mixtral-8x7b", "32768"},
           {"deepseek-v3.json", "deepseek-v3", "4096"}, {"gpt2.json", "gpt2", "1024"}}) {
    const std::string out = dir.path(preset + ".json");
    const auto r = run_dtsim({"import", "hf", kData + config, "-o", out, "--seq-len", seq}, dir);
    ASSERT_EQ(r.code, 0) << config << ": " << r.err;
    EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
    // The same scenario with the shipped preset in place of the imported model.
    auto s = nlohmann::json::parse(slurp(out));
    s["model"] = {{"preset", preset}};
    const std::string shipped = dir.file(preset + "-preset.json", s.dump());
    EXPECT_EQ(params_bytes(out, dir), params_bytes(shipped, dir)) << config;
  }
}

TEST(ImportHf, NamesWhatItCouldNotMapAndStillWritesARunnableScenario) {
  TempDir dir;
  const std::string out = dir.path("qwen.json");
  const auto r = run_dtsim({"import", "hf", kData + "qwen2-attention-bias.json", "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not mapped: attention_bias (biases on the attention projections alone are not modelled)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not mapped: some_new_switch (not read by this importer)"), std::string::npos) << r.out;
  const auto s = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(s["model"]["num_kv_heads"], 2);
  EXPECT_EQ(s["model"]["tied_embeddings"], true);
  EXPECT_EQ(run_dtsim({"memory", out}, dir).code, 0);
}

TEST(ImportHf, AnUnknownFamilyOrAMissingSizeIsAnInputErrorAndWritesNothing) {
  TempDir dir;
  auto config = nlohmann::json::parse(slurp(kData + "llama-3-8b.json"));
  config["model_type"] = "lama";
  const std::string out = dir.path("x.json");
  auto r = run_dtsim({"import", "hf", dir.file("lama.json", config.dump()), "-o", out}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/model_type: \"lama\" is not a family dtsim imports"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean \"llama\""), std::string::npos) << r.err;
  config["model_type"] = "llama";
  config.erase("hidden_size");
  r = run_dtsim({"import", "hf", dir.file("nosize.json", config.dump()), "-o", out}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nosize.json:/hidden_size: required"), std::string::npos) << r.err;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find("x.json"), std::string::npos) << e.path();
}

}  // namespace

// GPT-NeoX (use_parallel_residual) and GPT-J run attention and MLP side by side: parallel layers.
TEST(ImportHf, ParallelResidualFamiliesImportAsParallelLayers) {
  TempDir dir;
  const nlohmann::json neox = {{"model_type", "gpt_neox"}, {"hidden_size", 2048}, {"num_attention_heads", 16},
                               {"num_hidden_layers", 24}, {"intermediate_size", 8192}, {"max_position_embeddings", 2048},
                               {"vocab_size", 50304}, {"rotary_pct", 0.25}, {"use_parallel_residual", true},
                               {"hidden_act", "gelu"}, {"tie_word_embeddings", false}};
  const nlohmann::json gptj = {{"model_type", "gptj"}, {"n_embd", 4096}, {"n_head", 16}, {"n_layer", 28}, {"n_positions", 2048},
                               {"vocab_size", 50400}, {"rotary_dim", 64}, {"activation_function", "gelu_new"}, {"n_inner", nullptr},
                               {"tie_word_embeddings", false}};
  for (const auto& [name, config] : std::vector<std::pair<std::string, nlohmann::json>>{{"neox", neox}, {"gptj", gptj}}) {
    const std::string out = dir.path(name + "-scenario.json");
    const auto r = run_dtsim({"import", "hf", dir.file(name + ".json", config.dump()), "-o", out}, dir);
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    const auto s = nlohmann::json::parse(slurp(out));
    EXPECT_EQ(s["model"]["parallel_layers"], true) << name;
    EXPECT_EQ(s["model"]["position_embedding"], "rotary") << name;
    EXPECT_EQ(s["model"]["tied_embeddings"], false) << name;
    EXPECT_EQ(run_dtsim({"memory", out}, dir).code, 0) << name;
  }
  // NeoX's second norm of the same input is said to be left out.
  const auto r = run_dtsim({"import", "hf", dir.path("neox.json"), "-o", dir.path("again.json")}, dir);
  EXPECT_NE(r.out.find("use_parallel_residual (its second layer norm of the same input is not counted)"), std::string::npos) << r.out;
}

// Falcon-7B's shape (parallel attention, multi-query, no biases, tied embeddings): its parameters
// by hand, 65,024 x 4,544 embedding plus per block one norm, the fused input projection (71 heads
// of 64, one K and one V, 4 x 4,544) and the fused output projection, and the final norm.
TEST(ImportHf, FalconImportsAsParallelMultiQueryLayers) {
  TempDir dir;
  const nlohmann::json falcon = {{"model_type", "falcon"}, {"hidden_size", 4544}, {"num_attention_heads", 71},
                                 {"num_hidden_layers", 32}, {"multi_query", true}, {"parallel_attn", true}, {"bias", false},
                                 {"vocab_size", 65024}, {"alibi", false}, {"new_decoder_architecture", false}};
  const std::string out = dir.path("falcon-scenario.json");
  const auto r = run_dtsim({"import", "hf", dir.file("falcon.json", falcon.dump()), "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(s["model"]["num_kv_heads"], 1);
  EXPECT_EQ(s["model"]["parallel_layers"], true);
  const double h = 4544, block = 2 * h + h * (71 * 64 + 2 * 64 + 4 * h) + (71 * 64 + 4 * h) * h;
  const auto m = run_dtsim({"memory", out, "--format", "json"}, dir);
  ASSERT_EQ(m.code, 0) << m.err;
  const double params = nlohmann::json::parse(m.out)["model"]["params"].get<double>();
  EXPECT_DOUBLE_EQ(params, 65024 * h + 32 * block + 2 * h);
}


// BLOOM's config.json (bigscience/bloom: 70 layers of 14,336, 112 heads, no sequence length named)
// imports as ALiBi with the embedding's LayerNorm, and its parameters are the preset's.
TEST(ImportHf, BloomImportsWithAlibiAndTheEmbeddingsNorm) {
  TempDir dir;
  const nlohmann::json bloom = {{"model_type", "bloom"}, {"hidden_size", 14336}, {"n_head", 112}, {"n_layer", 70},
                                {"n_inner", nullptr}, {"vocab_size", 250880}, {"hidden_dropout", 0.0}, {"attention_dropout", 0.0},
                                {"apply_residual_connection_post_layernorm", false}, {"offset_alibi", 100},
                                {"masked_softmax_fusion", true}, {"skip_bias_add", true}, {"slow_but_exact", false}};
  const std::string out = dir.path("bloom-scenario.json");
  const auto r = run_dtsim({"import", "hf", dir.file("bloom.json", bloom.dump()), "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("not read by this importer"), std::string::npos) << r.out;
  const auto s = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(s["model"]["position_embedding"], "alibi");
  EXPECT_EQ(s["model"]["embedding_norm"], true);
  EXPECT_EQ(s["model"]["seq_len"], 2048);
  const auto m = run_dtsim({"memory", out, "--format", "json"}, dir);
  ASSERT_EQ(m.code, 0) << m.err;
  // The model card: 176,247,271,424 parameters.
  EXPECT_NEAR(nlohmann::json::parse(m.out)["model"]["params"].get<double>() / 176247271424.0, 1.0, 1e-4);
}
