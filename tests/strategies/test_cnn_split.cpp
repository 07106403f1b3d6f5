// A CNN split across GPUs within its layers, as AlexNet was (Krizhevsky et al. 2012, section 3.2):
// each rank computes and holds half of every layer, and the exchanges happen where the paper
// says, with the bytes of the tensors exchanged.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "helpers.hpp"
#include "models/cnn.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

models::ModelGraph build(const std::string& preset, std::int64_t micro_batch, std::int64_t tensor) {
  models::BuildOptions o;
  o.micro_batch = micro_batch;
  o.tensor = tensor;
  return config::load_model_preset(preset).build(o);
}

config::Scenario shipped(const std::string& name) { return config::load_scenario(test::source_dir() + "/scenarios/" + name); }

}  // namespace

TEST(CnnChannelSplit, EachGpuComputesAndHoldsHalfOfEveryLayer) {
  for (const char* preset : {"alexnet", "vgg-16", "resnet-50", "inception-v3"}) {
    SCOPED_TRACE(preset);
    const auto one = build(preset, 8, 1), two = build(preset, 8, 2);
    ASSERT_EQ(one.layers.size(), two.layers.size());
    for (std::size_t l = 0; l + 1 < one.layers.size(); ++l) {  // the loss is computed whole
      SCOPED_TRACE(one.layers[l].name);
      EXPECT_DOUBLE_EQ(two.layers[l].params(), one.layers[l].params() / 2);
      EXPECT_DOUBLE_EQ(two.layers[l].forward_flops(), one.layers[l].forward_flops() / 2);
    }
    EXPECT_DOUBLE_EQ(two.model_flops(), one.model_flops() / 2);
    EXPECT_TRUE(one.layers.front().tensor_split.channel_gathers.empty());
  }
}

TEST(CnnChannelSplit, AlexNetExchangesWhereThePaperSays) {
  // Section 3.2: the third convolution takes all of the second's maps, the fourth and fifth only
  // those on their own GPU; the fully connected layers read all neurons of the layer before.
  const double n = 128, e = 2;
  const auto g = build("alexnet", 128, 2);
  const std::map<std::string, double> gathered = {{"conv3", 256 * 13 * 13}, {"fc6", 256 * 6 * 6}, {"fc7", 4096}, {"fc8", 4096}};
  for (const auto& l : g.layers) {
    SCOPED_TRACE(l.name);
    const auto& s = l.tensor_split;
    if (l.name == "loss") {  // the logits, gathered for a whole softmax on each GPU
      EXPECT_EQ(s.channel_gathers, std::vector<double>{n * 1000 * e});
      EXPECT_TRUE(s.channel_sums.empty());
    } else if (gathered.count(l.name)) {
      EXPECT_EQ(s.channel_gathers, std::vector<double>{n * gathered.at(l.name) * e});
      EXPECT_EQ(s.channel_sums, s.channel_gathers);
    } else {
      EXPECT_TRUE(s.channel_gathers.empty());
      EXPECT_TRUE(s.channel_sums.empty());
    }
  }
}

TEST(CnnChannelSplit, ExchangedBytesPerStepAreTheClosedForm) {
  // Per step on one GPU: every split input a layer reads whole, all-gathered forward, and its
  // gradient reduce-scattered backward, once per micro-batch.
  auto s = shipped("cnn/alexnet-channel-split-2xv100.json");
  s.backend = config::Backend::Analytical;
  const auto r = results::simulate(s);
  const double n = 128, e = 2, micro_batches = 1;
  const double summed = n * e * (256 * 13 * 13 + 256 * 6 * 6 + 4096 + 4096);
  const double gathered = summed + n * e * 1000;
  double all_gather = 0, reduce_scatter = 0;
  for (const auto& t : r.plan.graph.tasks) {
    if (t.is_collective || t.rank != 0 || t.work < 0) continue;
    const auto& w = r.plan.graph.works[static_cast<std::size_t>(t.work)];
    for (const auto& c : w.comms) {
      if (c.op == taskgraph::CollectiveOp::AllGather) all_gather += c.bytes * c.count * w.repeat;
      if (c.op == taskgraph::CollectiveOp::ReduceScatter) reduce_scatter += c.bytes * c.count * w.repeat;
    }
  }
  EXPECT_DOUBLE_EQ(all_gather, micro_batches * gathered);
  EXPECT_DOUBLE_EQ(reduce_scatter, micro_batches * summed);
}

TEST(CnnChannelSplit, TwoGpusTakeMoreThanHalfOfOnesTime) {
  auto two = shipped("cnn/alexnet-channel-split-2xv100.json");
  two.backend = config::Backend::Analytical;
  auto one = two;
  one.parallelism.tensor = 1;
  one.cluster.gpus_per_node = 1;
  const auto r2 = results::simulate(two), r1 = results::simulate(one);
  EXPECT_GT(r2.breakdown.exposed_communication, 0);
  EXPECT_LT(r2.breakdown.compute, r1.breakdown.compute);
  EXPECT_GT(r2.step_time_s, 0.5 * r1.breakdown.compute);  // the exchanges cost
  EXPECT_NEAR(r2.breakdown.total(), r2.step_time_s, 1e-9);
  EXPECT_DOUBLE_EQ(r2.memory.params, r1.memory.params / 2);  // half of every layer's weights
}

TEST(CnnChannelSplit, AlexNetPresetMatchesThePaper) {
  const auto m = config::load_model_preset("alexnet");
  // Caffe's bvlc_alexnet, the paper's network with its two-GPU groups: 60,965,224 parameters.
  EXPECT_DOUBLE_EQ(m.build(models::BuildOptions{}).params(), 60965224);
  // Sze et al. 2017, "Efficient Processing of Deep Neural Networks", Table III: 724M MACs.
  EXPECT_NEAR(models::cnn_forward_macs(*m.as<models::CnnSpec>()) / 724e6, 1.0, 0.005);
}

TEST(CnnChannelSplit, ChannelsTheGpusCannotShareAreAnInputError) {
  test::TempDir dir;
  std::stringstream file;
  file << std::ifstream(test::source_dir() + "/scenarios/cnn/alexnet-channel-split-2xv100.json").rdbuf();
  auto text = file.str();
  const auto at = text.find(R"("tensor": 2)");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 11, R"("tensor": 3)");
  const auto gpus = text.find(R"("gpus_per_node": 2)");
  ASSERT_NE(gpus, std::string::npos);
  text.replace(gpus, 18, R"("gpus_per_node": 3)");
  try {
    config::load_scenario(dir.file("s.json", text));
    FAIL() << "tensor 3 loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/parallelism/tensor");
    EXPECT_EQ(e.reason(), "3 does not divide the 256 outputs of conv2.conv3 (tensor parallelism splits a CNN's channels)");
  }
}
