#pragma once
// A mechanism of the planner as one unit: its own state, hooks the emitter (strategies/planner.hpp)
// calls around each pass, each layer of a split pass and the optimizer step, the tasks it emits
// counted without emitting them (the budget, sim/results/budget.cpp, sums these), and whether the
// closed form (sim/results/closed_form.cpp) prices it or leaves it to the replay. The emitter
// keeps the streams, groups, sends and the replica join; a unit emits through it.
//
// A unit's count is checked against what it emits (tests/test_units.cpp): the emitter attributes
// every task created inside a unit's hook to that unit (Plan::unit_tasks).
#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strategies/buckets.hpp"
#include "strategies/layout.hpp"
#include "strategies/schedule.hpp"
#include "strategies/spec.hpp"

namespace dtsim {
class Reader;  // sim/core/json_reader.hpp
}

namespace dtsim::strategies {

class Planner;
class Unit;

// What a pass's tasks depend on beyond its chunk: forward or backward (and which part of a
// split backward), whether it is the chunk's last backward of the step, the first micro-batch's
// forward, or a backward of the previous step's micro-batch (schedules without a flush).
struct PassKind {
  bool forward = true;
  PipeOp::Part part = PipeOp::Part::Whole;
  bool final = false;
  bool first = false;
  bool previous_step = false;
};
PassKind kind_of(const PipeOp& op, bool final);
// The kinds of pass each chunk of stage `stage` runs in one step, and how many of each: m
// forwards (one the first micro-batch's) and m backwards (one final), or zero-bubble's m B and
// m W passes (a W final), or a window without a flush whose first p - stage - 1 backwards are the
// previous step's (strategies/schedule.hpp).
std::vector<std::pair<PassKind, std::int64_t>> pass_kinds(Schedule s, int stages, int stage, std::int64_t micro_batches);

// A pass being emitted, as the hooks see it: `cross` is what its next task waits for from other
// streams (the previous chunk's activation or the next one's gradient, a load); a hook may add to it.
struct Pass {
  int stage = 0, chunk = 0;  // chunk: the model chunk
  const PipeOp* op = nullptr;
  PassKind kind;
  const Layers* layers = nullptr;
  std::string tag;  // " c<chunk> mb<micro-batch>", for labels
  std::vector<int> cross;
};

// What a unit counts with: the layout laid out over the model, the strategy, and every active
// unit (a pass is split per layer when any of them asks).
struct Count {
  const Layout& k;
  const ParallelismSpec& p;
  const TrainingSpec& t;
  std::vector<const Unit*> units;
  // Every replica emitted and joining the collectives of the passes (strategies/plan_replicas.cpp):
  // those are one task per group, not one per replica.
  bool joined = false;
  const models::ModelGraph* model = nullptr;  // the graph the layout's layers belong to
  // Each stage's sync_buckets() count where the caller has them (the sweep's budget shares them
  // among its candidates); else counted here.
  const std::vector<double>* stage_buckets = nullptr;
  bool split(const PassKind& kind) const;  // the emitter's rule (Planner::split)
  bool taken(const PassKind& kind) const;  // a unit emits the whole pass
  bool layers_taken() const;               // a unit emits each layer of a split pass
  bool step_taken() const;                 // a unit runs the optimizer step
  bool replica_step_taken() const;         // a unit runs each replica's update
  // Replicas x local steps: how many times each replica's passes are emitted.
  double per_replica() const { return static_cast<double>(k.replicas) * k.iterations; }
  // How many times a collective of the passes is emitted: once per group when the replicas join.
  double per_collective() const { return joined ? k.iterations : per_replica(); }
};

// The groups a collective runs over, by kind, as the budget sizes them on a cluster
// (sim/results/budget.cpp): data-parallel (data x context ranks, one group per tensor rank),
// expert-data-parallel, expert-parallel (all-to-all: every group of the stage, or one block of
// replicas' groups where the replicas join), a tensor group, a pair of neighbouring stages, the
// first and last stage's pairs (tied embeddings), a worker against the servers, HSDP's shard
// groups and replicate groups (every one of the stage per collective).
enum class GroupKind { Data, ExpertData, Expert, ExpertBlock, Tensor, StagePair, EmbeddingPair, Servers, Shard, Replicate };
// How many collectives of one operation over one kind of group a step holds, all replicas together.
struct CollectiveCount {
  taskgraph::CollectiveOp op;
  taskgraph::Algorithm algorithm;
  GroupKind group;
  double count = 0;
};
using CollectiveCounts = std::vector<CollectiveCount>;

class Unit {
 public:
  virtual ~Unit() = default;
  virtual const char* name() const = 0;

