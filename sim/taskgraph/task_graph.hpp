#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_ids.hpp"

// A per-GPU task graph: compute on a rank, collectives on a group of ranks, with explicit
// dependencies. Stream order (one compute stream, one communication stream per rank) is encoded
// as dependencies by the strategy, so a backend only has to honour `deps`.
namespace dtsim::taskgraph {

// Copy: a transfer between the GPU and host memory over PCIe on a copy engine (offload).
enum class Category : std::uint8_t { Compute, Optimizer, Communication, Input, Copy };

enum class CollectiveOp { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };
// How a collective moves data: its place in the network layer's list of algorithms
// (sim/network/algorithm_registry.cpp), which names, lowers and counts each. The values below are
// the ones other layers name; an algorithm added to the list needs none. `Auto` picks, per
// collective, the one the network model predicts fastest among ring, tree and hierarchical, as
// NCCL's tuner does with its own model. `Naive`: every rank sends its whole buffer to every other
// (the textbook all-to-all all-reduce).
enum class Algorithm : std::uint8_t {
  Ring, Tree, HalvingDoubling, Hierarchical, Direct, MasterWorker, RoundRobin, ParameterServer, CentralStorage, Naive, Auto
};

const char* to_string(CollectiveOp op);
const char* to_string(Category c);
std::optional<CollectiveOp> op_from_string(const std::string& s);

// How a software stack overlaps tensor-parallel collectives with the GEMMs beside them
// (strategies/tp_overlap.cpp): not at all, Transformer Engine's userbuffers (Megatron-Core's
// --tp-comm-overlap), or PyTorch's micro-pipelined async TP (torchtitan).
enum class TpOverlap : std::uint8_t { None, TransformerEngine, AsyncTp };
// How one collective is cut against the kernel it overlaps (InlineCollective::hidden_by):
// Ring: chunks - 1 point-to-point steps, each beside one of `chunks` slices of the kernel;
// Pipeline: the kernel in `chunks` slices, each slice's share of the collective after it;
// Bulk: the whole collective beside the whole kernel.
enum class OverlapCut : std::uint8_t { None, Ring, Pipeline, Bulk };

// A collective that blocks the compute stream (Megatron's tensor-parallel all-reduces): it is
// priced alone on its group, without contention, and adds to the task's duration.
struct InlineCollective {
  CollectiveOp op = CollectiveOp::AllReduce;
  int group = -1;
  double bytes = 0;
  double count = 1;
  // Each of the `count` messages runs beside `hidden_share` of the work's kernel number
  // `hidden_by` (ring attention: one step's transfer beside one chunk of attention), so only what
  // outlasts it blocks the stream. -1: nothing hides it.
  int hidden_by = -1;
  double hidden_share = 0;
  // Tensor-parallel overlap: the collective cut as `cut` into `chunks` against kernel `hidden_by`,
  // which runs on all but `margin_sms` of the device's SMs while they overlap (Transformer
  // Engine's set_sm_margin); only what the cut leaves exposed blocks the stream.
  OverlapCut cut = OverlapCut::None;
  int chunks = 0;
  int margin_sms = 0;
  // MoE all-to-all overlap: the whole of work `hidden_work` (another micro-batch's pass, which runs
  // beside it) hides it instead of kernel `hidden_by`; -1: none.
  int hidden_work = -1;
};

// Kernels executed back to back; identical tasks on many ranks share one Work, priced once.
struct Work {
  std::string name;
  std::vector<models::Kernel> kernels;
  double repeat = 1;  // the kernels run this many times in a row
  std::vector<InlineCollective> comms;
  double fixed_seconds = 0;  // work off the GPU with a known duration (host optimizer)
  // A PCIe copy between GPU and host memory (offload), priced on the platform's host links:
  // `copy_bytes` per GPU, every GPU of group `copy_group` at once (the ones this task's rank
  // stands for), so GPUs behind one PCIe switch or host share its bandwidth.
  double copy_bytes = 0;
  bool copy_to_host = true;
  int copy_group = -1;
  // With every replica emitted, each replica's copy names its own GPUs (its flows on SimGrid),
  // but the other replicas' same copies run at the same moment on the same host links: the
  // analytical price is of this group's GPUs copying together (-1: copy_group's).
  int copy_together_group = -1;
};

// One collective, run at once on every group listed (e.g. the data-parallel all-reduce of each
// tensor-parallel rank), so their flows contend as they do on the real network.
struct Collective {
  CollectiveOp op = CollectiveOp::AllReduce;
  Algorithm algorithm = Algorithm::Ring;
  std::vector<int> groups;
  double bytes = 0;  // the buffer size S, as nccl-tests counts it; for SendRecv the message
  // Asynchronous updates: only this member pushes and pulls, on its own time, against servers the
  // whole group shares (parameter servers or host memory). -1: every member, together.
  int only = -1;
  // Bytes a dedicated parameter server reads and writes per byte it receives when it applies an
  // asynchronous update (the optimizer step on its shard); 0: it only adds the contribution.
  double server_apply_factor = 0;
  // Fixed cost of issuing it (framework bookkeeping, kernel launch), before any byte moves.
  double launch_s = 0;
};

inline const std::string kNoLabel;
inline const Collective kNoCollective;

// One task. A graph holds millions (2.3 million for GPT-3 175B on 16,384 GPUs, every replica
// simulated), so a task is 72 bytes: its label and collective are shared with the other tasks
// that have the same ones (TaskGraph keeps one copy of each), its lists are compact.
struct Task {
  const std::string& label() const { return *label_; }
  const Collective& collective() const { return *collective_; }  // kNoCollective on compute tasks

