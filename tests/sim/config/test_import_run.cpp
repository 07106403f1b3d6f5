// `dtsim import megatron|torchtitan|deepspeed`: one real config of each kind (tests/data/import,
// sources in SOURCES.md) becomes a scenario with the settings the config gives, and every setting
// the import could not map is named.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "helpers.hpp"
#include "run_dtsim.hpp"
#include "sim/config/import_run.hpp"
#include "sim/core/errors.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;
const std::string kData = std::string(DTSIM_SOURCE_DIR) + "/tests/data/import/";

bool names(const std::vector<std::string>& list, const std::string& prefix) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

}  // namespace

TEST(ImportRun, MegatronLaunchScriptWithShellVariables) {
  // The script sets NUM_LAYERS=32, SEQ_LENGTH=8192... and passes "$NUM_LAYERS": substituted, not run.
  const auto r = dtsim::config::import_megatron_args(slurp(kData + "train_llama3_8b_h100_fp8.sh"), "x.sh");
  EXPECT_EQ(r.model["num_layers"], 32);
  EXPECT_EQ(r.model["hidden_size"], 4096);
  EXPECT_EQ(r.model["num_kv_heads"], 8);
  EXPECT_EQ(r.model["seq_len"], 8192);
  EXPECT_EQ(r.model["mlp"], "swiglu");
  EXPECT_EQ(r.model["vocab_size"], 128256);
  EXPECT_EQ(r.training["global_batch_size"], 128);
  EXPECT_EQ(r.training["precision"], "fp8");  // --fp8-format hybrid inside a quoted group
  EXPECT_EQ(r.parallelism["zero_stage"], 1);  // --use-distributed-optimizer
  EXPECT_FALSE(r.parallelism.contains("sequence_parallel"));  // Megatron drops it at TP 1
  EXPECT_EQ(r.gpus, 8);                                       // --nproc_per_node 8 x --nnodes 1
  // Commented-out flags are not read; flags dtsim cannot express are named, each once.
  EXPECT_FALSE(r.parallelism.contains("pipeline"));
  EXPECT_TRUE(names(r.mapped, "--cross-entropy-loss-fusion"));  // the fused loss
  EXPECT_EQ(r.stack["loss"], "fused");
  EXPECT_EQ(r.parallelism["overlap_param_gather"], true);  // beside --use-distributed-optimizer
  EXPECT_EQ(r.stack["fp8_weight_copies"], "fp8-params");  // --fp8-param-gather: FP8 weights, no bf16 copy
  EXPECT_TRUE(names(r.ignored, "--lr"));
  EXPECT_EQ(std::count(r.mapped.begin(), r.mapped.end(), "--vocab-size"), 1);
}

TEST(ImportRun, TorchtitanTomlWithFsdpAndOpLevelCheckpointing) {
  const auto r = dtsim::config::import_torchtitan_toml(slurp(kData + "llama3_8b.toml"), "x.toml");
  EXPECT_EQ(r.model["preset"], "llama-3-8b");
  EXPECT_EQ(r.model["seq_len"], 8192);
  EXPECT_EQ(r.parallelism["framework"], "fsdp");
  EXPECT_EQ(r.parallelism["zero_stage"], 3);  // data_parallel_shard_degree -1: shard over all data ranks
  EXPECT_EQ(r.parallelism["micro_batch_size"], 1);
  EXPECT_EQ(r.training["gradient_accumulation_steps"], 1);
  EXPECT_EQ(r.stack["preset"], "pytorch-eager");  // compile = false
  EXPECT_EQ(r.parallelism["recompute"], "op");  // selective_ac_option "op": torchtitan's op-level policy
  EXPECT_TRUE(names(r.mapped, "activation_checkpoint.selective_ac_option"));
  EXPECT_TRUE(names(r.ignored, "optimizer.lr"));
  EXPECT_EQ(r.gpus, 0);  // -1 takes whatever the cluster has
}

