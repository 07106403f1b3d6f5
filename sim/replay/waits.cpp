#include "sim/replay/waits.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <numeric>
#include <string>

namespace dtsim::replay {

namespace {

bool is_compute(const taskgraph::Task& t) { return !t.is_collective && t.category == taskgraph::Category::Compute; }

// GPUs joined by stage-to-stage transfers: the stages of one pipeline.
std::vector<char> pipeline_of(const taskgraph::TaskGraph& g, int rank) {
  int n = std::max(g.num_ranks, rank + 1);
  for (const auto& task : g.tasks)
    if (task.is_collective && task.collective().op == taskgraph::CollectiveOp::SendRecv)
      for (int grp : task.collective().groups)
        for (int r : g.groups[static_cast<std::size_t>(grp)]) n = std::max(n, r + 1);
  std::vector<int> root(static_cast<std::size_t>(n));
  std::iota(root.begin(), root.end(), 0);
  auto up = [&](int r) -> int& { return root[static_cast<std::size_t>(r)]; };
  auto find = [&](int r) {
    while (up(r) != r) r = up(r) = up(up(r));
    return r;
  };
  for (const auto& task : g.tasks)
    if (task.is_collective && task.collective().op == taskgraph::CollectiveOp::SendRecv)
      for (int grp : task.collective().groups) {
        const auto& ranks = g.groups[static_cast<std::size_t>(grp)];
        for (std::size_t k = 1; k < ranks.size(); ++k) up(find(ranks[k])) = find(ranks[0]);
      }
  std::vector<char> out(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r) out[static_cast<std::size_t>(r)] = find(r) == find(rank) ? 1 : 0;
  return out;
}

// A duration that differs from its nominal price by more than the replay's rounding: something
// (a slow GPU, a jitter draw, a throttle) scaled it.
bool off_price(double ran, double price) { return std::abs(ran - price) > 1e-9 * price + 1e-12; }

// Two end times the replay's rounding cannot tell apart: a step derived from an earlier one
// (replay::StepReuse) ends its tasks within 1e-9 of the full replay's, so which dependency binds
// must not hang on the last bits.
bool same_time(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }
bool later(double a, double b) { return a > b && !same_time(a, b); }

// The kinds of pass a schedule orders: GPipe runs every forward before any backward, ZB-H1 defers
// weight-gradient passes, interleaved 1F1B takes turns between a GPU's model chunks; so a
// stage's waits fall between passes of one kind.
enum Kind { kForward, kBackward, kBackwardInput, kBackwardWeight, kOther, kKinds };
Kind kind_of(const std::string& label) {
  if (label.starts_with("fwd")) return kForward;
  if (label.starts_with("bwd input")) return kBackwardInput;
  if (label.starts_with("bwd weight")) return kBackwardWeight;
  if (label.starts_with("bwd")) return kBackward;
  return kOther;
}
// The model chunk a pass belongs to (" c3 mb1" in its label); -1: none.
int chunk_of(const std::string& label) {
  for (auto at = label.find(" c"); at != std::string::npos; at = label.find(" c", at + 1))
    if (at + 2 < label.size() && std::isdigit(static_cast<unsigned char>(label[at + 2]))) return std::atoi(label.c_str() + at + 2);
  return -1;
}

// This GPU's pace: at a uniform pace every stage's passes of each kind take as long as this GPU's
// of that kind, chunk by chunk (its first chunk's forwards as long as its first chunk's forwards...);
// a kind it has none of, its whole compute. Totals alone would make a stage whose forwards are a
// larger share of its work (the LM head's) late in the forwards and early in the backwards, and
// GPipe's wait between them bubble, more of it the more micro-batches.
struct Pace {
  std::vector<int> key;                       // per task: its kind and its chunk's place on its GPU
  std::vector<std::vector<double>> nominal;   // per GPU and key, the last all keys: priced compute
  std::vector<double> ran, priced;            // this GPU's, the last all keys
  std::size_t all = 0;

