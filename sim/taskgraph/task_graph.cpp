#include "sim/taskgraph/task_graph.hpp"

#include <stdexcept>

namespace dtsim::taskgraph {

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::AllToAll: return "all_to_all";
    case CollectiveOp::SendRecv: return "send_recv";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Ring: return "ring";
    case Algorithm::Tree: return "tree";
    case Algorithm::HalvingDoubling: return "halving-doubling";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::Direct: return "direct";
    case Algorithm::MasterWorker: return "master-worker";
    case Algorithm::RoundRobin: return "round-robin";
    case Algorithm::ParameterServer: return "parameter-server";
    case Algorithm::CentralStorage: return "central-storage";
    case Algorithm::Auto: return "auto";
  }
  return "?";
}

std::optional<Algorithm> algorithm_from_string(const std::string& s) {
  for (auto a : {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling, Algorithm::Hierarchical, Algorithm::Direct,
                 Algorithm::MasterWorker, Algorithm::RoundRobin, Algorithm::ParameterServer, Algorithm::CentralStorage,
                 Algorithm::Auto})
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::optional<CollectiveOp> op_from_string(const std::string& s) {
  for (auto o : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather, CollectiveOp::Broadcast,
                 CollectiveOp::Reduce, CollectiveOp::AllToAll})
    if (s == to_string(o)) return o;
  return std::nullopt;
}

const char* to_string(Category c) {
  switch (c) {
    case Category::Compute: return "compute";
    case Category::Optimizer: return "optimizer";
    case Category::Communication: return "communication";
    case Category::Input: return "input";
    case Category::Copy: return "copy";
  }
  return "?";
}

int TaskGraph::add_work(Work w) {
  works.push_back(std::move(w));
  return static_cast<int>(works.size()) - 1;
}

int TaskGraph::add_group(std::vector<int> ranks) {
  groups.push_back(std::move(ranks));
  return static_cast<int>(groups.size()) - 1;
}

namespace {
void check_deps(const std::vector<int>& deps, std::size_t next) {
  for (int d : deps)
    if (d < 0 || static_cast<std::size_t>(d) >= next) throw std::logic_error("task dependency must name an earlier task");
}
}  // namespace

int TaskGraph::add_compute(int rank, int work, Category c, std::string label, std::vector<int> deps) {
  check_deps(deps, tasks.size());
  Task t;
  t.category = c;
  t.label = std::move(label);
  t.rank = rank;
  t.work = work;
  t.deps = std::move(deps);
  tasks.push_back(std::move(t));
  return static_cast<int>(tasks.size()) - 1;
}

int TaskGraph::add_collective(Collective c, std::string label, std::vector<int> deps) {
  check_deps(deps, tasks.size());
  Task t;
  t.category = Category::Communication;
  t.label = std::move(label);
  t.is_collective = true;
  t.collective = c;
  t.deps = std::move(deps);
  tasks.push_back(std::move(t));
  return static_cast<int>(tasks.size()) - 1;
}

}  // namespace dtsim::taskgraph