// torchtitan's float8 converter: torchao's tensorwise (current) scaling, and under FSDP the
// float8 all-gather where the config enables it; the scenario loads.
TEST(ImportRun, TorchtitanFloat8) {
  std::string toml = slurp(kData + "llama3_8b.toml");
  auto set = [&](const std::string& from, const std::string& to) { toml.replace(toml.find(from), from.size(), to); };
  set("# converters = [\"float8\"]", "converters = [\"float8\"]");
  set("enable_fsdp_float8_all_gather = false", "enable_fsdp_float8_all_gather = true");
  const auto r = dtsim::config::import_torchtitan_toml(toml, "x.toml");
  EXPECT_EQ(r.training["precision"], "fp8");
  EXPECT_EQ(r.training["fp8_recipe"], "current");
  EXPECT_EQ(r.parallelism["zero3"]["fp8_all_gather"], true);
  EXPECT_TRUE(names(r.mapped, "float8.enable_fsdp_float8_all_gather"));
  EXPECT_FALSE(names(r.unmapped, "float8.enable_fsdp_float8_all_gather"));
  TempDir dir;
  const std::string out = dir.path("fp8.json");
  const std::string toml_file = dir.file("fp8.toml", toml);
  const auto written = run_dtsim({"import", "torchtitan", toml_file, "--nodes", "1", "-o", out}, dir);
  ASSERT_EQ(written.code, 0) << written.err;
  EXPECT_EQ(run_dtsim({"memory", out}, dir).code, 0);
}

// BigScience's Megatron-DeepSpeed (BLOOM): ALiBi positions and the embedding's LayerNorm.
TEST(ImportRun, AlibiAndTheEmbeddingsNormFromMegatronDeepSpeed) {
  const auto r = dtsim::config::import_megatron_args(
      "deepspeed pretrain_gpt.py --position-embedding-type alibi --embed-layernorm --num-layers 2", "x.sh");
  EXPECT_EQ(r.model["position_embedding"], "alibi");
  EXPECT_EQ(r.model["embedding_norm"], true);
  EXPECT_TRUE(names(r.mapped, "--embed-layernorm"));
  EXPECT_EQ(dtsim::config::import_megatron_args("torchrun pretrain_gpt.py --position-embedding-type rope", "x.sh")
                .model["position_embedding"],
            "rotary");
}

