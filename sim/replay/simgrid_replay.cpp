// The only file that includes SimGrid, built as the module libdtsim_simgrid.so that dtsim loads
// on its first SimGrid replay (simgrid_loader.cpp): SimGrid's 20-odd libraries (ns-3's among
// them) cost every other command half its start-up. Each task becomes SimGrid activities (an
// Exec for compute and for fixed delays, one Comm per network flow) started from completion
// callbacks, so no actor and no context switch is needed and the cost follows the number of
// activities.
#include <simgrid/kernel/ProfileBuilder.hpp>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sim/core/interrupt.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/event_scheduler.hpp"
#include "sim/replay/lowering.hpp"
#include "sim/replay/replay.hpp"

namespace sg4 = simgrid::s4u;
namespace profile = simgrid::kernel::profile;

namespace dtsim::replay {

namespace {

// Host speed in "FLOP/s": compute durations are fixed by the cost model before replay, so an
// Exec of seconds * kSpeed runs for exactly that long.
constexpr double kSpeed = 1e9;

sg4::LinkInRoute::Direction direction(bool up) {
  return up ? sg4::LinkInRoute::Direction::UP : sg4::LinkInRoute::Direction::DOWN;
}

void configure(sg4::Engine& engine, const ReplayInput& in) {
  // CM02 without cross traffic and without the TCP window cap is an ideal alpha-beta model:
  // flows share links max-min and the closed forms of the collectives hold exactly.
  engine.set_config("network/model:CM02");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");
  // SimGrid 3.32's lazy network update mishandles a link's latency changing mid-run (comms came
  // out lost, or a few percent off the full update); the full one costs more, so only then.
  if (in.variability)
    for (const auto& f : in.variability->flaps)
      if (f.degraded_latency_s >= 0) {
        engine.set_config("network/optim:Full");
        break;
      }
}

// Speed profile of a GPU's throttled windows: values are fractions of the peak, and event times
// must strictly increase (the scenario rejects overlapping windows on one GPU).
std::string throttle_trace(std::vector<const Variability::Throttle*> windows) {
  std::sort(windows.begin(), windows.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  std::string trace;
  double back = 0;  // when the previous window ended
  for (std::size_t k = 0; k < windows.size(); ++k) {
    const auto* t = windows[k];
    if (t->start_s > back || (k == 0 && t->start_s > 0)) trace += fmt::format("{} 1.0\n", back);
    trace += fmt::format("{} {}\n", t->start_s, 1.0 / t->slowdown);
    back = t->start_s + t->duration_s;
  }
  return trace + fmt::format("{} 1.0\n", back);
}

// The platform's links, endpoints and zones in SimGrid.
struct Fabric {
  sg4::NetZone* zone = nullptr;
  std::vector<sg4::SplitDuplexLink*> links;
  std::vector<sg4::Host*> hosts;  // by endpoint
  sg4::Host* clock = nullptr;     // fixed delays, on enough cores never to share one
  bool latencies_vary = false;    // a flapping link has a latency profile
};

void add_links(Fabric& fab, const ReplayInput& in) {
  const auto& pf = in.platform;
  std::map<int, const Variability::Flap*> flap_of_link;  // profiles go on before a link is sealed
  if (in.variability)
    for (const auto& f : in.variability->flaps) flap_of_link[pf.endpoint_links(pf.nic_endpoint(f.gpu)).front()] = &f;
  fab.links.reserve(pf.links().size());
  for (std::size_t i = 0; i < pf.links().size(); ++i) {
    const auto& l = pf.links()[i];
    const std::string name = l.name.str();
    auto* link = fab.zone->create_split_duplex_link(name, l.bandwidth);
    link->set_latency(l.latency);
    if (auto it = flap_of_link.find(static_cast<int>(i)); it != flap_of_link.end()) {
      // Full bandwidth, then degraded for the last degraded_s of every period (values are bytes/s;
      // SimGrid repeats the pattern every `periodicity` seconds, counted from its first event).
      const auto& f = *it->second;
      const std::string trace = fmt::format("0 {}\n{} {}\n", l.bandwidth, f.period_s - f.degraded_s, l.bandwidth * f.bandwidth_fraction);
      for (auto* dir : {link->get_link_up(), link->get_link_down()})
        dir->set_bandwidth_profile(profile::ProfileBuilder::from_string(name + dir->get_name(), trace, f.period_s));
      if (f.degraded_latency_s >= 0) {
        const std::string lat = fmt::format("0 {}\n{} {}\n", l.latency, f.period_s - f.degraded_s, f.degraded_latency_s);
        for (auto* dir : {link->get_link_up(), link->get_link_down()})
          dir->set_latency_profile(profile::ProfileBuilder::from_string(name + dir->get_name() + ".lat", lat, f.period_s));
        fab.latencies_vary = true;
      }
    }
    link->seal();
    fab.links.push_back(link);
  }
}

// GPU a's route to GPU b inside `zone`, through the platform's hops.
void route_pair(Fabric& fab, const network::Platform& pf, sg4::NetZone* zone, int a, int b) {
  std::vector<sg4::LinkInRoute> route;
  for (const auto& hop : pf.route(a, b)) route.emplace_back(fab.links[static_cast<std::size_t>(hop.link)], direction(hop.up));
  zone->add_route(fab.hosts[static_cast<std::size_t>(a)]->get_netpoint(), fab.hosts[static_cast<std::size_t>(b)]->get_netpoint(),
                  nullptr, nullptr, route, false);
}

// A torus's routes (dimension order): every pair up to kTorusAllPairs chips; beyond, the pairs on
// one line of the torus (what rings use).
void route_torus(Fabric& fab, const network::Platform& pf, sg4::NetZone* zone) {
  constexpr int kTorusAllPairs = 256;
  const int gpus = pf.spec().num_gpus();
  const int dims = static_cast<int>(pf.spec().torus_dims.size());
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) {
      if (a == b || pf.pod_of(a) != pf.pod_of(b)) continue;  // pods meet through their hosts' NICs
      int differ = 0;
      for (int k = 0; k < dims; ++k) differ += pf.torus_coord(a, k) != pf.torus_coord(b, k);
      if (gpus > kTorusAllPairs && differ > 1) continue;
      route_pair(fab, pf, zone, a, b);
    }
  zone->seal();
}

// Most endpoints hang off the star. An NVLink-ring node's GPUs sit in a zone of their own with a
// route for every pair around the ring; a rail's NICs sit in a star of their own whose gateway
// reaches the spine through the rail's uplink.
void add_hosts(Fabric& fab, const ReplayInput& in) {
  const auto& pf = in.platform;
  const int gpus = pf.spec().num_gpus(), per_node = pf.spec().gpus_per_node;
  std::map<int, std::vector<const Variability::Throttle*>> throttles_of_host;
  if (in.variability)
    for (const auto& t : in.variability->throttles) throttles_of_host[pf.fabric_endpoint(t.gpu)].push_back(&t);
  std::vector<sg4::NetZone*> node_zones, rail_zones;
  std::vector<simgrid::kernel::routing::NetPoint*> rail_gateways;
  // A torus's chips sit in one zone with a route for every pair (dimension order) up to
  // kTorusAllPairs chips; beyond, for pairs on one line of the torus (what rings use).
  sg4::NetZone* torus_zone = nullptr;
  if (pf.torus()) {
    torus_zone = sg4::create_full_zone("torus");
    torus_zone->set_parent(fab.zone);
  }
  if (pf.ring_link(0, 0) >= 0)
    for (int n = 0; n < pf.spec().nodes; ++n) {
      node_zones.push_back(sg4::create_full_zone("node" + std::to_string(n)));
      node_zones.back()->set_parent(fab.zone);
    }
  if (pf.rail_uplink(0) >= 0)
    for (int j = 0; j < pf.spec().nics_per_node; ++j) {
      auto* rz = sg4::create_star_zone("rail" + std::to_string(j));
      rz->set_parent(fab.zone);
      auto* gw = rz->create_router("rail" + std::to_string(j) + "-gw");
      rz->add_route(gw, nullptr, nullptr, nullptr, {}, true);
      rail_gateways.push_back(gw);
      rail_zones.push_back(rz);
    }
  fab.hosts.reserve(static_cast<std::size_t>(pf.num_endpoints()));
  for (int e = 0; e < pf.num_endpoints(); ++e) {
    sg4::NetZone* home = fab.zone;
    if (!node_zones.empty() && e < gpus) home = node_zones[static_cast<std::size_t>(e / per_node)];
    if (torus_zone && e < gpus) home = torus_zone;
    if (pf.rail_of(e) >= 0) home = rail_zones[static_cast<std::size_t>(pf.rail_of(e))];
    // Shared cores: a GPU's host runs at pstate 1, 1 - share of its speed, while it has a
    // collective in flight (EventScheduler::share_cores).
    auto* h = in.comm_core_share > 0 && e < gpus
                  ? home->create_host(pf.endpoint_name(e), std::vector<double>{kSpeed, (1.0 - in.comm_core_share) * kSpeed})
                  : home->create_host(pf.endpoint_name(e), kSpeed);
    if (auto it = throttles_of_host.find(e); it != throttles_of_host.end())
      h->set_speed_profile(profile::ProfileBuilder::from_string(h->get_name() + ".throttle", throttle_trace(it->second), -1));
    h->seal();
    fab.hosts.push_back(h);
    if (home == fab.zone || pf.rail_of(e) >= 0) {
      std::vector<sg4::LinkInRoute> route;
      for (int l : pf.endpoint_links(e)) route.emplace_back(fab.links[static_cast<std::size_t>(l)], direction(true));
      home->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, route, true);
    }
  }
  if (torus_zone) route_torus(fab, pf, torus_zone);
  for (std::size_t n = 0; n < node_zones.size(); ++n) {
    for (int a = 0; a < per_node; ++a)
      for (int b = 0; b < per_node; ++b)
        if (a != b) route_pair(fab, pf, node_zones[n], static_cast<int>(n) * per_node + a, static_cast<int>(n) * per_node + b);
    node_zones[n]->seal();
  }
  for (std::size_t j = 0; j < rail_zones.size(); ++j) {
    rail_zones[j]->seal();
    const std::vector<sg4::LinkInRoute> uplink{{fab.links[static_cast<std::size_t>(pf.rail_uplink(static_cast<int>(j)))], direction(true)}};
    fab.zone->add_route(rail_zones[j]->get_netpoint(), nullptr, rail_gateways[j], nullptr, uplink, true);
  }
  fab.clock = fab.zone->create_host("clock", kSpeed)->set_core_count(1 << 16)->seal();
}

// Each chain (hops moving in lockstep) gets two hosts joined by a route through all of its hops'
// links. One flow then stands for the whole chain, which keeps SimGrid 3.32's per-flow
// bookkeeping (quadratic in flows in flight) out of large rings.
struct Chains {
  std::vector<std::pair<sg4::Host*, sg4::Host*>> pairs;  // by ChainRoutes id
  // By source host: each hop's links, in the direction crossed (a latency profile changes that one).
  std::unordered_map<const sg4::Host*, std::vector<std::vector<const sg4::Link*>>> hops;
  // Chain hosts share zones: sealing a zone takes time linear in all hosts, and a full zone's
  // routing table is quadratic in its own.
  std::vector<sg4::NetZone*> zones;
  static constexpr std::size_t kPairsPerZone = 64;