  double priority = 0;  // see `stream`
  // Of `any_deps`, only the first `quorum` to finish are waited for (backup workers).
  RareTaskIds any_deps;
  // When steps repeat: tasks of this step's graph whose previous-step copies must end first (a
  // layer's forward waiting for its own parameters' update).
  RareTaskIds after_previous_step;
  int rank = -1;  // the GPU of a compute task
  int work = -1;  // compute tasks
  int quorum = 0;
  // Collectives of one stream run one at a time; when it frees, the ready one with the lowest
  // priority goes next, as ByteScheduler and P3 order gradients. -1: ordered by deps alone.
  int stream = -1;
  TaskIds deps;  // indices of earlier tasks
  Category category = Category::Compute;
  bool is_collective = false;
  // Work the next step's first task need not wait for (per-bucket updates it waits on itself).
  bool off_step_order = false;

 private:
  friend struct TaskGraph;
  const std::string* label_ = &kNoLabel;
  const Collective* collective_ = &kNoCollective;
};

// Ranks are GPU ids on the cluster. A strategy may give tasks to a few representative GPUs only
// (one per pipeline stage of one replica) when the others are exact copies; collectives still
// name every GPU, so the network carries everyone's traffic.
struct TaskGraph {
  int num_ranks = 0;
  std::vector<Work> works;
  std::vector<std::vector<int>> groups;
  std::vector<Task> tasks;

  int add_work(Work w);
  int add_group(std::vector<int> ranks);
  int add_compute(int rank, int work, Category c, std::string label, std::vector<int> deps);
  int add_collective(Collective c, std::string label, std::vector<int> deps);
  // An empty graph with this one's ranks, works and groups, whose tasks may be copied from this
  // one (they share its labels and collectives).
  TaskGraph empty_copy() const;

 private:
  // Each distinct label and collective, once; tasks point into it. Copies of a graph share it,
  // and it only grows, so a task copied from one graph to another stays valid (two copies must
  // not add tasks from two threads at once).
  struct Shared;
  std::shared_ptr<Shared> shared_;
  Shared& shared();
};

}  // namespace dtsim::taskgraph