// Megatron-Core's MoE flags: expert tensor parallelism, the 1F1B all-to-all overlap, and a
// custom pipeline layout (pipeline_parallel_layer_layout.py): "(...)*n" and "x*n" unrolled, one
// chunk per "|" in the order vpp_rank x pipeline + pp_rank, each chunk's "t"s its blocks.
TEST(ImportRun, MegatronCoreMoeFlagsAndAPipelineLayout) {
  using dtsim::config::import_megatron_args;
  const std::string base = "torchrun pretrain_gpt.py --num-layers 10 --pipeline-model-parallel-size 2 ";
  auto r = import_megatron_args(base + "--expert-tensor-parallel-size 1 --overlap-moe-expert-parallel-comm "
                                       "--pipeline-model-parallel-layout \"Et|(tt|)*4,tL\"", "x.sh");
  EXPECT_EQ(r.parallelism["expert_tensor"], 1);
  EXPECT_EQ(r.parallelism["moe_a2a_overlap"], "megatron-1f1b");
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::ordered_json::parse("[1, 2, 2, 2, 2, 1]"));
  EXPECT_EQ(r.parallelism["virtual_stages"], 3);
  EXPECT_EQ(r.parallelism["pipeline_schedule"], "interleaved-1f1b");
  EXPECT_TRUE(names(r.mapped, "--pipeline-model-parallel-layout"));
  const auto fused =
      import_megatron_args(base + "--moe-grouped-gemm --cross-entropy-loss-fusion --cross-entropy-fusion-impl te --qk-layernorm", "x.sh");
  EXPECT_TRUE(names(fused.mapped, "--moe-grouped-gemm"));
  EXPECT_EQ(fused.model["qk_norm"], true);
  EXPECT_EQ(fused.stack["loss"], "fused");
  // A layout dtsim cannot take is named with its reason, and nothing of it is kept.
  auto why = [&](const std::string& layout) {
    const auto bad = import_megatron_args(base + "--pipeline-model-parallel-layout " + layout, "x.sh");
    EXPECT_FALSE(bad.parallelism.contains("stage_layers")) << layout;
    for (const auto& u : bad.unmapped)
      if (u.rfind("--pipeline-model-parallel-layout", 0) == 0) return u;
    return std::string("mapped");
  };
  EXPECT_NE(why("Et|(tt|)*3,tL").find("5 stages do not divide over 2 pipeline ranks"), std::string::npos);
  EXPECT_NE(why("Et|(tt|)*4,ttL").find("it places 11 transformer layers, the model has 10"), std::string::npos);
  EXPECT_NE(why("Ett|tL|tt|ttt").find("the loss on the last"), std::string::npos);
  EXPECT_NE(why("Ett|(tt|)*2,|tt|ttL").find("a middle stage without transformer layers"), std::string::npos);
  // DeepSeek-V3's shape, an embedding-only first chunk and a loss-only last one: blocks 0 there.
  const auto ends = import_megatron_args(base + "--pipeline-model-parallel-layout \"E|(ttttt|)*2,L\"", "x.sh");
  EXPECT_EQ(ends.parallelism["stage_layers"], nlohmann::ordered_json::parse("[0, 5, 5, 0]"));
  EXPECT_NE(why("E(t|)*99999999,L").find("too long"), std::string::npos);
  EXPECT_NE(why("Et|(tt|)*4,tX").find("'X' is not a layer"), std::string::npos);
  // Multi-token prediction: --mtp-num-layers, or the layout's "m"s, on the last chunk only.
  const auto mtp = import_megatron_args(base + "--mtp-num-layers 1 --pipeline-model-parallel-layout \"E|(ttttt|)*2,mL\"", "x.sh");
  EXPECT_EQ(mtp.model["mtp_layers"], 1);
  EXPECT_EQ(mtp.parallelism["stage_layers"], nlohmann::ordered_json::parse("[0, 5, 5, 0]"));
  EXPECT_TRUE(names(mtp.mapped, "--mtp-num-layers"));
  EXPECT_EQ(import_megatron_args(base + "--pipeline-model-parallel-layout \"E|(ttttt|)*2,mmL\"", "x.sh").model["mtp_layers"], 2);
  EXPECT_NE(why("E|ttttt|ttttt|m|L").find("multi-token prediction layers on the last chunk"), std::string::npos);
  // Shared experts: their width over the routed experts', and their overlap with the all-to-alls.
  const auto shared = import_megatron_args(base + "--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 4096 "
                                                  "--moe-shared-expert-overlap", "x.sh");
  EXPECT_EQ(shared.model["shared_experts"], 2);
  EXPECT_EQ(shared.parallelism["moe_shared_expert_overlap"], true);
  const auto odd = import_megatron_args(base + "--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 3000", "x.sh");
  EXPECT_FALSE(odd.model.contains("shared_experts"));
  EXPECT_TRUE(names(odd.unmapped, "--moe-shared-expert-intermediate-size 3000 (not a multiple"));
}