  Pace(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds, std::size_t gpus, int rank)
      : key(g.tasks.size(), -1) {
    std::vector<std::vector<int>> chunks(gpus);  // per GPU, the chunks it runs, in order
    auto counted = [&](const taskgraph::Task& task) { return is_compute(task) && task.rank >= 0 && static_cast<std::size_t>(task.rank) < gpus; };
    for (const auto& task : g.tasks)
      if (const int c = counted(task) ? chunk_of(task.label()) : -1; c >= 0) chunks[static_cast<std::size_t>(task.rank)].push_back(c);
    std::size_t most = 1;
    for (auto& c : chunks) {
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
      most = std::max(most, c.size());
    }
    all = kKinds * most;
    nominal.assign(gpus, std::vector<double>(all + 1, 0.0));
    ran.assign(all + 1, 0.0);
    priced.assign(all + 1, 0.0);
    for (std::size_t i = 0; i < g.tasks.size(); ++i) {
      const auto& task = g.tasks[i];
      if (!counted(task)) continue;
      const auto& c = chunks[static_cast<std::size_t>(task.rank)];
      const int chunk = chunk_of(task.label());  // none (an optimizer step): as the first chunk
      const auto place = chunk < 0 ? 0 : std::lower_bound(c.begin(), c.end(), chunk) - c.begin();
      key[i] = kind_of(task.label()) + kKinds * static_cast<int>(place);
      const double price = work_seconds[static_cast<std::size_t>(task.work)];
      auto& of = nominal[static_cast<std::size_t>(task.rank)];
      of[static_cast<std::size_t>(key[i])] += price;
      of[all] += price;
      if (task.rank != rank) continue;
      ran[static_cast<std::size_t>(key[i])] += t.end[i] - t.start[i], ran[all] += t.end[i] - t.start[i];
      priced[static_cast<std::size_t>(key[i])] += price, priced[all] += price;
    }
  }
  // Task i (compute, of GPU r, priced `price`) at this GPU's pace: from its durations as run, or its prices.
  double at_pace(std::size_t i, int r, double price, bool as_run) const {
    const auto& of = nominal[static_cast<std::size_t>(r)];
    const auto k = static_cast<std::size_t>(key[i]);
    const std::size_t by = priced[k] > 0 && of[k] > 0 ? k : all;
    return price / of[by] * (as_run ? ran : priced)[by];
  }
};

}  // namespace

Waits::Waits(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds, int rank,
             bool slowed_by_interference)
    : g_(g), t_(t), rank_(rank), interference_(slowed_by_interference), in_pipeline_(pipeline_of(g, rank)) {
  const std::size_t n = g.tasks.size();
  const Pace pace(g, t, work_seconds, in_pipeline_.size(), rank);
  const bool mine_off_price = off_price(pace.ran[pace.all], pace.priced[pace.all]);
  binding_.assign(n, kNone);
  late_.assign(n, 0.0);
  slowed_.assign(n, 0.0);
  uneven_.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& task = g.tasks[i];
    auto consider = [&](int dep) {
      const auto d = static_cast<std::size_t>(dep);
      if (t.end[d] > t.start[i]) return;  // not awaited (a backup worker's dropped gradients)
      std::size_t& b = binding_[i];
      if (b == kNone || later(t.end[d], t.end[b]) || (same_time(t.end[d], t.end[b]) && late_[d] < late_[b])) b = d;
    };
    for (int d : task.deps) consider(d);
    for (int d : task.any_deps) consider(d);
    // At nominal prices the task would wait for whichever dependency is latest there, not for the
    // one slowdowns made bind: the most uneven one stands for it.
    double uneven = 0;
    auto most_uneven = [&](const auto& deps) {
      for (int d : deps)
        if (t.end[static_cast<std::size_t>(d)] <= t.start[i]) uneven = std::max(uneven, uneven_[static_cast<std::size_t>(d)]);
    };
    most_uneven(task.deps);
    most_uneven(task.any_deps);
    double late = binding_[i] == kNone ? 0.0 : late_[binding_[i]];
    double slowed = binding_[i] == kNone ? 0.0 : slowed_[binding_[i]];
    if (is_compute(task) && task.rank >= 0 && static_cast<std::size_t>(task.rank) < pace.nominal.size() &&
        pace.nominal[static_cast<std::size_t>(task.rank)][pace.all] > 0) {
      const double price = work_seconds[static_cast<std::size_t>(task.work)];
      const double ran = t.end[i] - t.start[i];
      const double own = std::max(0.0, ran - pace.at_pace(i, task.rank, price, true));
      // At nominal prices the task would run late by its stage's extra work: stage imbalance. What
      // it runs later than that comes from durations off their nominal prices (its own or this
      // GPU's): slowdowns. Both at their prices (to rounding), none of it is.
      const double extra = std::max(0.0, price - pace.at_pace(i, task.rank, price, false));
      if (off_price(ran, price) || mine_off_price) slowed += own - std::min(own, extra);
      late += own;
      uneven += extra;
    }
    late_[i] = late;
    slowed_[i] = slowed;
    uneven_[i] = uneven;
  }
}

std::size_t Waits::ending_last_by(double when) const {
  std::size_t best = kNone;
  for (std::size_t i = 0; i < g_.tasks.size(); ++i) {
    if (t_.end[i] > when) continue;
    if (best == kNone || later(t_.end[i], t_.end[best]) || (same_time(t_.end[i], t_.end[best]) && late_[i] < late_[best]))
      best = i;
  }
  return best;
}

