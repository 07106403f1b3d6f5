// `dtsim serve` answers a scenario on the analytical backend in process: a child's start-up was
// 25 of its 31 ms of CPU (issue 28). What it runs there is safe on several threads at once: the
// loader and the simulation keep no state between calls (their scratch buffers and the key
// catalogue are thread_local, the shipped-file tables function-local statics), print nothing,
// never exit, write no file, and report bad input as an InputError, as the sweep's threads rely
// on too. SimGrid keeps one engine per process: its scenarios still go to a child.
#include "sim/cli/serve_local.hpp"

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <memory>

#include "reports/reports.hpp"
#include "sim/cli/serve_child.hpp"
#include "sim/config/scenario_text.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

namespace dtsim::cli {

std::optional<api::Answer> run_here(const std::string& scenario, bool report) {
  // The messages main() prints for the exceptions it catches, so the answers are the child's.
  try {
    const config::Scenario s = config::load_scenario_text(scenario, "scenario.json");
    if (s.backend != config::Backend::Analytical) return std::nullopt;
    const results::Result r = results::simulate(s);
    if (report) return api::Answer{200, reports::html_report(r), "text/html; charset=utf-8"};
    return api::Answer{200, results::to_json(r).dump(2) + "\n"};
  } catch (const InputError& e) {
    return api::text(400, fmt::format("error: {}\n", e.what()));
  } catch (const std::exception& e) {
    return api::text(500, fmt::format("dtsim: {}\n", e.what()));
  }
}

api::Answer run_simulation(const ServeOptions& o, Pool& pool, const std::string& scenario, bool report) {
  using Here = std::optional<api::Answer>;
  auto task = std::make_shared<std::packaged_task<Here()>>([scenario, report] { return run_here(scenario, report); });
  std::future<Here> answer = task->get_future();
  if (!pool.submit([task] { (*task)(); }))
    return api::text(503, fmt::format("error: {} simulations are running and {} waiting; try again\n", pool.workers(),
                                      pool.queue()));
  // A thread cannot be killed as a child can: past the limit the client is answered, and the
  // simulation (bounded by the input limits, docs/safety.md) ends on its worker unseen.
  if (answer.wait_for(std::chrono::duration<double>(o.time_limit_s)) == std::future_status::timeout)
    return time_limit_passed(o);
  if (Here here = answer.get()) return std::move(*here);
  return run_child(o, scenario, report);
}

}  // namespace dtsim::cli