// DeepSeek-V3's flags in Megatron-Core: latent attention's sizes and the leading dense layers.
TEST(ImportRun, MegatronLatentAttentionAndDenseLayers) {
  using dtsim::config::import_megatron_args;
  const std::string base = "torchrun pretrain_gpt.py --num-layers 61 ";
  auto r = import_megatron_args(base + "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
                                       "--qk-pos-emb-head-dim 64 --v-head-dim 128 --moe-layer-freq \"([0]*3+[1]*58)\"", "x.sh");
  EXPECT_EQ(r.model["q_lora_rank"], 1536);
  EXPECT_EQ(r.model["kv_lora_rank"], 512);
  EXPECT_EQ(r.model["qk_nope_head_dim"], 128);
  EXPECT_EQ(r.model["qk_rope_head_dim"], 64);
  EXPECT_EQ(r.model["v_head_dim"], 128);
  EXPECT_EQ(r.model["first_dense_layers"], 3);
  EXPECT_TRUE(names(r.mapped, "--multi-latent-attention"));
  // Alone, MLATransformerConfig's defaults; the sizes without it are not read.
  r = import_megatron_args(base + "--multi-latent-attention", "x.sh");
  EXPECT_EQ(r.model["q_lora_rank"], 512);
  EXPECT_EQ(r.model["qk_rope_head_dim"], 64);
  r = import_megatron_args(base + "--kv-lora-rank 256", "x.sh");
  EXPECT_FALSE(r.model.contains("kv_lora_rank"));
  EXPECT_TRUE(names(r.ignored, "--kv-lora-rank (read only with --multi-latent-attention)"));
  // --moe-layer-freq: every layer, a list of 0s then 1s, or a pattern dtsim cannot follow.
  EXPECT_FALSE(import_megatron_args(base + "--moe-layer-freq 1", "x.sh").model.contains("first_dense_layers"));
  EXPECT_EQ(import_megatron_args(base + "--moe-layer-freq [0,0,1,1,1]", "x.sh").model["first_dense_layers"], 2);
  r = import_megatron_args(base + "--moe-layer-freq \"([1]*3+[0]*1)*3\"", "x.sh");
  EXPECT_FALSE(r.model.contains("first_dense_layers"));
  EXPECT_TRUE(names(r.unmapped, "--moe-layer-freq ([1]*3+[0]*1)*3 (dtsim's MoE layers follow")) << r.unmapped.size();
  EXPECT_TRUE(names(import_megatron_args(base + "--moe-layer-freq [0,1,0,1]", "x.sh").unmapped, "--moe-layer-freq"));
}

// Megatron-LM's full recomputation reaches the blocks --recompute-method and --recompute-num-layers
// name; torchtitan's selective_ac_option = "n" every n-th block.
TEST(ImportRun, WhichBlocksFullRecomputationReaches) {
  using dtsim::config::import_megatron_args;
  const std::string full = "torchrun pretrain_gpt.py --recompute-granularity full ";
  auto r = import_megatron_args(full + "--recompute-method block --recompute-num-layers 4", "x.sh");
  EXPECT_EQ(r.parallelism["recompute"], "full");
  EXPECT_EQ(r.parallelism["recompute_layers"], 4);
  EXPECT_TRUE(names(r.mapped, "--recompute-num-layers"));
  r = import_megatron_args(full + "--recompute-num-layers 2 --recompute-method uniform", "x.sh");
  EXPECT_EQ(r.parallelism["recompute_group"], 2);
  r = import_megatron_args(full + "--recompute-method uniform --recompute-num-layers 1", "x.sh");
  EXPECT_FALSE(r.parallelism.contains("recompute_group"));  // one block at a time: plain full
  EXPECT_FALSE(r.parallelism.contains("recompute_layers"));
  r = import_megatron_args("torchrun pretrain_gpt.py --recompute-activations --recompute-method block --recompute-num-layers 4", "x.sh");
  EXPECT_EQ(r.parallelism["recompute"], "selective");
  EXPECT_FALSE(r.parallelism.contains("recompute_layers"));
  EXPECT_TRUE(names(r.ignored, "--recompute-num-layers (read only with --recompute-granularity full)"));
  std::string toml = slurp(kData + "llama3_8b.toml");
  toml.replace(toml.find("selective_ac_option = \"op\""), 26, "selective_ac_option = \"2\"");
  const auto t = dtsim::config::import_torchtitan_toml(toml, "x.toml");
  EXPECT_EQ(t.parallelism["recompute"], "full");
  EXPECT_EQ(t.parallelism["recompute_every"], 2);
  EXPECT_TRUE(names(t.mapped, "activation_checkpoint.selective_ac_option"));
}