  void add(const Fabric& fab, const network::Platform& pf, const ChainRoutes::Hops& hop_list) {
    if (pairs.size() % kPairsPerZone == 0) {
      zones.push_back(sg4::create_full_zone("chains" + std::to_string(zones.size())));
      zones.back()->set_parent(fab.zone);
    }
    const std::string name = "chain" + std::to_string(pairs.size());
    auto* a = zones.back()->create_host(name + "-in", kSpeed)->seal();
    auto* b = zones.back()->create_host(name + "-out", kSpeed)->seal();
    std::vector<sg4::LinkInRoute> route;
    auto& per_hop = hops[a];
    for (const auto& [src, dst] : hop_list) {
      auto& hop_links = per_hop.emplace_back();
      for (const auto& hop : pf.route(src, dst)) {
        auto* duplex = fab.links[static_cast<std::size_t>(hop.link)];
        route.emplace_back(duplex, direction(hop.up));
        hop_links.push_back(hop.up ? duplex->get_link_up() : duplex->get_link_down());
      }
    }
    zones.back()->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, route, false);
    pairs.emplace_back(a, b);
  }

  // SimGrid asks at every flow start; while latencies are fixed the answer is kept per chain.
  bool latencies_vary = false;
  mutable std::unordered_map<const sg4::Host*, double> factors;

