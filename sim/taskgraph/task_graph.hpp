#pragma once
#include <string>
#include <vector>

#include "models/model_graph.hpp"

// A per-GPU task graph: compute on a rank, collectives on a group of ranks, with explicit
// dependencies. Stream order (one compute stream, one communication stream per rank) is encoded
// as dependencies by the strategy, so a backend only has to honour `deps`.
namespace dtsim::taskgraph {

enum class Category { Compute, Optimizer, Communication };

enum class CollectiveOp { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll };
enum class Algorithm { Ring };

const char* to_string(CollectiveOp op);
const char* to_string(Algorithm a);
const char* to_string(Category c);

// Kernels executed back to back; identical tasks on many ranks share one Work, priced once.
struct Work {
  std::string name;
  std::vector<models::Kernel> kernels;
  double repeat = 1;  // the kernels run this many times in a row
};

struct Collective {
  CollectiveOp op = CollectiveOp::AllReduce;
  Algorithm algorithm = Algorithm::Ring;
  int group = -1;
  double bytes = 0;  // the buffer size S, as nccl-tests counts it
};

struct Task {
  Category category = Category::Compute;
  std::string label;
  int rank = -1;  // compute tasks
  int work = -1;  // compute tasks
  bool is_collective = false;
  Collective collective;
  std::vector<int> deps;  // indices of earlier tasks
};

struct TaskGraph {
  int num_ranks = 0;
  std::vector<Work> works;
  std::vector<std::vector<int>> groups;
  std::vector<Task> tasks;

  int add_work(Work w);
  int add_group(std::vector<int> ranks);
  int add_compute(int rank, int work, Category c, std::string label, std::vector<int> deps);
  int add_collective(Collective c, std::string label, std::vector<int> deps);
};

}  // namespace dtsim::taskgraph