// --recompute-modules (nargs='*') under selective granularity; the modules dtsim does not model are named.
TEST(ImportRun, MegatronRecomputeModules) {
  const std::string selective = "torchrun pretrain_gpt.py --recompute-granularity selective ";
  auto r = dtsim::config::import_megatron_args(
      selective + "--recompute-modules moe_act layernorm mla_up_proj mlp moe shared_experts gdn_norm_out --bf16", "x.sh");
  EXPECT_EQ(r.parallelism["recompute"], "selective");
  EXPECT_EQ(r.parallelism["recompute_modules"],
            nlohmann::ordered_json::array({"moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"}));
  EXPECT_TRUE(names(r.mapped, "--recompute-modules"));
  EXPECT_TRUE(names(r.unmapped, "--recompute-modules gdn_norm_out (not modelled)"));
  EXPECT_EQ(r.training["precision"], "bf16");  // the list ends at the next flag
  r = dtsim::config::import_megatron_args("torchrun pretrain_gpt.py --recompute-granularity full --recompute-modules core_attn", "x.sh");
  EXPECT_FALSE(r.parallelism.contains("recompute_modules"));
  EXPECT_TRUE(names(r.ignored, "--recompute-modules (read only with --recompute-granularity selective)"));
}

// --fp8-recipe: TE's recipes by Megatron-Core's names (tensorwise is current scaling); a custom
// recipe is not modelled and is named.
TEST(ImportRun, MegatronFp8Recipe) {
  const std::string fp8 = "torchrun pretrain_gpt.py --fp8-format e4m3 --fp8-recipe ";
  EXPECT_EQ(dtsim::config::import_megatron_args(fp8 + "blockwise", "x.sh").training["fp8_recipe"], "blockwise");
  EXPECT_EQ(dtsim::config::import_megatron_args(fp8 + "tensorwise", "x.sh").training["fp8_recipe"], "current");
  EXPECT_EQ(dtsim::config::import_megatron_args(fp8 + "delayed", "x.sh").training["fp8_recipe"], "delayed");
  EXPECT_EQ(dtsim::config::import_megatron_args(fp8 + "mxfp8", "x.sh").training["fp8_recipe"], "mxfp8");
  const auto custom = dtsim::config::import_megatron_args(fp8 + "custom", "x.sh");
  EXPECT_FALSE(custom.training.contains("fp8_recipe"));
  EXPECT_TRUE(names(custom.unmapped, "--fp8-recipe custom"));
}

// --moe-token-dispatcher-type flex runs DeepEP (its default backend); alltoall is dtsim's default.
TEST(ImportRun, MegatronTokenDispatcher) {
  const std::string moe = "torchrun pretrain_gpt.py --num-experts 64 --expert-model-parallel-size 8 ";
  auto r = dtsim::config::import_megatron_args(moe + "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", "x.sh");
  EXPECT_EQ(r.parallelism["moe_dispatcher"], "deepep");
  EXPECT_TRUE(names(r.mapped, "--moe-token-dispatcher-type"));
  EXPECT_TRUE(names(r.mapped, "--moe-flex-dispatcher-backend"));
  r = dtsim::config::import_megatron_args(moe + "--moe-token-dispatcher-type alltoall", "x.sh");
  EXPECT_FALSE(r.parallelism.contains("moe_dispatcher"));
  EXPECT_TRUE(names(r.mapped, "--moe-token-dispatcher-type"));
  r = dtsim::config::import_megatron_args(moe + "--moe-token-dispatcher-type allgather", "x.sh");
  EXPECT_TRUE(names(r.unmapped, "--moe-token-dispatcher-type allgather (not modelled)"));
  // The fused permutation and router are what dtsim prices.
  r = dtsim::config::import_megatron_args(moe + "--moe-permute-fusion --moe-router-fusion", "x.sh");
  EXPECT_TRUE(names(r.mapped, "--moe-permute-fusion"));
  EXPECT_TRUE(names(r.mapped, "--moe-router-fusion"));
  // Group-limited routing, groups taken as the expert-parallel group's nodes.
  r = dtsim::config::import_megatron_args(moe + "--moe-router-num-groups 8 --moe-router-group-topk 4", "x.sh");
  EXPECT_EQ(r.parallelism["moe_node_limit"], 4);
  EXPECT_TRUE(names(r.mapped, "--moe-router-group-topk"));
  EXPECT_TRUE(names(r.mapped, "--moe-router-num-groups"));
}