  double latency_factor(const sg4::Host* src) const {
    if (latencies_vary) return route_latency_factor(src);
    auto [it, fresh] = factors.try_emplace(src, 1.0);
    if (fresh) it->second = route_latency_factor(src);
    return it->second;
  }

  // SimGrid would charge a chain's flow the latency of its whole route; its hops' own flows
  // would each have paid one hop's, so it pays the longest one.
  double route_latency_factor(const sg4::Host* src) const {
    auto it = hops.find(src);
    if (it == hops.end()) return 1.0;
    double longest = 0, sum = 0;
    for (const auto& hop : it->second) {
      double l = 0;
      for (const auto* link : hop) l += link->get_latency();
      longest = std::max(longest, l);
      sum += l;
    }
    return sum > 0 ? longest / sum : 1.0;
  }
};

// Runs what EventScheduler asks for as SimGrid activities and timers.
class Scheduler final : public EventScheduler {
 public:
  Scheduler(const ReplayInput& in, const Fabric& fab, const Chains& chains, PreparedOf prepared)
      : EventScheduler(in, std::move(prepared)), fab_(fab), chains_(chains) {
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { completed(a); });
  }

 private:
  double now() const override { return sg4::Engine::get_clock(); }

  void timer(double date, std::size_t task, Role r, Pending pending) override {
    simgrid::kernel::timer::Timer::set(date, [this, task, r, pending] { fired(task, r, pending); });
  }

  void track(sg4::ActivityPtr a, std::size_t task, Role r) {
    role_.emplace(a.get(), std::make_pair(task, r));
    keep_.emplace(a.get(), a);
    a->start();
  }

  void exec(std::size_t task, int endpoint, double seconds, Role r) override {
    track(sg4::Exec::init()->set_flops_amount(seconds * kSpeed)->set_host(fab_.hosts[static_cast<std::size_t>(endpoint)]), task, r);
  }

  void send(std::size_t task, int src, int dst, double bytes) override {
    flow(task, fab_.hosts[static_cast<std::size_t>(src)], fab_.hosts[static_cast<std::size_t>(dst)], bytes);
  }

  void send_chain(std::size_t task, int chain, double bytes) override {
    const auto& pair = chains_.pairs[static_cast<std::size_t>(chain)];
    flow(task, pair.first, pair.second, bytes);
  }

  void flow(std::size_t task, sg4::Host* from, sg4::Host* to, double bytes) {
    track(sg4::Comm::sendto_init(from, to)->set_payload_size(bytes), task, Role::Flow);
  }

  void slow_cores(int endpoint, bool slow) override { fab_.hosts[static_cast<std::size_t>(endpoint)]->set_pstate(slow ? 1 : 0); }

  void remaining(std::unordered_map<std::size_t, std::vector<double>>& left) const override {
    for (const auto& [a, tr] : role_) left[tr.first].push_back(a->get_remaining());
  }

  void completed(const sg4::Activity& a) {
    // A finished activity is let go at the next completion: SimGrid must not free an activity
    // while it completes, and holding all of them to the end costs 1 GB at 3,072 GPUs.
    finished_.clear();
    if (auto k = keep_.find(&a); k != keep_.end()) {
      finished_.push_back(std::move(k->second));
      keep_.erase(k);
    }
    auto it = role_.find(&a);
    if (it == role_.end()) return;
    auto [task, r] = it->second;
    role_.erase(it);
    done(task, r);
  }

  const Fabric& fab_;
  const Chains& chains_;
  std::unordered_map<const sg4::Activity*, std::pair<std::size_t, Role>> role_;
  std::unordered_map<const sg4::Activity*, sg4::ActivityPtr> keep_;  // in flight
  std::vector<sg4::ActivityPtr> finished_;
};

