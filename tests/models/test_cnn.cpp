// CNNs: the builders' parameters and FLOPs against published counts, what they keep for backward,
// and the layer-list language of scenario files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "models/cnn.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"

using namespace dtsim;

namespace {

// A scenario on one DGX A100 whose model is `model` (a JSON object).
std::string scenario(const std::string& model, const std::string& parallelism = R"({"data": 8})") {
  return R"({"name": "cnn", "model": )" + model + R"(, "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallelism": )" + parallelism + R"(,
    "training": {"global_batch_size": 64}})";
}

models::ModelSpec load(const std::string& model) {
  test::TempDir dir;
  return config::load_scenario(dir.file("s.json", scenario(model))).model;
}

const models::CnnSpec& cnn(const models::ModelSpec& m) { return *m.as<models::CnnSpec>(); }

double params(const models::ModelSpec& m) { return m.build(models::BuildOptions{}).params(); }

std::string error_of(const std::string& model, const std::string& parallelism = R"({"data": 8})") {
  test::TempDir dir;
  try {
    config::load_scenario(dir.file("s.json", scenario(model, parallelism)));
  } catch (const InputError& e) {
    return e.pointer() + ": " + e.reason();
  }
  return "";
}

}  // namespace

TEST(CnnPresets, ParameterCountsMatchPublished) {
  // torchvision's model pages (num_params of the IMAGENET1K_V1 weights): ResNet-50 25,557,032,
  // ResNet-101 44,549,160, VGG-16 138,357,544, Inception-v3 27,161,264 with its auxiliary head.
  const std::pair<const char*, double> published[] = {
      {"resnet-50", 25557032}, {"resnet-101", 44549160}, {"vgg-16", 138357544}};
  for (const auto& [name, count] : published) EXPECT_NEAR(params(config::load_model_preset(name)) / count, 1.0, 0.01) << name;
  const auto inception = load(R"({"preset": "inception-v3", "structure": {"aux_head": true}})");
  EXPECT_NEAR(params(inception) / 27161264, 1.0, 0.01);
  // The preset leaves out the auxiliary classifier (training only): 23.83 M, the seed's "24 M".
  EXPECT_NEAR(params(config::load_model_preset("inception-v3")) / 23.83e6, 1.0, 0.01);
}

TEST(CnnPresets, AmoebaNetDMatchesGPipeTable1) {
  // Huang et al. 2019 (GPipe), Table 1: AmoebaNet-D (L, D) parameters at 224 x 224, 1000 classes.
  const std::tuple<int, int, double> table1[] = {{18, 208, 82e6}, {18, 416, 318e6}, {18, 544, 542e6}, {36, 544, 1.05e9}};
  for (const auto& [l, d, count] : table1) {
    const auto m = load(fmt::format(R"({{"preset": "amoebanet-d", "structure": {{"normal_cells": {}, "filters": {}}}}})", l, d));
    EXPECT_NEAR(params(m) / count, 1.0, 0.01) << l << ", " << d;
  }
}

TEST(CnnPresets, ForwardMultiplyAddsMatchPublished) {
  // torchvision's "GFLOPS" column counts multiply-accumulates of one image: ResNet-50 4.09,
  // ResNet-101 7.80, VGG-16 15.47, Inception-v3 5.71 (at 299 x 299). dtsim's FLOPs are 2 per
  // multiply-accumulate.
  const std::pair<const char*, double> published[] = {
      {"resnet-50", 4.09e9}, {"resnet-101", 7.80e9}, {"vgg-16", 15.47e9}, {"inception-v3", 5.71e9}};
  for (const auto& [name, macs] : published) {
    const auto m = config::load_model_preset(name);
    EXPECT_NEAR(models::cnn_forward_macs(cnn(m)) / macs, 1.0, 0.02) << name;
    // The op graph's matmul FLOPs (forward + backward, 3x forward) are the same count.
    EXPECT_NEAR(m.build(models::BuildOptions{}).model_flops(), 6.0 * models::cnn_forward_macs(cnn(m)), 1.0) << name;
  }
}

TEST(CnnPresets, ImageSizeAndClassesAreKeys) {
  const auto base = config::load_model_preset("resnet-50");
  const auto big = load(R"({"preset": "resnet-50", "image_size": 448, "classes": 10})");
  EXPECT_EQ(cnn(big).image_size, 448);
  // Only the classifier changes parameters: 2048 x (1000 - 10) weights and 990 biases fewer.
  EXPECT_DOUBLE_EQ(params(base) - params(big), 2049.0 * 990);
  // Convolutions do 4x the work on 4x the pixels; the classifier does not grow.
  const double fc = 2048.0 * 1000, fc10 = 2048.0 * 10;
  EXPECT_NEAR(models::cnn_forward_macs(cnn(big)) - fc10, 4.0 * (models::cnn_forward_macs(cnn(base)) - fc), 1.0);
}