TEST(ImportRun, MegatronSquaredReluIsTheMlp) {
  const auto r = dtsim::config::import_megatron_args("torchrun pretrain_gpt.py --squared-relu --num-layers 32", "x.sh");
  EXPECT_EQ(r.model["mlp"], "squared-relu");
  EXPECT_TRUE(names(r.mapped, "--squared-relu"));
}

// --make-vocab-size-divisible-by is the stack's vocab_divisible_by (Megatron pads to it x TP).
TEST(ImportRun, MegatronVocabularyPaddingIsTheStacks) {
  const auto r = dtsim::config::import_megatron_args(
      "torchrun pretrain_gpt.py --vocab-size 50257 --make-vocab-size-divisible-by 64", "x.sh");
  EXPECT_EQ(r.model["vocab_size"], 50257);
  EXPECT_EQ(r.stack["vocab_divisible_by"], 64);
  EXPECT_TRUE(names(r.mapped, "--make-vocab-size-divisible-by"));
}

// Megatron-LM's uneven first and last stages and virtual stages as stage_layers per model chunk
// (get_num_layers_to_build: the first and last stages' layers, the rest even, each stage's split
// over its virtual stages; chunk j on stage j % pipeline).
TEST(ImportRun, MegatronUnevenPipelineStages) {
  using dtsim::config::import_megatron_args;
  const std::string base = "torchrun pretrain_gpt.py --num-layers 24 --pipeline-model-parallel-size 4 ";
  auto r = import_megatron_args(base + "--decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 4 "
                                       "--num-virtual-stages-per-pipeline-rank 2", "x.sh");
  EXPECT_EQ(r.parallelism["virtual_stages"], 2);
  EXPECT_EQ(r.parallelism["pipeline_schedule"], "interleaved-1f1b");
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::json::parse("[2, 4, 4, 2, 2, 4, 4, 2]"));
  r = import_megatron_args(base + "--num-layers-per-virtual-pipeline-stage 3", "x.sh");
  EXPECT_EQ(r.parallelism["virtual_stages"], 2);  // 24 / 4 / 3
  EXPECT_FALSE(r.parallelism.contains("stage_layers"));
  r = import_megatron_args(base + "--decoder-first-pipeline-num-layers 3", "x.sh");  // 21 over 3 stages: 7 each
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::json::parse("[3, 7, 7, 7]"));
  r = import_megatron_args(base + "--decoder-first-pipeline-num-layers 3 --num-virtual-stages-per-pipeline-rank 2", "x.sh");
  EXPECT_FALSE(r.parallelism.contains("stage_layers"));  // stage 0's 3 layers do not split into 2
  EXPECT_TRUE(names(r.unmapped, "--decoder-first-pipeline-num-layers (stage 0's 3 layers")) << r.unmapped.size();
}

