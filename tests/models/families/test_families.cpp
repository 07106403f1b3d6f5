// The model-family registry: the shipped kinds are found by name, and a family written entirely in
// this file (spec, builder, neutral answers, key reader) runs through a scenario like a shipped one:
// what a new family needs beyond its own file is its line in models/families.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "helpers.hpp"
#include "models/family.hpp"
#include "models/model.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// A stack of square fully connected layers.
struct ToySpec {
  std::int64_t layers = 0, width = 0;
};

class ToyFamily : public models::FamilyOf<ToySpec> {
 public:
  using FamilyOf::FamilyOf;
  const char* kind() const override { return "toy"; }
  std::int64_t blocks() const override { return spec.layers; }
  std::string blocks_key() const override { return "model.num_layers"; }
  std::int64_t tokens_per_sample() const override { return 0; }
  std::string tensor_split_error(std::int64_t t) const override {
    return spec.width % t == 0 ? "" : fmt::format("{} does not divide model.width ({})", t, spec.width);
  }
  models::Sizes sizes() const override { return {{"layers", spec.layers}}; }

  models::ModelGraph build(const models::BuildOptions& o) const override {
    const double w = static_cast<double>(spec.width), b = static_cast<double>(o.micro_batch), e = o.activation_bytes;
    auto gemm = [&](const char* name, std::int64_t m, std::int64_t n, std::int64_t k) {
      models::Kernel g;
      g.name = name;
      g.kind = models::KernelKind::Gemm;
      g.m = m, g.n = n, g.k = k;
      g.flops = 2.0 * static_cast<double>(m * n * k);
      g.bytes = e * static_cast<double>(m * k + k * n + m * n);
      return g;
    };
    models::ModelGraph g;
    g.name = "toy";
    g.options = o;
    for (std::int64_t i = 0; i < spec.layers; ++i) {
      models::Op fc;
      fc.name = "fc";
      fc.forward = {gemm("fc.fwd", o.micro_batch, spec.width, spec.width)};
      fc.backward = {gemm("fc.dgrad", o.micro_batch, spec.width, spec.width), gemm("fc.wgrad", spec.width, spec.width, o.micro_batch)};
      fc.params = w * w;
      fc.saved_bytes = b * w * e;
      fc.matmul = true;
      models::Layer l;
      l.name = fmt::format("fc{}", i);
      l.ops = {fc};
      l.input_bytes = l.output_bytes = b * w * e;
      g.layers.push_back(l);
    }
    return g;
  }
};

std::shared_ptr<const models::Family> parse_toy(Reader& r, const std::string&, const std::shared_ptr<const Origins>&) {
  ToySpec s;
  s.layers = r.integer("num_layers", 1, 1000);
  s.width = r.integer("width", 1, 100000);
  r.finish();
  return std::make_shared<ToyFamily>(s);
}

config::Scenario load(test::TempDir& dir, const std::string& model) {
  return config::load_scenario(dir.file("toy.json", R"({"name": "toy", "model": )" + model + R"(,
    "hardware": {"device": "a100-sxm-80gb"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
    "parallelism": {"data": 8}, "training": {"global_batch_size": 64}})"));
}

}  // namespace

TEST(Families, EveryShippedKindIsFoundByItsName) {
  std::vector<std::string> names;
  for (const auto& k : models::family_kinds()) {
    names.push_back(k.name);
    ASSERT_EQ(models::find_family_kind(k.name), &k);
    EXPECT_NE(k.parse, nullptr);
    EXPECT_FALSE(k.docs.empty()) << k.name;
  }
  // The order model.kind lists them in (describe, errors).
  EXPECT_EQ(names, (std::vector<std::string>{"transformer", "vit", "cnn"}));
  EXPECT_EQ(models::find_family_kind("rnn"), nullptr);
}

TEST(Families, ShippedKindsAnswerAsTheyWereRead) {
  test::TempDir dir;
  const std::pair<const char*, const char*> read[] = {
      {"gpt2", "transformer"}, {"mixtral-8x7b", "transformer"}, {"vit-b-16", "vit"}, {"resnet-50", "cnn"}};
  for (const auto& [preset, kind] : read) {
    const auto m = load(dir, fmt::format(R"({{"preset": "{}"}})", preset)).model;
    EXPECT_STREQ(m.kind(), kind) << preset;
    EXPECT_EQ(m.name, preset);
  }
}

TEST(Families, AFamilyWrittenInOneFileRunsThroughAScenario) {
  test::TempDir dir;
  EXPECT_THROW(load(dir, R"({"kind": "toy", "num_layers": 3, "width": 1024})"), InputError);  // not registered yet
  const models::ScopedFamilyKind toy{{"toy", parse_toy, {{"num_layers", "layers"}, {"width", "their width"}}}};
  auto s = load(dir, R"({"kind": "toy", "num_layers": 3, "width": 1024})");
  EXPECT_STREQ(s.model.kind(), "toy");
  EXPECT_EQ(s.model.blocks(), 3);
  EXPECT_EQ(s.model.transformer(), nullptr);
  ASSERT_NE(s.model.as<ToySpec>(), nullptr);
  EXPECT_EQ(s.model.as<ToySpec>()->width, 1024);
  const auto g = s.model.build(models::BuildOptions{8, 2});
  ASSERT_EQ(g.layers.size(), 3u);
  EXPECT_DOUBLE_EQ(g.params(), 3.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(g.model_flops(), 3 * 3 * 2.0 * 8 * 1024 * 1024);
  // The neutral questions it answers reach the scenario's checks, with the family's own words.
  EXPECT_EQ(s.model.context_split_error(2), "context parallelism splits a language model's token sequence; model.kind \"toy\" has none");
  EXPECT_EQ(s.model.tensor_split_error(3), "3 does not divide model.width (1024)");
  // The key reader's errors name the file and the key, as a shipped family's do.
  try {
    load(dir, R"({"kind": "toy", "num_layers": 3, "width": 1024, "widht": 512})");
    ADD_FAILURE() << "a misspelt key was read";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("toy.json:/model/widht"), std::string::npos) << what;
    EXPECT_NE(what.find("unknown key (did you mean \"width\"?)"), std::string::npos) << what;
  }
  // And a training step: every parameter's gradient crosses the network once, in bf16.
  s.backend = config::Backend::Analytical;
  const auto r = results::simulate(s);
  EXPECT_TRUE(r.fits);
  EXPECT_DOUBLE_EQ(r.params, 3.0 * 1024 * 1024);
  EXPECT_GT(r.samples_per_s, 0);
}

TEST(Families, AScopedKindIsGoneWhenItsScopeEnds) {
  { const models::ScopedFamilyKind toy{{"toy", parse_toy, {}}}; EXPECT_NE(models::find_family_kind("toy"), nullptr); }
  EXPECT_EQ(models::find_family_kind("toy"), nullptr);
  EXPECT_EQ(models::family_kinds().size(), 3u);
}
