#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"

#include "helpers.hpp"

using namespace dtsim;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

// A TPU-like torus: `dims` chips, 4 per host, links of 82 GB/s per direction and 1 us.
network::ClusterSpec torus(std::vector<int> dims) {
  network::ClusterSpec c = test::flat_cluster(1);
  int chips = 1;
  for (int d : dims) chips *= d;
  c.gpus_per_node = 4;
  c.nodes = chips / 4;
  c.nics_per_node = 1;
  c.topology = dims.size() == 2 ? network::Topology::Torus2D : network::Topology::Torus3D;
  c.torus_dims = dims;
  c.torus_link_bandwidth = 82e9;
  c.torus_link_latency = 1e-6;
  return c;
}

std::vector<int> all(const network::ClusterSpec& c) {
  std::vector<int> v;
  for (int i = 0; i < c.num_gpus(); ++i) v.push_back(i);
  return v;
}

double time_of(const network::Platform& pf, CollectiveOp op, Algorithm a, double bytes) {
  return network::analytical_time(pf, network::lower(pf, op, a, bytes, all(pf.spec())));
}

}  // namespace

TEST(Torus, ChipsReachEachOtherDimensionByDimensionTheShortWayRound) {
  network::Platform pf(torus({4, 4}));
  // Chip 5 is (1, 1): one hop along x, one along y.
  auto r = pf.route(0, 5);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].link, pf.torus_link(0, 0));
  EXPECT_TRUE(r[0].up);
  EXPECT_EQ(r[1].link, pf.torus_link(1, 1));
  // Chip 3 is (3, 0): one hop back across the wraparound link, 3 -> 0 crossed the other way.
  auto w = pf.route(0, 3);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].link, pf.torus_link(3, 0));
  EXPECT_FALSE(w[0].up);
  // Chips of different hosts (0 and 4: host 0 and host 1) are neighbours along y: no NIC.
  auto y = pf.route(0, 4);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].link, pf.torus_link(0, 1));
}

// 100 MB on a 4x4 torus at 82 GB/s and 1 us per link, by hand: reduce-scatter along x moves
// 3/4 x 100 MB over two directions, then along y 3/4 x 25 MB; the all-gather the same back.
// 2 x (0.75e8 / 164e9 + 0.75 x 2.5e7 / 164e9 + 6 x 1e-6) = 1.155293e-3 s.
TEST(Torus, AllReduceIsRingsAlongEachDimensionInTurn2D) {
  network::Platform pf(torus({4, 4}));
  const double expected = 2 * (0.75e8 / 164e9 + 0.75 * 2.5e7 / 164e9 + 6e-6);
  EXPECT_NEAR(network::algorithms::torus_closed_form({4, 4}, 1e8, 2, 1e-6, 82e9), expected, 1e-12);
  EXPECT_NEAR(time_of(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e8) / expected, 1.0, 1e-9);
  EXPECT_NEAR(time_of(pf, CollectiveOp::AllReduce, Algorithm::Auto, 1e8) / expected, 1.0, 1e-9);
  // Two phases per dimension, the later dimension on a quarter of the bytes.
  auto lc = network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e8, all(pf.spec()));
  EXPECT_EQ(lc.phases.size(), 4u);
}

TEST(Torus, AllReduceIsRingsAlongEachDimensionInTurn3D) {
  network::ClusterSpec c = torus({4, 4, 8});
  c.torus_link_bandwidth = 50e9;
  network::Platform pf(c);
  for (double bytes : {1e6, 1e8, 1e9}) {
    const double expected = network::algorithms::torus_closed_form({4, 4, 8}, bytes, 2, 1e-6, 50e9);
    EXPECT_NEAR(time_of(pf, CollectiveOp::AllReduce, Algorithm::Ring, bytes) / expected, 1.0, 1e-9) << bytes;
    EXPECT_NEAR(time_of(pf, CollectiveOp::ReduceScatter, Algorithm::Ring, bytes) / (expected / 2), 1.0, 1e-9) << bytes;
    EXPECT_NEAR(time_of(pf, CollectiveOp::AllGather, Algorithm::Ring, bytes) / (expected / 2), 1.0, 1e-9) << bytes;
  }
  // Both directions of every link carry half: about half a one-way ring's 2 x 127/128 x S / B.
  const double one_way = 2 * 127.0 / 128 * 1e9 / 50e9;
  EXPECT_LT(time_of(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e9), 0.51 * one_way);
}