// --account-for-embedding/loss-in-pipeline-split: the embedding and the loss count as layers of
// the split, and the first and last chunks hold one block fewer (get_num_layers_to_build).
TEST(ImportRun, MegatronEmbeddingAndLossCountedInThePipelineSplit) {
  using dtsim::config::import_megatron_args;
  const std::string both = " --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split";
  // Qwen3-235B's 94 layers + 2 over 8 stages x 4 virtual stages: 3 a chunk, 2 in the first and last.
  auto r = import_megatron_args("pretrain_gpt.py --num-layers 94 --pipeline-model-parallel-size 8 "
                                "--num-virtual-stages-per-pipeline-rank 4" + both, "x.sh");
  std::vector<long long> want(32, 3);
  want.front() = want.back() = 2;
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::json(want));
  EXPECT_TRUE(names(r.mapped, "--account-for-loss-in-pipeline-split"));
  // The embedding alone over 4 stages: 23 + 1 = 24, 6 a stage, 5 on the first.
  r = import_megatron_args("pretrain_gpt.py --num-layers 23 --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split",
                           "x.sh");
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::json::parse("[5, 6, 6, 6]"));
  // 24 + 2 does not divide over 4 stages: named, no split.
  r = import_megatron_args("pretrain_gpt.py --num-layers 24 --pipeline-model-parallel-size 4" + both, "x.sh");
  EXPECT_FALSE(r.parallelism.contains("stage_layers"));
  EXPECT_TRUE(names(r.unmapped, "--account-for-embedding-in-pipeline-split (26 layers with the embedding and loss do not divide"));
  // Megatron refuses them beside explicit first and last stages.
  r = import_megatron_args("pretrain_gpt.py --num-layers 22 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 4" + both,
                           "x.sh");
  EXPECT_TRUE(names(r.unmapped, "--account-for-loss-in-pipeline-split (Megatron refuses it"));
  EXPECT_EQ(r.parallelism["stage_layers"], nlohmann::json::parse("[4, 6, 6, 6]"));
}

TEST(ImportRun, DeepSpeed2021ZeroThreeConfig) {
  const auto r = dtsim::config::import_deepspeed_config(nlohmann::json::parse(slurp(kData + "ds_zero_stage_3_config_release.json")), "x.json");
  EXPECT_EQ(r.parallelism["framework"], "deepspeed");
  EXPECT_EQ(r.parallelism["zero_stage"], 3);
  EXPECT_EQ(r.parallelism["zero3"]["prefetch_bucket_params"], 5e7);
  EXPECT_EQ(r.parallelism["zero3"]["max_reuse_distance_params"], 1e8);
  EXPECT_EQ(r.parallelism["offload_optimizer"], true);  // 2021's cpu_offload
  EXPECT_EQ(r.training["global_batch_size"], 64);
  EXPECT_EQ(r.training["precision"], "fp16");
  // The file misspells stage3_param_persistence_threshold, so DeepSpeed never read it either.
  EXPECT_TRUE(names(r.unmapped, "zero_optimization.stage3_param_persitance_threshold"));
  EXPECT_TRUE(names(r.unmapped, "zero_optimization.cpu_offload_params"));
}

// engine.py's _do_optimizer_sanity_check: bf16 + ZeRO-1 + fp32 accumulation runs BF16_Optimizer,
// which dtsim models as zero_stage 0; other combinations keep their stage.
TEST(ImportRun, DeepSpeedFp32AccumulationUnderZeroOneIsBf16Optimizer) {
  const auto with = [](const std::string& json) { return dtsim::config::import_deepspeed_config(nlohmann::json::parse(json), "x.json"); };
  auto r = with(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp32"}})");
  EXPECT_EQ(r.parallelism["zero_stage"], 0);
  EXPECT_TRUE(names(r.mapped, "data_types.grad_accum_dtype (fp32 under bf16 and ZeRO-1: DeepSpeed runs BF16_Optimizer"));
  r = with(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}},
              "data_types": {"grad_accum_dtype": "fp32"}})");
  EXPECT_EQ(r.parallelism["zero_stage"], 1);  // with offload ZeRO-1's own optimizer runs
  r = with(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "data_types": {"grad_accum_dtype": "bf16"}})");
  EXPECT_EQ(r.parallelism["zero_stage"], 2);
  EXPECT_TRUE(names(r.mapped, "data_types.grad_accum_dtype"));
  r = with(R"({"bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "bf16"}})");
  EXPECT_TRUE(names(r.unmapped, "data_types.grad_accum_dtype (DeepSpeed refuses bf16 accumulation without ZeRO"));
  r = with(R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp32"}})");
  EXPECT_EQ(r.parallelism["zero_stage"], 1);
  EXPECT_TRUE(names(r.unmapped, "data_types.grad_accum_dtype (not modelled)"));
}

