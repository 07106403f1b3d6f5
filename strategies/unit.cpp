#include "strategies/unit.hpp"

#include "sim/core/json_reader.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

// Each unit's maker, in its own file under units/.
std::unique_ptr<Unit> make_input_loader(const ParallelismSpec& p);
std::unique_ptr<Unit> make_activation_offload(const ParallelismSpec& p);
std::unique_ptr<Unit> make_priority_buckets(const ParallelismSpec& p);
std::unique_ptr<Unit> make_experts(const ParallelismSpec& p);
std::unique_ptr<Unit> make_zero(const ParallelismSpec& p);
std::unique_ptr<Unit> make_optimizer_offload(const ParallelismSpec& p);
std::unique_ptr<Unit> make_framework_zero3(const ParallelismSpec& p);
std::unique_ptr<Unit> make_async_updates(const ParallelismSpec& p);
std::unique_ptr<Unit> make_tensor_fusion(const ParallelismSpec& p);
std::unique_ptr<Unit> make_bf16_optimizer(const ParallelismSpec& p);

namespace {

// The registry, in the order the emitter calls the units: activation offload's fetch goes before
// ZeRO-3's gather in a layer's dependencies, as the copy comes back before the layer runs.
std::vector<UnitEntry>& registry() {
  static std::vector<UnitEntry> units{
      {"input-loader", [](const ParallelismSpec& p) { return p.input.enabled; }, make_input_loader},
      {"activation-offload", [](const ParallelismSpec& p) { return p.activation_offload; }, make_activation_offload},
      {"priority-buckets", [](const ParallelismSpec& p) { return p.priority_buckets; }, make_priority_buckets},
      {"experts", [](const ParallelismSpec& p) { return p.expert > 1; }, make_experts},
      {"zero", [](const ParallelismSpec& p) { return p.zero_stage > 0; }, make_zero},
      {"optimizer-offload", [](const ParallelismSpec& p) { return p.offload_optimizer; }, make_optimizer_offload},
      {"framework-zero3", framework_zero3, make_framework_zero3},
      {"async-updates", [](const ParallelismSpec& p) { return p.updates != Updates::Sync; }, make_async_updates},
      {"tensor-fusion", [](const ParallelismSpec& p) { return p.fusion.on(); }, make_tensor_fusion},
      // Its hooks act under bf16 only, which the training settings say (bf16_optimizer).
      {"bf16-optimizer", [](const ParallelismSpec& p) { return p.framework.framework == Framework::DeepSpeed && p.zero_stage == 0; },
       make_bf16_optimizer},
  };
  return units;
}

}  // namespace

bool UnitOptions::flag(const std::string& key) const {
  auto it = flags.find(key);
  return it != flags.end() && it->second;
}
double UnitOptions::number(const std::string& key) const {
  auto it = numbers.find(key);
  return it == numbers.end() ? 0.0 : it->second;
}
std::string UnitOptions::text(const std::string& key) const {
  auto it = texts.find(key);
  return it == texts.end() ? std::string() : it->second;
}

const std::vector<UnitEntry>& unit_registry() { return registry(); }

void register_unit(UnitEntry e) { registry().push_back(std::move(e)); }

void read_unit_settings(Reader& parallelism, ParallelismSpec& p) {
  for (const auto& e : registry()) {
    if (!e.read) continue;
    Reader r = parallelism.section(e.options_key);
    UnitOptions o;
    e.read(r, o);
    r.finish();
    p.unit_settings[e.options_key] = std::move(o);
  }
}

std::vector<std::pair<std::string, UnitOptions>> active_unit_settings(const ParallelismSpec& p) {
  std::vector<std::pair<std::string, UnitOptions>> out;
  for (const auto& e : registry())
    if (e.read && e.active(p))
      if (auto it = p.unit_settings.find(e.options_key); it != p.unit_settings.end()) out.emplace_back(it->first, it->second);
  return out;
}

std::vector<std::unique_ptr<Unit>> make_units(const ParallelismSpec& p) {
  std::vector<std::unique_ptr<Unit>> out;
  for (const auto& e : registry())
    if (e.active(p)) out.push_back(e.make(p));
  return out;
}

std::vector<std::string> unit_names() {
  std::vector<std::string> out;
  for (const auto& e : registry()) out.push_back(e.name);
  return out;
}

std::string replay_only(const std::vector<std::unique_ptr<Unit>>& units, const std::string& name, const ParallelismSpec& p) {
  for (const auto& u : units)
    if (name == u->name()) return u->replay_only(p);
  return "";
}

PassKind kind_of(const PipeOp& op, bool final) {
  return {op.forward, op.part, final, op.forward && op.micro_batch == 0, op.previous_step};
}

std::vector<std::pair<PassKind, std::int64_t>> pass_kinds(Schedule s, int stages, int stage, std::int64_t m) {
  using Part = PipeOp::Part;
  std::vector<std::pair<PassKind, std::int64_t>> out;
  if (m <= 0) return out;
  auto add = [&](PassKind k, std::int64_t n) {
    if (n > 0) out.emplace_back(k, n);
  };
  add({true, Part::Whole, false, true, false}, 1);
  add({true, Part::Whole, false, false, false}, m - 1);
  if (s->splits_backward) {  // B is never the last backward: a W follows it
    add({false, Part::Input, false, false, false}, m);
    add({false, Part::Weight, true, false, false}, 1);
    add({false, Part::Weight, false, false, false}, m - 1);
    return out;
  }
  // Without a flush the window's first p - stage - 1 backwards finish the previous step's
  // micro-batches (schedules need m >= p there).
  const std::int64_t previous = asynchronous(s) ? std::min<std::int64_t>(stages - stage - 1, m - 1) : 0;
  add({false, Part::Whole, false, false, true}, previous);
  add({false, Part::Whole, false, false, false}, m - 1 - previous);
  add({false, Part::Whole, true, false, false}, 1);
  return out;
}