TEST(Torus, ScenarioKeysAndTheirErrors) {
  auto load = [](const std::string& inter, const std::string& extra = "") {
    test::TempDir dir;
    const std::string doc = R"({"schema_version": 1, "name": "t", "model": {"preset": "resnet-50"},
      "hardware": {"device": "tpu-v3"},
      "cluster": {"nodes": 4, "gpus_per_node": 4, )" + extra + R"("inter_node": )" + inter + R"(},
      "parallelism": {"data": 16, "micro_batch_size": 8}, "training": {"global_batch_size": 128}})";
    return config::load_scenario(dir.file("s.json", doc));
  };
  const std::string good = R"({"nics_per_node": 1, "nic_bandwidth_GBps": 12.5, "latency_us": 5,
      "topology": "torus-2d", "dimensions": [4, 4], "link_bandwidth_GBps": 82, "link_latency_us": 1})";
  auto s = load(good);
  EXPECT_EQ(s.cluster.torus_dims, (std::vector<int>{4, 4}));
  EXPECT_DOUBLE_EQ(s.cluster.torus_link_bandwidth, 82e9);
  auto error = [&](const std::string& inter, const std::string& extra = "") {
    try {
      load(inter, extra);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string bad = good;
  bad.replace(bad.find("[4, 4]"), 6, "[4, 8]");
  EXPECT_NE(error(bad).find("32 chips, but the cluster has 16"), std::string::npos) << error(bad);
  bad = good;
  bad.replace(bad.find("[4, 4]"), 6, "[4, 2, 2]");
  EXPECT_NE(error(bad).find("expected 2 chip counts"), std::string::npos) << error(bad);
  EXPECT_NE(error(good, R"("intra_node": {"bandwidth_GBps": 300, "latency_us": 2}, )").find("leave intra_node out"),
            std::string::npos);
}

TEST(Torus, LargeToriOnSimGridAreForDataParallelismOnly) {
  auto load = [](const std::string& parallelism, const std::string& simulation) {
    test::TempDir dir;
    const std::string doc = R"({"schema_version": 1, "name": "t", "model": {"preset": "resnet-50"},
      "hardware": {"device": "tpu-v3"},
      "cluster": {"preset": "tpu-v3-pod", "nodes": 128, "inter_node": {"dimensions": [32, 16]}},
      "parallelism": )" + parallelism + R"(, "training": {"global_batch_size": 4096}, "simulation": )" + simulation + "}";
    try {
      config::load_scenario(dir.file("s.json", doc));
    } catch (const InputError& e) {
      return e.pointer() + ": " + e.reason();
    }
    return std::string();
  };
  EXPECT_EQ(load(R"({"data": 512, "micro_batch_size": 8})", "{}"), "");
  const std::string pipelined = R"({"data": 256, "pipeline": 2, "micro_batch_size": 8, "pipeline_schedule": "gpipe"})";
  EXPECT_NE(load(pipelined, "{}").find("/simulation/backend: on a torus of more than 256 chips"), std::string::npos)
      << load(pipelined, "{}");
  EXPECT_EQ(load(pipelined, R"({"backend": "analytical"})"), "");
}

// A group of chips along whole dimensions (a tensor-parallel group along x, a data-parallel one
// over y and z, as JAX maps mesh axes onto a pod) runs the same rings on just those dimensions:
// the closed form of its own dimensions, and no wrap through chips outside it.
TEST(Torus, AGroupAlongWholeDimensionsRunsItsOwnRings) {
  network::ClusterSpec c = torus({4, 4, 4});
  c.torus_link_bandwidth = 50e9;
  network::Platform pf(c);
  const std::vector<int> along_x{4, 5, 6, 7};
  std::vector<int> over_yz;
  for (int j = 0; j < 16; ++j) over_yz.push_back(1 + 4 * j);
  EXPECT_EQ(network::algorithms::torus_span(pf, along_x), (std::vector<int>{0}));
  EXPECT_EQ(network::algorithms::torus_span(pf, over_yz), (std::vector<int>{1, 2}));
  auto time = [&](CollectiveOp op, const std::vector<int>& r) {
    return network::analytical_time(pf, network::lower(pf, op, Algorithm::Ring, 1e8, r));
  };
  const double x = network::algorithms::torus_closed_form({4}, 1e8, 2, 1e-6, 50e9);
  const double yz = network::algorithms::torus_closed_form({4, 4}, 1e8, 2, 1e-6, 50e9);
  EXPECT_NEAR(time(CollectiveOp::AllReduce, along_x) / x, 1.0, 1e-9);
  EXPECT_NEAR(time(CollectiveOp::AllReduce, over_yz) / yz, 1.0, 1e-9);
  EXPECT_NEAR(time(CollectiveOp::AllGather, over_yz) / (yz / 2), 1.0, 1e-9);
  EXPECT_NEAR(time(CollectiveOp::ReduceScatter, over_yz) / (yz / 2), 1.0, 1e-9);
  // The ranks in any order: the same chips, the same rings.
  EXPECT_NEAR(time(CollectiveOp::AllReduce, {7, 5, 4, 6}) / x, 1.0, 1e-9);
}

