#include "sim/realrun/session.hpp"

#include <unistd.h>

#include <algorithm>

#include "sim/core/errors.hpp"
#include "sim/realrun/launch.hpp"

namespace dtsim::realrun {

Comparison train_and_predict(const SessionOptions& o) {
  if (o.workers < 2 || o.workers > 16) throw InputError("", "--workers", "between 2 and 16 worker processes");
  Comparison c;
  c.shaping = o.bandwidth_gbps != 0;
  if (c.shaping) {
    if (!(o.bandwidth_gbps >= 0.001 && o.bandwidth_gbps <= 100))
      throw InputError("", "--bandwidth-Gbps", "a link rate between 0.001 and 100 Gbit/s");
    // Shaping takes network namespaces and tc: root.
    if (geteuid() != 0)
      throw InputError("", "--bandwidth-Gbps",
                       "shaping the link needs root (network namespaces and tc); run without it to use loopback as it is");
  }
  const double deadline = steady_now() + o.timeout_s;
  c.shape = check_session(o);
  c.threads = std::max(1, online_cpus() / o.workers);
  c.load_before = load_average();
  const RealRun run = train(o, c.shape, c.threads, deadline);
  c.link = run.link;
  c.measured = run.measured;
  c.load_during = run.load_during;
  predict(o, run, c);
  c.cpus = online_cpus();
  return c;
}

}  // namespace dtsim::realrun