namespace {

// The waits for peers (pieces backwards in time) as one stretch in time order: bubble first, the
// late part at the end, its slowed share last.
void split_peer_wait(std::vector<IdleSpan> peer_pieces, double peers, double late, double slowed, IdleCause slow_cause,
                     std::vector<IdleSpan>& pieces) {
  std::reverse(peer_pieces.begin(), peer_pieces.end());
  const double bubble_until = peers - late, imbalance_until = peers - slowed;
  double done = 0;
  for (const auto& p : peer_pieces) {
    double lo = p.start;
    const double len = p.end - p.start;
    for (const auto& [cause, limit] : {std::pair{IdleCause::PipelineBubble, bubble_until},
                                       std::pair{IdleCause::StageImbalance, imbalance_until}, std::pair{slow_cause, peers}}) {
      const double take = std::clamp(limit - done, 0.0, p.start + len - lo);
      if (take <= 0) continue;
      const double hi = std::min(p.end, lo + take);
      if (hi > lo) pieces.push_back({lo, hi, cause});
      done += hi - lo;
      lo = hi;
    }
  }
}

}  // namespace

void Waits::charge(double from, double to, std::size_t waiter, std::size_t before, Breakdown& b,
                   std::vector<IdleSpan>* spans) const {
  if (to <= from) return;
  // The walk runs backwards in time; its pieces are reversed into time order at the end.
  std::vector<IdleSpan> pieces, peer_pieces;
  auto put = [&](IdleCause cause, double lo, double hi) {
    double& part = cause == IdleCause::PipelineBubble         ? b.pipeline_bubble
                   : cause == IdleCause::StageImbalance       ? b.stage_imbalance
                   : cause == IdleCause::StragglerWait        ? b.straggler_wait
                   : cause == IdleCause::CommInterference     ? b.comm_interference
                   : cause == IdleCause::ExposedCommunication ? b.exposed_communication
                                                              : b.input_stall;
    part += hi - lo;
    if (spans && hi > lo) pieces.push_back({lo, hi, cause});
  };
  std::size_t x = waiter;
  std::size_t d = waiter == kNone ? ending_last_by(to) : binding_[waiter];
  const std::size_t awaited = d;
  double cursor = to, peers = 0;
  while (cursor > from) {
    if (d == kNone) {  // nothing it waited for: idle by the schedule's own order
      put(IdleCause::PipelineBubble, from, cursor);
      break;
    }
    if (t_.start[d] >= cursor) {  // began after the span (past the horizon): what it waited for
      x = d;
      d = binding_[d];
      continue;
    }
    if (t_.end[d] < cursor) {
      // x was ready when d ended but began later: a collective queued behind others on its stream.
      const double lo = std::max(t_.end[d], from);
      put(x != kNone && g_.tasks[x].is_collective ? IdleCause::ExposedCommunication : IdleCause::PipelineBubble, lo, cursor);
      cursor = lo;
      if (cursor <= from) break;
    }
    const auto& task = g_.tasks[d];
    const double lo = std::max(t_.start[d], from);
    if (task.is_collective || task.category == taskgraph::Category::Copy) {  // network or PCIe
      put(IdleCause::ExposedCommunication, lo, cursor);
    } else if (task.category == taskgraph::Category::Input) {
      put(IdleCause::InputStall, lo, cursor);
    } else if (task.rank == rank_) {  // its own work ends by `from`; nothing is left to explain
      put(IdleCause::PipelineBubble, from, cursor);
      break;
    } else if (task.rank < 0 || static_cast<std::size_t>(task.rank) >= in_pipeline_.size() ||
               !in_pipeline_[static_cast<std::size_t>(task.rank)]) {
      put(IdleCause::StragglerWait, from, cursor);  // another replica's GPU reached the collective later
      break;
    } else {
      peers += cursor - lo;
      if (spans && cursor > lo) peer_pieces.push_back({lo, cursor, IdleCause::PipelineBubble});
    }
    cursor = lo;
    x = d;
    d = binding_[d];
  }
  if (peers > 0) {
    // Of the peers' lateness beyond this GPU's own, what uneven work would cause at nominal prices
    // is stage imbalance; slowdowns explain at most the rest: straggler wait. What they do not
    // explain is uneven work too (nothing is slowed: all of it).
    auto gap = [&](const std::vector<double>& v) {
      return (awaited == kNone ? 0.0 : v[awaited]) - (before == kNone ? 0.0 : v[before]);
    };
    const double late = std::clamp(gap(late_), 0.0, peers);
    const double uneven = std::clamp(gap(uneven_), 0.0, late);
    const double slowed = std::clamp(gap(slowed_), 0.0, late - uneven);
    const IdleCause slow_cause = interference_ ? IdleCause::CommInterference : IdleCause::StragglerWait;
    (interference_ ? b.comm_interference : b.straggler_wait) += slowed;
    b.stage_imbalance += late - slowed;
    b.pipeline_bubble += peers - late;
    if (spans) split_peer_wait(std::move(peer_pieces), peers, late, slowed, slow_cause, pieces);
  }
  if (!spans) return;
  std::sort(pieces.begin(), pieces.end(), [](const IdleSpan& a, const IdleSpan& c) { return a.start < c.start; });
  spans->insert(spans->end(), pieces.begin(), pieces.end());
}

}  // namespace dtsim::replay