TEST(CnnGraph, KeepsWhatPyTorchSavesForBackward) {
  // conv 3x3 (3 -> 8, 8x8 image, padding 1), batch norm, ReLU, 2x2 max pool, fc to 10 classes,
  // in fp32, batch 2.
  const auto m = load(R"({"kind": "cnn", "image_size": 8, "classes": 10, "layers": [
      {"op": "conv", "filters": 8, "kernel": 3, "padding": 1}, {"op": "batch_norm"}, {"op": "relu"},
      {"op": "max_pool", "kernel": 2}, {"op": "fc", "units": "classes"}]})");
  const auto g = m.build(models::BuildOptions{2, 4});
  auto saved = [&](std::size_t layer) { return g.layers[layer].saved_bytes(); };
  const double image = 2 * 3 * 64 * 4.0, fmap = 2 * 8 * 64 * 4.0, pooled = 2 * 8 * 16 * 4.0;
  EXPECT_DOUBLE_EQ(saved(0), image);                  // conv: its input
  EXPECT_DOUBLE_EQ(saved(1), fmap + 2 * 8 * 4.0);     // batch norm: its input, mean and inverse std (fp32)
  EXPECT_DOUBLE_EQ(saved(2), fmap);                   // ReLU: its output
  EXPECT_DOUBLE_EQ(saved(3), 2 * 8 * 16 * 8.0);       // max pool: its input (ReLU's, kept once) and int64 indices
  EXPECT_DOUBLE_EQ(saved(4), pooled);                 // fc: its input
  EXPECT_DOUBLE_EQ(saved(5), 2 * 10 * 4.0);           // loss: fp32 probabilities
  // The first convolution computes no gradient for the image: weight gradient only.
  ASSERT_EQ(g.layers[0].ops[0].backward.size(), 1u);
  EXPECT_EQ(g.layers[0].ops[0].backward[0].name.find("wgrad") != std::string::npos, true);
  // Parameters: 8x3x3x3 weights, 2x8 batch-norm scales and shifts, 128x10 + 10 in the fc.
  EXPECT_DOUBLE_EQ(g.params(), 216 + 16 + 1290);
}

TEST(CnnGraph, StageBoundariesCarryEveryTensorThatCrossesThem) {
  // AmoebaNet cells read the last two cells' outputs: a boundary after a cell hands on both.
  const auto m = load(R"({"preset": "amoebanet-d", "structure": {"normal_cells": 3, "filters": 64}})");
  const auto& spec = cnn(m);
  const auto g = m.build(models::BuildOptions{1, 2});
  ASSERT_EQ(spec.layers[3], "cell1_normal1");
  std::int64_t crossing = 0;  // the outputs of the cell and of the one before it
  for (const auto& op : spec.ops)
    if ((op.layer == 2 || op.layer == 3) && op.name.size() > 7 && op.name.substr(op.name.size() - 7) == ".concat" &&
        op.name.find(".op") == std::string::npos && op.name.find("reduce") == std::string::npos)
      crossing += op.out.elems();
  EXPECT_DOUBLE_EQ(g.layers[3].output_bytes, 2.0 * static_cast<double>(crossing));
  // A ResNet block hands on one tensor: its output.
  const auto r = config::load_model_preset("resnet-50");
  const auto rg = r.build(models::BuildOptions{4, 2});
  EXPECT_DOUBLE_EQ(rg.layers[1].output_bytes, 4 * 256.0 * 56 * 56 * 2);
}

TEST(CnnScenario, LayerListErrorsNameTheEntry) {
  EXPECT_EQ(error_of(R"({"kind": "cnn", "image_size": 8, "classes": 10, "layers": [
      {"op": "concat", "branches": [[{"op": "conv", "filters": 4, "kernel": 3}], [{"op": "relu"}]]},
      {"op": "fc", "units": 10}]})"),
            "/model/layers/0: concat needs inputs of one spatial size: 6x6 and 8x8");
  EXPECT_EQ(error_of(R"({"kind": "cnn", "image_size": 8, "classes": 10, "layers": [
      {"op": "conv", "filters": 4, "kernel": 3, "groups": 2}, {"op": "fc", "units": 10}]})"),
            "/model/layers/0: 2 groups must divide the 3 input channels and the 4 filters");
  EXPECT_EQ(error_of(R"({"kind": "cnn", "image_size": 8, "classes": 10, "layers": [{"op": "fc", "units": 12}]})"),
            "/model/layers: the last op gives 12 values per image, but the model has 10 classes");
  EXPECT_EQ(error_of(R"({"kind": "cnn", "image_size": 8, "classes": 10, "layers": [{"op": "fc", "units": 10, "size": 3}]})"),
            "/model/layers/0/size: unknown key");
  // Tensor parallelism splits a CNN's channels (tests/test_cnn_split.cpp).
  EXPECT_EQ(error_of(R"({"preset": "resnet-50"})", R"({"data": 4, "tensor": 2})"), "");
}
