// The only file that includes SimGrid. Each task becomes SimGrid activities (an Exec for compute
// and for fixed delays, one Comm per network flow) started from completion callbacks, so no actor
// and no context switch is needed and the cost follows the number of activities.
#include <simgrid/kernel/ProfileBuilder.hpp>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>
#include <unordered_map>
#include <utility>

#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

namespace sg4 = simgrid::s4u;

namespace dtsim::replay {

namespace {
// Host speed in "FLOP/s": compute durations are fixed by the cost model before replay, so an
// Exec of seconds * kSpeed runs for exactly that long.
constexpr double kSpeed = 1e9;
}  // namespace

Timeline replay_simgrid(const ReplayInput& in) {
  int argc = 2;
  char name[] = "dtsim";
  char quiet[] = "--log=root.thres:critical";
  char* argv[] = {name, quiet, nullptr};
  sg4::Engine engine(&argc, argv);
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

  const auto& pf = in.platform;
  auto* zone = sg4::create_star_zone("cluster");
  namespace profile = simgrid::kernel::profile;
  // Profiles must be attached before a resource is sealed.
  std::map<int, const Variability::Flap*> flap_of_link;
  std::map<int, std::vector<const Variability::Throttle*>> throttles_of_host;
  if (in.variability) {
    for (const auto& f : in.variability->flaps) flap_of_link[pf.endpoint_links(pf.nic_endpoint(f.gpu)).front()] = &f;
    for (const auto& t : in.variability->throttles) throttles_of_host[pf.fabric_endpoint(t.gpu)].push_back(&t);
  }
  std::vector<sg4::SplitDuplexLink*> links;
  links.reserve(pf.links().size());
  for (std::size_t i = 0; i < pf.links().size(); ++i) {
    const auto& l = pf.links()[i];
    auto* link = zone->create_split_duplex_link(l.name, l.bandwidth);
    link->set_latency(l.latency);
    if (auto it = flap_of_link.find(static_cast<int>(i)); it != flap_of_link.end()) {
      // Full bandwidth, then degraded for the last degraded_s of every period (values are bytes/s;
      // SimGrid repeats the pattern every `periodicity` seconds, counted from its first event).
      const auto& f = *it->second;
      const std::string trace = fmt::format("0 {}\n{} {}\n", l.bandwidth, f.period_s - f.degraded_s, l.bandwidth * f.bandwidth_fraction);
      for (auto* dir : {link->get_link_up(), link->get_link_down()})
        dir->set_bandwidth_profile(profile::ProfileBuilder::from_string(l.name + dir->get_name(), trace, f.period_s));
      if (f.degraded_latency_s >= 0) {
        const std::string lat = fmt::format("0 {}\n{} {}\n", l.latency, f.period_s - f.degraded_s, f.degraded_latency_s);
        for (auto* dir : {link->get_link_up(), link->get_link_down()})
          dir->set_latency_profile(profile::ProfileBuilder::from_string(l.name + dir->get_name() + ".lat", lat, f.period_s));
      }
    }
    link->seal();
    links.push_back(link);
  }
  // Most endpoints hang off the star. An NVLink-ring node's GPUs sit in a zone of their own with a
  // route for every pair around the ring; a rail's NICs sit in a star of their own whose gateway
  // reaches the spine through the rail's uplink.
  auto up = [](bool u) { return u ? sg4::LinkInRoute::Direction::UP : sg4::LinkInRoute::Direction::DOWN; };
  const int gpus = pf.spec().num_gpus(), per_node = pf.spec().gpus_per_node;
  std::vector<sg4::NetZone*> node_zones, rail_zones;
  std::vector<simgrid::kernel::routing::NetPoint*> rail_gateways;
  if (pf.ring_link(0, 0) >= 0)
    for (int n = 0; n < pf.spec().nodes; ++n) {
      auto* nz = sg4::create_full_zone("node" + std::to_string(n));
      nz->set_parent(zone);
      node_zones.push_back(nz);
    }
  if (pf.rail_uplink(0) >= 0)
    for (int j = 0; j < pf.spec().nics_per_node; ++j) {
      auto* rz = sg4::create_star_zone("rail" + std::to_string(j));
      rz->set_parent(zone);
      auto* gw = rz->create_router("rail" + std::to_string(j) + "-gw");
      rz->add_route(gw, nullptr, nullptr, nullptr, {}, true);
      rail_gateways.push_back(gw);
      rail_zones.push_back(rz);
    }
  std::vector<sg4::Host*> hosts;
  hosts.reserve(static_cast<std::size_t>(pf.num_endpoints()));
  for (int e = 0; e < pf.num_endpoints(); ++e) {
    sg4::NetZone* home = zone;
    if (!node_zones.empty() && e < gpus) home = node_zones[static_cast<std::size_t>(e / per_node)];
    if (pf.rail_of(e) >= 0) home = rail_zones[static_cast<std::size_t>(pf.rail_of(e))];
    auto* h = home->create_host(pf.endpoint_name(e), kSpeed);
    if (auto it = throttles_of_host.find(e); it != throttles_of_host.end()) {
      // Speed profile values are fractions of the peak; event times must strictly increase (the
      // scenario rejects overlapping windows on one GPU).
      auto windows = it->second;
      std::sort(windows.begin(), windows.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
      std::string trace;
      double back = 0;  // when the previous window ended
      for (std::size_t k = 0; k < windows.size(); ++k) {
        const auto* t = windows[k];
        if (t->start_s > back || (k == 0 && t->start_s > 0)) trace += fmt::format("{} 1.0\n", back);
        trace += fmt::format("{} {}\n", t->start_s, 1.0 / t->slowdown);
        back = t->start_s + t->duration_s;
      }
      trace += fmt::format("{} 1.0\n", back);
      h->set_speed_profile(profile::ProfileBuilder::from_string(h->get_name() + ".throttle", trace, -1));
    }
    h->seal();
    hosts.push_back(h);
    if (home == zone || pf.rail_of(e) >= 0) {
      std::vector<sg4::LinkInRoute> route;
      for (int l : pf.endpoint_links(e)) route.emplace_back(links[static_cast<std::size_t>(l)], sg4::LinkInRoute::Direction::UP);
      home->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, route, true);
    }
  }
  for (std::size_t n = 0; n < node_zones.size(); ++n) {
    for (int a = 0; a < per_node; ++a)
      for (int b = 0; b < per_node; ++b) {
        if (a == b) continue;
        const int ga = static_cast<int>(n) * per_node + a, gb = static_cast<int>(n) * per_node + b;
        std::vector<sg4::LinkInRoute> route;
        for (const auto& hop : pf.route(ga, gb)) route.emplace_back(links[static_cast<std::size_t>(hop.link)], up(hop.up));
        node_zones[n]->add_route(hosts[static_cast<std::size_t>(ga)]->get_netpoint(), hosts[static_cast<std::size_t>(gb)]->get_netpoint(),
                                 nullptr, nullptr, route, false);
      }
    node_zones[n]->seal();
  }
  for (std::size_t j = 0; j < rail_zones.size(); ++j) {
    rail_zones[j]->seal();
    const std::vector<sg4::LinkInRoute> uplink{{links[static_cast<std::size_t>(pf.rail_uplink(static_cast<int>(j)))], up(true)}};
    zone->add_route(rail_zones[j]->get_netpoint(), nullptr, rail_gateways[j], nullptr, uplink, true);
  }
  // Fixed delays (collective step latencies) run here, on enough cores never to share one.
  auto* clock = zone->create_host("clock", kSpeed)->set_core_count(1 << 16)->seal();

  // Every collective is lowered before the run, once per distinct one, so that each chain (a ring
  // channel moving in lockstep) can get a zone of its own: two hosts joined by a route through all
  // of the chain's links. One flow then stands for the whole channel, which keeps SimGrid 3.32's
  // per-flow bookkeeping (quadratic in flows in flight) out of large rings.
  const auto& g = in.graph;
  const std::size_t n = g.tasks.size();
  struct Prepared {
    network::LoweredCollective lowered;
    std::vector<std::vector<int>> chain_pair;  // per phase, per chain: its host pair
    std::vector<std::vector<char>> chained;    // per phase, per flow: part of a chain
  };
  using Key = std::tuple<int, int, std::vector<int>, double, int, double>;
  std::map<Key, Prepared> prepared;
  std::vector<const Prepared*> prepared_of(n, nullptr);
  std::map<std::vector<std::pair<int, int>>, int> pair_of_chain;
  std::vector<std::pair<sg4::Host*, sg4::Host*>> pairs;
  std::unordered_map<const sg4::Host*, std::vector<std::vector<sg4::Link*>>> chain_hops;  // by source host
  // Chain hosts share zones: sealing a zone takes time linear in all hosts, and a full zone's
  // routing table is quadratic in its own.
  std::vector<sg4::NetZone*> chain_zones;
  constexpr std::size_t kPairsPerZone = 64;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective) continue;
    const auto& c = t.collective;
    Key key{static_cast<int>(c.op), static_cast<int>(c.algorithm), c.groups, c.bytes, c.only, c.server_apply_factor};
    auto [it, fresh] = prepared.try_emplace(std::move(key));
    prepared_of[i] = &it->second;
    if (!fresh) continue;
    auto& prep = it->second;
    prep.lowered = network::lower(pf, c, groups_of(g, c));
    for (const auto& ph : prep.lowered.phases) {
      prep.chained.emplace_back(ph.flows.size(), 0);
      auto& ids = prep.chain_pair.emplace_back();
      for (const auto& ch : ph.chains) {
        std::vector<std::pair<int, int>> hops;
        for (std::size_t f = ch.first; f < ch.first + ch.count; ++f) {
          hops.emplace_back(ph.flows[f].src, ph.flows[f].dst);
          prep.chained.back()[f] = 1;
        }
        auto [at, added] = pair_of_chain.try_emplace(hops, static_cast<int>(pairs.size()));
        ids.push_back(at->second);
        if (!added) continue;
        if (pairs.size() % kPairsPerZone == 0) {
          chain_zones.push_back(sg4::create_full_zone("chains" + std::to_string(chain_zones.size())));
          chain_zones.back()->set_parent(zone);
        }
        auto* cz = chain_zones.back();
        auto* a = cz->create_host("chain" + std::to_string(pairs.size()) + "-in", kSpeed)->seal();
        auto* b = cz->create_host("chain" + std::to_string(pairs.size()) + "-out", kSpeed)->seal();
        std::vector<sg4::LinkInRoute> route;
        auto& per_hop = chain_hops[a];
        for (const auto& [src, dst] : hops) {
          auto& hop_links = per_hop.emplace_back();
          for (const auto& hop : pf.route(src, dst)) {  // the direction crossed: a latency profile changes that one
            auto* duplex = links[static_cast<std::size_t>(hop.link)];
            route.emplace_back(duplex, up(hop.up));
            hop_links.push_back(hop.up ? duplex->get_link_up() : duplex->get_link_down());
          }
        }
        cz->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, route, false);
        pairs.emplace_back(a, b);
      }
    }
  }
  for (auto* cz : chain_zones) cz->seal();
  zone->seal();
  // A chain's flow crosses every hop's links but pays one hop's latency, the longest, as the
  // hops' own flows would have (SimGrid would charge the sum of the whole route's).
  if (!pairs.empty())
    zone->get_network_model()->set_lat_factor_cb(
        [&chain_hops](double, const sg4::Host* src, const sg4::Host*, const std::vector<sg4::Link*>&,
                      const std::unordered_set<sg4::NetZone*>&) {
          auto it = chain_hops.find(src);
          if (it == chain_hops.end()) return 1.0;
          double longest = 0, sum = 0;
          for (const auto& hop : it->second) {
            double l = 0;
            for (const auto* link : hop) l += link->get_latency();
            longest = std::max(longest, l);
            sum += l;
          }
          return sum > 0 ? longest / sum : 1.0;
        });

  // Dependencies are counted here and each task's activities are created only when it is ready:
  // SimGrid 3.32 slows down quadratically with activities waiting on dependencies (60,000
  // pre-created Execs took 9 s, created on demand 0.3 s).
  std::vector<int> waiting(n, 0), flows_left(n, 0), quorum_left(n, 0);
  std::vector<std::vector<int>> successors(n), quorum_successors(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    quorum_left[i] = t.any_deps.empty() ? 0 : std::min<int>(t.quorum, static_cast<int>(t.any_deps.size()));
    waiting[i] = static_cast<int>(t.deps.size()) + quorum_left[i];
    for (int d : t.deps) successors[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
    for (int d : t.any_deps) quorum_successors[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
  }
  Timeline out;
  out.start.assign(n, 0.0);
  out.end.assign(n, 0.0);
  enum class Role { Last, Flow, PhaseEnd };
  std::unordered_map<const sg4::Activity*, std::pair<std::size_t, Role>> role;
  // Activities in flight. A finished one is let go at the next completion: SimGrid must not free
  // an activity while it completes, and holding all of them to the end costs 1 GB at 3,072 GPUs.
  std::unordered_map<const sg4::Activity*, sg4::ActivityPtr> keep;
  std::vector<sg4::ActivityPtr> finished;
  // A collective in flight: its phases and the one running.
  struct Running {
    const Prepared* prep = nullptr;
    std::size_t phase = 0;
  };
  std::unordered_map<std::size_t, Running> running;

  auto run_exec = [&](std::size_t task, sg4::Host* host, double seconds, Role r) {
    sg4::ExecPtr e = sg4::Exec::init()->set_flops_amount(seconds * kSpeed)->set_host(host);
    role.emplace(e.get(), std::make_pair(task, r));
    keep.emplace(e.get(), e);
    e->start();
  };
  // Starts the current phase's flows, or its closing latency when it has none.
  auto start_phase = [&](std::size_t task) {
    auto& run = running.at(task);
    const auto& ph = run.prep->lowered.phases[run.phase];
    const auto& chained = run.prep->chained[run.phase];
    out.flows += ph.flows.size();
    flows_left[task] = static_cast<int>(ph.work.size() + ph.chains.size());
    for (char c : chained) flows_left[task] += c ? 0 : 1;
    if (flows_left[task] == 0) run_exec(task, clock, ph.latency, Role::PhaseEnd);
    // A server's CPU work shares its host with the other updates it is applying.
    for (const auto& w : ph.work) run_exec(task, hosts[static_cast<std::size_t>(w.endpoint)], w.seconds, Role::Flow);
    auto send = [&](sg4::Host* from, sg4::Host* to, double bytes) {
      sg4::CommPtr c = sg4::Comm::sendto_init(from, to)->set_payload_size(bytes);
      role.emplace(c.get(), std::make_pair(task, Role::Flow));
      keep.emplace(c.get(), c);
      c->start();
    };
    for (std::size_t f = 0; f < ph.flows.size(); ++f)
      if (!chained[f])
        send(hosts[static_cast<std::size_t>(ph.flows[f].src)], hosts[static_cast<std::size_t>(ph.flows[f].dst)], ph.flows[f].bytes);
    for (std::size_t k = 0; k < ph.chains.size(); ++k) {
      const auto& pair = pairs[static_cast<std::size_t>(run.prep->chain_pair[run.phase][k])];
      send(pair.first, pair.second, ph.flows[ph.chains[k].first].bytes);
    }
  };
  // Streams: the one collective each is running, and the ready ones waiting by priority.
  std::map<int, bool> busy;
  std::map<int, std::set<std::pair<double, std::size_t>>> queued;
  auto begin = [&](std::size_t i) {
    const auto& t = g.tasks[i];
    out.start[i] = sg4::Engine::get_clock();
    if (!t.is_collective) {
      // Data loading runs on the host's CPUs, beside the GPU rather than on it.
      auto* host = t.category == taskgraph::Category::Input ? clock : hosts[static_cast<std::size_t>(pf.fabric_endpoint(t.rank))];
      run_exec(i, host, in.seconds(i), Role::Last);
      return;
    }
    if (prepared_of[i]->lowered.phases.empty()) {
      run_exec(i, clock, 0.0, Role::Last);
      return;
    }
    running[i] = Running{prepared_of[i], 0};
    start_phase(i);
  };
  auto launch = [&](std::size_t i) {
    const int s = g.tasks[i].stream;
    if (s >= 0 && busy[s]) {
      queued[s].emplace(g.tasks[i].priority, i);
      return;
    }
    if (s >= 0) busy[s] = true;
    begin(i);
  };
  auto finish = [&](std::size_t task) {
    out.end[task] = sg4::Engine::get_clock();
    if (const int s = g.tasks[task].stream; s >= 0) {
      busy[s] = false;
      if (auto& q = queued[s]; !q.empty()) {
        const std::size_t next = q.begin()->second;
        q.erase(q.begin());
        busy[s] = true;
        begin(next);
      }
    }
    for (int s : successors[task])
      if (--waiting[static_cast<std::size_t>(s)] == 0) launch(static_cast<std::size_t>(s));
    for (int s : quorum_successors[task]) {
      const auto k = static_cast<std::size_t>(s);
      if (quorum_left[k] > 0 && (--quorum_left[k], --waiting[k] == 0)) launch(k);
    }
  };
  sg4::Activity::on_completion_cb([&](const sg4::Activity& a) {
    finished.clear();
    if (auto k = keep.find(&a); k != keep.end()) {
      finished.push_back(std::move(k->second));
      keep.erase(k);
    }
    auto it = role.find(&a);
    if (it == role.end()) return;
    auto [task, r] = it->second;
    role.erase(it);
    if (r == Role::Last) {
      finish(task);
    } else if (r == Role::Flow) {
      // The step latencies the aggregated flows do not pay come once they all finish.
      if (--flows_left[task] == 0) run_exec(task, clock, running.at(task).prep->lowered.phases[running.at(task).phase].latency, Role::PhaseEnd);
    } else {
      auto& run = running.at(task);
      if (++run.phase < run.prep->lowered.phases.size()) {
        start_phase(task);
      } else {
        running.erase(task);
        finish(task);
      }
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) launch(i);
  engine.run();

  out.backend = "simgrid";
  out.network_model = "CM02 (max-min flow sharing, no TCP effects)";
  for (std::size_t i = 0; i < n; ++i) out.makespan = std::max(out.makespan, out.end[i]);
  return out;
}

}  // namespace dtsim::replay