  // --- emission (defaults: nothing)
  virtual void start_replica(Planner&) {}
  virtual void before_passes(Planner&, int /*iteration*/) {}  // each local step's passes
  virtual void before_pass(Planner&, Pass&) {}
  virtual bool takes(const PassKind&) const { return false; }  // then emit_pass emits it whole
  virtual void emit_pass(Planner&, Pass&) {}
  virtual bool splits(const PassKind&) const { return false; }  // one task per layer
  // Around each layer of a split pass: `deps` is what the layer's task will wait for.
  virtual void before_layer(Planner&, Pass&, const models::Layer&, std::vector<int>& /*deps*/) {}
  virtual void after_layer(Planner&, Pass&, const models::Layer&, int /*task*/) {}
  // A unit may emit each layer's task of a split pass itself (returns its last task).
  virtual bool takes_layers() const { return false; }
  virtual int emit_layer(Planner&, Pass&, const models::Layer&, std::vector<int> /*deps*/) { return -1; }
  // After a backward's last task (`split`: emitted layer by layer), zero-bubble's W passes included.
  virtual void after_backward(Planner&, Pass&, int /*last*/, bool /*split*/) {}
  virtual void end_replica(Planner&) {}
  // Gradient buckets queue on the stage's stream in the order they fill, unless a unit orders them.
  virtual bool orders_buckets() const { return false; }
  // Before a bucket's collective: `deps` is what it waits for from the backward (the previous
  // bucket not yet among them), `launch_s` what issuing it costs before any byte moves.
  virtual void before_bucket(Planner&, int /*s*/, const Bucket&, std::vector<int>& /*deps*/, double& /*launch_s*/) {}
  virtual void after_bucket(Planner&, int /*s*/, const Bucket&, int /*task*/) {}
  virtual void after_gradient_sync(Planner&, int /*s*/) {}  // after stage s's buckets
  // A unit may run a stage's optimizer step itself (every replica's), or each replica's update.
  virtual bool takes_step() const { return false; }
  virtual void step(Planner&, int /*s*/) {}
  virtual bool takes_replica_step() const { return false; }
  virtual void replica_step(Planner&, int /*s*/, int /*embedding_sync*/) {}
  // After every replica's optimizer step of stage s (`deps`: those steps).
  virtual void after_optimizer(Planner&, int /*s*/, const std::vector<int>& /*deps*/) {}
  // A task the optimizer step of the replica being emitted waits for (-1: none).
  virtual int step_waits_for() const { return -1; }

  // --- what it costs
  // Tasks it emits in one step, all replicas together, and the collectives among them.
  virtual double tasks(const Count&) const = 0;
  virtual CollectiveCounts collectives(const Count&) const { return {}; }
  // Why the closed form leaves it to the replay ("" when the closed form prices it).
  virtual std::string replay_only(const ParallelismSpec&) const = 0;
};

// A unit as the registry holds it: its name, whether a strategy uses it and its maker. A unit
// with settings of its own also names the object of the scenario's parallelism section that
// holds them (parallelism.<options_key>) and reads them there itself, each key with its range,
// default and one line of documentation (Reader::document), so `dtsim describe`, docs/keys.md and
// the result's statement of what ran come from the unit's own file.
struct UnitEntry {
  using Active = bool (*)(const ParallelismSpec&);
  using Make = std::unique_ptr<Unit> (*)(const ParallelismSpec&);
  using Read = void (*)(Reader&, UnitOptions&);
  UnitEntry(std::string n, Active a, Make m, std::string key = "", Read r = nullptr)
      : name(std::move(n)), active(a), make(m), options_key(std::move(key)), read(r) {}
  std::string name;
  Active active;
  Make make;
  std::string options_key;
  Read read;
};
// The registry: the built-in units (listed in unit.cpp), then any registered after them.
const std::vector<UnitEntry>& unit_registry();
// Adds a unit after the others (called before any scenario is read; a test's own unit).
void register_unit(UnitEntry e);
// Reads each registered unit's own settings from the scenario's parallelism section into
// p.unit_settings (their defaults where the section has no object for the unit).
void read_unit_settings(Reader& parallelism, ParallelismSpec& p);
// The settings of each unit the strategy uses that has its own, by options key: what ran.
std::vector<std::pair<std::string, UnitOptions>> active_unit_settings(const ParallelismSpec& p);

// The units a strategy uses, in the order the emitter calls them.
std::vector<std::unique_ptr<Unit>> make_units(const ParallelismSpec& p);
// The registry: every unit's name, in that order.
std::vector<std::string> unit_names();
// What units[name] says of the closed form ("" where it prices it or no such unit is active).
std::string replay_only(const std::vector<std::unique_ptr<Unit>>& units, const std::string& name, const ParallelismSpec& p);
// A collective of the passes over a data-parallel group is one task every replica joins
// (strategies/plan_replicas.cpp).
bool replicas_join(const Layout& k, const ParallelismSpec& p);
// Where the emitter itself splits a pass per layer: the last backward, when the gradient
// synchronisation starts layer by layer.
bool core_splits(const PassKind& kind, const Layout& k, const ParallelismSpec& p);
// A stage's gradient buckets as data-parallel sync fills them (plan_updates.cpp; Horovod's fusion cuts
// them by cycle time instead), and what make_buckets fills capped ones with: gradient bytes, caps, params.
std::vector<Bucket> sync_buckets(const Layers& stage_layers, const ParallelismSpec& p, Precision precision);
struct SyncCaps {
  double grad_bytes = 0, cap = 0, first_cap = 0;
  BucketParams which = BucketParams::All;
  auto operator<=>(const SyncCaps&) const = default;
};
SyncCaps sync_caps(const ParallelismSpec& p, Precision precision);
// Whether gradient compression runs kernels over each bucket before it is sent, and the collective
// that carries a bucket (plan_updates.cpp).
bool compresses_on_gpu(const ParallelismSpec& p, Precision precision, int grad_ranks);
taskgraph::CollectiveOp bucket_op(const ParallelismSpec& p);
// The tasks the emitter itself puts in the step after the passes: each stage's gradient buckets
// (and their compression per replica), the tied embedding's sum, each replica's optimizer step
// where no unit takes it.
double step_tasks(const Count& c);
// The collectives among the emitter's own tasks: the gradient buckets, the sends between stages and
// the receiving tensor group's gathers, PipeDream's all-reduces, the tied embedding's sum.
CollectiveCounts emitter_collectives(const Count& c);
// The tasks the emitter itself puts in the passes (one per pass, or per layer where a unit
// splits it; the sends between stages), all replicas together; the units' are theirs.
double pass_tasks(const Count& c);

}  // namespace dtsim::strategies