TEST(Torus, AGroupThatIsNotASubTorusTakesRoutesBetweenItsChips) {
  network::ClusterSpec c = torus({4, 4, 4});
  c.torus_link_bandwidth = 50e9;
  network::Platform pf(c);
  // Half a line, a line and a stray chip, a chip twice: no sub-torus, so no torus rings.
  for (const std::vector<int>& r : {std::vector<int>{0, 1}, {0, 1, 2, 3, 4, 5, 6, 8}, {0, 1, 2, 2}})
    EXPECT_TRUE(network::algorithms::torus_span(pf, r).empty()) << r.size();
  // Two chips of a line of four: a ring of two over routes that go one hop each way, slower than
  // the whole line's bidirectional rings on the same bytes.
  const double half = network::analytical_time(pf, network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e8, {0, 1}));
  EXPECT_GT(half, network::algorithms::torus_closed_form({4}, 1e8, 2, 1e-6, 50e9));
}

// Two 4 x 4 pods (TPU pods joined by the data-centre network), chips numbered pod by pod: chips of
// one pod meet over its torus, chips of different pods through their hosts' NICs, and only a
// group inside one pod runs torus rings.
TEST(Torus, PodsMeetThroughTheirHostsNics) {
  network::ClusterSpec c = torus({4, 4});
  c.torus_pods = 2;
  c.nodes = 8;
  network::Platform pf(c);
  EXPECT_EQ(pf.pod_of(15), 0);
  EXPECT_EQ(pf.pod_of(16), 1);
  const auto across = pf.route(0, 16);
  ASSERT_EQ(across.size(), 2u);
  EXPECT_EQ(across[0].link, pf.endpoint_links(pf.nic_endpoint(0))[0]);
  EXPECT_EQ(across[1].link, pf.endpoint_links(pf.nic_endpoint(16))[0]);
  const auto inside = pf.route(16, 17);
  ASSERT_EQ(inside.size(), 1u);
  EXPECT_EQ(inside[0].link, pf.torus_link(16, 0));
  EXPECT_EQ(network::algorithms::torus_span(pf, {16, 17, 18, 19}), (std::vector<int>{0}));
  EXPECT_TRUE(network::algorithms::torus_span(pf, {0, 16}).empty());
  auto time = [&](const std::vector<int>& r) {
    return network::analytical_time(pf, network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e8, r));
  };
  // A line of pod 1 on its own links; a pair across the pods at the NICs' 25 GB/s: a ring of two
  // sends half of 100 MB each way in each of its two passes.
  EXPECT_NEAR(time({16, 17, 18, 19}) / network::algorithms::torus_closed_form({4}, 1e8, 2, 1e-6, 82e9), 1.0, 1e-9);
  EXPECT_NEAR(time({0, 16}) / (1e8 / 25e9), 1.0, 0.01);
}

TEST(Torus, PodsKeyAndItsErrors) {
  auto load = [](const std::string& inter) {
    test::TempDir dir;
    const std::string doc = R"({"schema_version": 1, "name": "t", "model": {"preset": "resnet-50"},
      "hardware": {"device": "tpu-v4"}, "cluster": )" + (inter.starts_with("{\"preset") ? inter : R"({"preset": "tpu-v4-pod", "nodes": 8, "inter_node": )" + inter + "}") + R"(,
      "parallelism": {"data": 32, "micro_batch_size": 8}, "training": {"global_batch_size": 256}})";
    try {
      return std::to_string(config::load_scenario(dir.file("s.json", doc)).cluster.torus_pods);
    } catch (const InputError& e) {
      return e.pointer() + ": " + e.reason();
    }
  };
  EXPECT_EQ(load(R"({"dimensions": [4, 2, 2], "pods": 2})"), "2");
  EXPECT_EQ(load(R"({"dimensions": [4, 2, 4]})"), "1");
  EXPECT_EQ(load(R"({"dimensions": [4, 2, 4], "pods": 2})"),
            "/cluster/inter_node/dimensions: 2 tori of 32 chips, but the cluster has 32 (8 nodes x 4)");
  EXPECT_EQ(load(R"({"dimensions": [2, 1, 1], "pods": 16})"), "/cluster/inter_node/dimensions: 2 chips per torus do not fill hosts of 4");
  EXPECT_NE(load(R"({"preset": "dgx-a100", "nodes": 4, "inter_node": {"pods": 2}})").find("/cluster/inter_node/pods"), std::string::npos);
}