TEST(ImportRun, DeepSpeedAutoValuesAreNamed) {
  const auto r = dtsim::config::import_deepspeed_config(
      nlohmann::json::parse(R"({"train_batch_size": "auto", "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}})"), "x.json");
  EXPECT_TRUE(names(r.unmapped, "train_batch_size \"auto\""));
  EXPECT_TRUE(names(r.unmapped, "zero_optimization.reduce_bucket_size \"auto\""));
}

TEST(ImportRun, EachWritesAScenarioThatRuns) {
  TempDir dir;
  const std::vector<std::vector<std::string>> cases{
      {"megatron", kData + "train_llama3_8b_h100_fp8.sh"},
      {"torchtitan", kData + "llama3_8b.toml", "--nodes", "8"},
      {"deepspeed", kData + "ds_zero_stage_3_config_release.json", "--model", "llama-3-8b", "--nodes", "8"}};
  for (const auto& c : cases) {
    std::vector<std::string> args{"import"};
    args.insert(args.end(), c.begin(), c.end());
    const std::string out = dir.path(c[0] + ".json");
    args.insert(args.end(), {"-o", out});
    const auto r = run_dtsim(args, dir);
    ASSERT_EQ(r.code, 0) << c[0] << ": " << r.err;
    EXPECT_NE(r.out.find("settings mapped"), std::string::npos) << r.out;
    // What cannot be mapped is named (torchtitan's config maps whole since op-level checkpointing,
    // Megatron's script since --overlap-param-gather).
    if (c[0] == "deepspeed") {
      EXPECT_NE(r.out.find("not mapped: "), std::string::npos) << r.out;
    } else {
      EXPECT_EQ(r.out.find("not mapped: "), std::string::npos) << r.out;
    }
    // Planned and priced whole; simulated too where it is quick (the analytical backend).
    auto scenario = nlohmann::json::parse(slurp(out));
    scenario["simulation"] = {{"backend", "analytical"}};
    std::ofstream(out) << scenario.dump(2);
    const auto run = run_dtsim({"run", out, "--format", "json", "-o", dir.path(c[0] + "-out")}, dir);
    EXPECT_EQ(run.code, 0) << c[0] << ": " << run.err;
    if (run.code == 0) {
      EXPECT_GT(nlohmann::json::parse(run.out)["step_time_s"].get<double>(), 0.0) << c[0];
    }
  }
}

TEST(ImportRun, BadInputIsAClearError) {
  TempDir dir;
  const std::string toml = dir.file("bad.toml", "[training]\nseq_len = = 3\n");
  auto r = run_dtsim({"import", "torchtitan", toml, "-o", dir.path("a.json")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.toml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  const std::string ds = dir.file("ds.json", R"({"zero_optimization": {"stage": 2}})");
  r = run_dtsim({"import", "deepspeed", ds, "-o", dir.path("b.json")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;  // the config names no model
  const std::string sh = dir.file("empty.sh", "echo hello\n");
  r = run_dtsim({"import", "megatron", sh, "-o", dir.path("c.json")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path("c.json")));
  // A script that leaves a key the scenario needs says which (Megatron's vocabulary comes from
  // its tokenizer, which the script does not hold).
  const std::string novocab = dir.file("novocab.sh", "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 256 "
                                                     "--num-attention-heads 4 --seq-length 128 --global-batch-size 8 --bf16\n");
  r = run_dtsim({"import", "megatron", novocab, "-o", dir.path("d.json")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not load at /model/vocab_size"), std::string::npos) << r.err;
}
