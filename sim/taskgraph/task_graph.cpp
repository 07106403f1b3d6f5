#include "sim/taskgraph/task_graph.hpp"

#include <bit>
#include <cstdint>
#include <deque>
#include <functional>
#include <stdexcept>
#include <unordered_set>

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

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

// Field by field, numbers by their bits: two collectives are one only when nothing tells them apart.
struct SameCollective {
  bool operator()(const Collective* a, const Collective* b) const {
    return a->op == b->op && a->algorithm == b->algorithm && a->groups == b->groups && bits(a->bytes) == bits(b->bytes) &&
           a->only == b->only && bits(a->server_apply_factor) == bits(b->server_apply_factor) && bits(a->launch_s) == bits(b->launch_s);
  }
};
struct HashCollective {
  std::size_t operator()(const Collective* c) const {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<std::uint64_t>(c->op));
    mix(static_cast<std::uint64_t>(c->algorithm));
    for (int g : c->groups) mix(static_cast<std::uint64_t>(g));
    mix(bits(c->bytes));
    mix(static_cast<std::uint64_t>(c->only));
    mix(bits(c->server_apply_factor));
    mix(bits(c->launch_s));
    return static_cast<std::size_t>(h);
  }
};

}  // namespace

struct TaskGraph::Shared {
  std::unordered_set<std::string> labels;  // nodes never move: tasks point at them
  std::deque<Collective> collectives;      // likewise
  std::unordered_set<const Collective*, HashCollective, SameCollective> distinct;

  const std::string* label(std::string s) { return &*labels.insert(std::move(s)).first; }
  const Collective* collective(Collective c) {
    collectives.push_back(std::move(c));
    auto [it, fresh] = distinct.insert(&collectives.back());
    if (!fresh) collectives.pop_back();
    return *it;
  }
};

TaskGraph::Shared& TaskGraph::shared() {
  if (!shared_) shared_ = std::make_shared<Shared>();
  return *shared_;
}

TaskGraph TaskGraph::empty_copy() const {
  TaskGraph g;
  g.num_ranks = num_ranks;
  g.works = works;
  g.groups = groups;
  g.shared_ = shared_;
  return g;
}

int TaskGraph::add_compute(int rank, int work, Category c, std::string label, std::vector<int> deps) {
  check_deps(deps, tasks.size());
  Task& t = tasks.emplace_back();
  t.category = c;
  t.label_ = shared().label(std::move(label));
  t.rank = rank;
  t.work = work;
  t.deps = deps;
  return static_cast<int>(tasks.size()) - 1;
}

int TaskGraph::add_collective(Collective c, std::string label, std::vector<int> deps) {
  check_deps(deps, tasks.size());
  Task& t = tasks.emplace_back();
  t.category = Category::Communication;
  t.label_ = shared().label(std::move(label));
  t.is_collective = true;
  t.collective_ = shared().collective(std::move(c));
  t.deps = deps;
  return static_cast<int>(tasks.size()) - 1;
}

}  // namespace dtsim::taskgraph