Timeline replay_here(const ReplayInput& in) {
  int argc = 2;
  char name[] = "dtsim";
  char quiet[] = "--log=root.thres:critical";
  char* argv[] = {name, quiet, nullptr};
  sg4::Engine engine(&argc, argv);
  interrupt::reclaim();  // the engine installs a SIGINT handler of its own that exits 1
  configure(engine, in);

  Fabric fab;
  fab.zone = sg4::create_star_zone("cluster");
  add_links(fab, in);
  add_hosts(fab, in);
  ChainRoutes routes;
  std::unordered_map<const taskgraph::Collective*, Prepared> store;
  std::map<int, Prepared> copies;
  auto prepared = prepare(in, routes, store, copies);
  Chains chains;
  for (const auto* hop_list : routes.hops) chains.add(fab, in.platform, *hop_list);
  for (auto* cz : chains.zones) cz->seal();
  fab.zone->seal();
  chains.latencies_vary = fab.latencies_vary;
  if (!chains.pairs.empty())
    fab.zone->get_network_model()->set_lat_factor_cb(
        [&chains](double, const sg4::Host* src, const sg4::Host*, const std::vector<sg4::Link*>&,
                  const std::unordered_set<sg4::NetZone*>&) { return chains.latency_factor(src); });

  Scheduler scheduler(in, fab, chains, std::move(prepared));
  scheduler.start();
  engine.run();

  Timeline out = scheduler.take();
  if (in.reuse) in.reuse->extend(out, true);
  out.backend = "simgrid";
  out.network_model = "CM02 (max-min flow sharing, no TCP effects)";
  for (double e : out.end) out.makespan = std::max(out.makespan, e);
  return out;
}

}  // namespace

}  // namespace dtsim::replay

// The entry simgrid_loader.cpp finds (linked in, or by dlsym in libdtsim_simgrid.so).
extern "C" void dtsim_simgrid_replay(const dtsim::replay::ReplayInput* in, dtsim::replay::Timeline* out) {
  *out = dtsim::replay::replay_here(*in);
}
