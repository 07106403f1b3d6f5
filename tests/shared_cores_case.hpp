#pragma once
// Issue 15 item 4, the hand-computed case both replays are checked on: GPU 0 computes for 1 s
// while it sends 12.5 GB to GPU 1 over a 25 GB/s link (0.5 s); GPU 2 computes 1 s apart from
// any collective; GPU 1 computes 1 s once the transfer is in.
#include "helpers.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::test {

struct SharedCoresCase {
  network::Platform platform{flat_cluster(3)};
  taskgraph::TaskGraph graph;
  std::vector<double> seconds{1.0};
  int overlapped = -1, apart = -1, send = -1, after = -1;

  SharedCoresCase() {
    graph.num_ranks = 3;
    taskgraph::Work w;
    w.name = "1 s";
    const int work = graph.add_work(w);
    const int pair = graph.add_group({0, 1});
    overlapped = graph.add_compute(0, work, taskgraph::Category::Compute, "overlapped", {});
    apart = graph.add_compute(2, work, taskgraph::Category::Compute, "apart", {});
    send = graph.add_collective({taskgraph::CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {pair}, 12.5e9}, "send", {});
    after = graph.add_compute(1, work, taskgraph::Category::Compute, "after", {send});
  }
  replay::ReplayInput input(double share) const {
    replay::ReplayInput in{graph, seconds, platform};
    in.comm_core_share = share;
    return in;
  }
};

}  // namespace dtsim::test