bool replicas_join(const Layout& k, const ParallelismSpec& p) {
  if (!p.all_replicas || !k.sync || p.data <= 1) return false;
  return ((p.zero_stage >= 2 || p.schedule->updates_per_backward) && k.grad_ranks > 1) || p.expert > 1;
}

bool core_splits(const PassKind& kind, const Layout& k, const ParallelismSpec& p) {
  if (kind.forward) return false;
  // The last backward hands each layer's gradients on as it ends: to the buckets, or to the host.
  return kind.final && k.grad_ranks > 1 && p.overlap_grad_reduce;
}

bool Count::split(const PassKind& kind) const {
  if (kind.part == PipeOp::Part::Weight) return false;  // W passes run whole
  if (core_splits(kind, k, p)) return true;
  for (const auto* u : units)
    if (u->splits(kind)) return true;
  return false;
}

bool Count::layers_taken() const {
  for (const auto* u : units)
    if (u->takes_layers()) return true;
  return false;
}

bool Count::step_taken() const {
  for (const auto* u : units)
    if (u->takes_step()) return true;
  return false;
}

bool Count::replica_step_taken() const {
  for (const auto* u : units)
    if (u->takes_replica_step()) return true;
  return false;
}

bool Count::taken(const PassKind& kind) const {
  if (kind.part == PipeOp::Part::Weight) return false;
  for (const auto* u : units)
    if (u->takes(kind)) return true;
  return false;
}

double pass_tasks(const Count& c) {
  const double sends = c.p.tensor > 1 && !c.p.sequence_parallel ? 2 : 1;  // the receiving group's gather
  const bool updates_per_backward = c.p.schedule->updates_per_backward;
  const bool taken_layers = c.layers_taken();  // expert parallelism emits each layer's pass
  double per_replica = 0, updates = 0;
  for (int j = 0; j < c.k.chunks; ++j) {
    const double layers = static_cast<double>(c.k.chunk_layers[static_cast<std::size_t>(j)].size());
    for (const auto& [kind, count] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches)) {
      const double n = static_cast<double>(count);
      if (kind.part == PipeOp::Part::Weight) {
        per_replica += n;
        continue;
      }
      if (c.taken(kind)) continue;
      per_replica += n * (c.split(kind) ? (taken_layers ? 0 : layers) : 1);
      const bool hands_on = kind.forward ? j + 1 < c.k.chunks : j > 0;
      if (hands_on) per_replica += n * sends;
      // PipeDream steps each stage after every backward, its replicas' gradients summed first.
      if (updates_per_backward && !kind.forward) {
        per_replica += n;
        if (c.k.grad_ranks > 1) updates += n;
      }
    }
  }
  return per_replica * c.per_replica() + updates * c.per_collective();
}

namespace {
// Stage s's gradient buckets: the caller's count where it has one.
double bucket_count(const Count& c, int s) {
  if (c.stage_buckets) return (*c.stage_buckets)[static_cast<std::size_t>(s)];
  return static_cast<double>(sync_buckets(c.k.stage_layers(s), c.p, c.t.precision).size());
}
}  // namespace

double step_tasks(const Count& c) {
  if (!c.k.sync || c.p.schedule->updates_per_backward) return 0;  // no step, or each backward's update
  const double replicas = c.k.replicas;
  const bool synced = c.k.grad_ranks > 1 && c.p.zero_stage != 3;
  const double per_bucket = 1 + (compresses_on_gpu(c.p, c.t.precision, c.k.grad_ranks) ? replicas : 0);
  const bool steps = !c.step_taken() && !c.replica_step_taken();
  double n = 0;
  for (int s = 0; s < c.k.pipeline; ++s) {
    if (synced) n += bucket_count(c, s) * per_bucket;
    if (steps) n += replicas;
  }
  if (c.k.pipeline > 1 && c.model && c.model->tied_params > 0) n += 1;
  return n;
}

CollectiveCounts emitter_collectives(const Count& c) {
  using taskgraph::CollectiveOp;
  const auto a = c.p.algorithm;
  double sends = 0, backward_updates = 0;
  for (int j = 0; j < c.k.chunks; ++j)
    for (const auto& [kind, count] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches)) {
      if (kind.part == PipeOp::Part::Weight || c.taken(kind)) continue;
      const double n = static_cast<double>(count);
      if (kind.forward ? j + 1 < c.k.chunks : j > 0) sends += n;
      if (c.p.schedule->updates_per_backward && !kind.forward && c.k.grad_ranks > 1) backward_updates += n;
    }
  CollectiveCounts out{{CollectiveOp::SendRecv, a, GroupKind::StagePair, sends * c.per_replica()}};
  if (c.p.tensor > 1 && !c.p.sequence_parallel) out.push_back({CollectiveOp::AllGather, a, GroupKind::Tensor, sends * c.per_replica()});
  out.push_back({CollectiveOp::AllReduce, a, GroupKind::Data, backward_updates * c.per_collective()});
  if (!c.k.sync || c.p.schedule->updates_per_backward) return out;
  double buckets = 0;
  if (c.k.grad_ranks > 1 && c.p.zero_stage != 3)
    for (int s = 0; s < c.k.pipeline; ++s) buckets += bucket_count(c, s);
  out.push_back({bucket_op(c.p), a, GroupKind::Data, buckets});
  if (c.k.pipeline > 1 && c.model && c.model->tied_params > 0) out.push_back({CollectiveOp::AllReduce, a, GroupKind::EmbeddingPair, 1});
  return out;
}

}  // namespace dtsim::strategies
