#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "sim/cli/calibrate.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/describe.hpp"
#include "sim/cli/import.hpp"
#include "sim/cli/serve.hpp"
#include "sim/cli/realrun.hpp"
#include "sim/config/merge.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/heap.hpp"
#include "sim/core/interrupt.hpp"

namespace {

using namespace dtsim;

// A subcommand: its flags, bound to options it owns, and what runs when it is chosen.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  bool reads_scenarios = false;  // takes --allow-outside
};

Command add_run(CLI::App& app) {
  auto o = std::make_shared<cli::RunOptions>();
  auto* c = app.add_subcommand("run", "simulate one training step of a scenario");
  c->add_option("scenario", o->scenario, "scenario JSON file")->required();
  c->add_option("-o,--out", o->out_dir, "output directory (default out/<scenario name>)");
  c->add_option("--format", o->format, "stdout format")->check(CLI::IsMember({"text", "json"}));
  c->add_flag("--trace", o->trace, "also write a Chrome trace (trace.json)");
  c->add_flag("--html", o->html, "also write report.html: timeline, breakdown and memory bars");
  c->add_flag("--require-fit", o->require_fit, "exit 3 when the model does not fit in the GPUs' memory");
  c->add_flag("--kernels", o->kernels, "also print the kernel time by role (GEMMs, attention, norms, ...) on the breakdown's GPU");
  return {c, [o] { return cli::run(*o); }, true};
}

Command add_memory(CLI::App& app) {
  auto scenario = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("text");
  auto* c = app.add_subcommand("memory", "per-GPU memory breakdown only, no time simulation");
  c->add_option("scenario", *scenario, "scenario JSON file")->required();
  c->add_option("--format", *format, "stdout format")->check(CLI::IsMember({"text", "json"}));
  return {c, [scenario, format] { return cli::memory(*scenario, *format); }, true};
}

Command add_list(CLI::App& app) {
  auto what = std::make_shared<std::string>();
  auto* c = app.add_subcommand("list", "list models, devices, clusters or scenarios");
  c->add_option("what", *what, "models|devices|clusters|scenarios")
      ->required()
      ->check(CLI::IsMember({"models", "devices", "clusters", "scenarios"}));
  auto files = std::make_shared<bool>(false);
  c->add_flag("--files", *files, "also the file each entry is read from (under the data folder)");
  return {c, [what, files] { return cli::list(*what, *files); }};
}

Command add_compare(CLI::App& app) {
  auto o = std::make_shared<cli::CompareOptions>();
  auto* c = app.add_subcommand("compare", "compare two result.json files; exit 3 on a regression");
  c->add_option("baseline", o->baseline, "baseline result.json")->required();
  c->add_option("candidate", o->candidate, "candidate result.json")->required();
  c->add_option("--rel-tol", o->rel_tol, "tolerance of every metric --metric does not name (share, 0.02 = 2%)")
      ->check(CLI::Range(0.0, 10.0));
  c->add_option("--metric", o->metrics,
                "one metric's tolerance, repeatable: step_time_s=0.02, memory.peak_bytes=0.05 (a path into result.json)");
  c->add_option("--format", o->format, "stdout format: text, json, or junit (JUnit XML for CI)")
      ->check(CLI::IsMember({"text", "json", "junit"}));
  c->add_option("--html", o->html, "also write the two results side by side as a self-contained page");
  c->add_flag("--strict", o->strict, "results of different scenarios are an error (exit 2), not a warning");
  return {c, [o] { return cli::compare(*o); }};
}

Command add_validate(CLI::App& app) {
  auto o = std::make_shared<cli::ValidateOptions>();
  auto* c = app.add_subcommand("validate", "published measurements vs predictions, error table");
  c->add_option("--dir", o->directory, "scenarios with a \"reference\" (default scenarios/validation)");
  c->add_option("--suite", o->suite, "a folder of validation scenarios, sub-folders too: error by group, ranking agreement");
  c->add_flag("--strict", o->strict, "exit 3 if any row is outside its reference's tolerance_percent");
  c->add_option("-j,--jobs", o->jobs, "simulations at once (default: cores)")->check(CLI::Range(1, 256));
  c->add_option("--max-mean-error", o->max_mean_error, "exit 3 if the mean |error| exceeds this percent");
  c->add_option("--max-error", o->max_error, "exit 3 if any |error| exceeds this percent");
  c->add_option("--json", o->json_out, "also write the table as JSON here");
  return {c, [o] { return cli::validate(*o); }};
}

Command add_collective(CLI::App& app) {
  auto o = std::make_shared<cli::CollectiveOptions>();
  auto* c = app.add_subcommand("collective", "nccl-tests style table (size, time, algbw, busbw) from the network model");
  c->add_option("--op", o->op, "all_reduce|reduce_scatter|all_gather|broadcast|reduce|all_to_all");
  c->add_option("--algorithm", o->algorithm,
                "ring|tree|halving-doubling|hierarchical|direct|naive|master-worker|round-robin|auto "
                "(default: direct for all_to_all, ring otherwise)");
  c->add_option("--gpus", o->gpus, "GPUs taking part (default: all of --scenario's cluster, else 8)")->check(CLI::Range(1, 1 << 20));
  c->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node of the default cluster")->check(CLI::Range(1, 64));
  c->add_option("--scenario", o->scenario, "borrow this scenario's cluster");
  c->add_option("-b,--minbytes", o->min_bytes, "smallest size (8, 64K, 128M, 8G)");
  c->add_option("-e,--maxbytes", o->max_bytes, "largest size");
  c->add_option("-f,--stepfactor", o->factor, "size multiplier between rows");
  c->add_option("--format", o->format, "stdout format: text, json, or nccl-tests (its *_perf binaries' exact layout)")
      ->check(CLI::IsMember({"text", "json", "nccl-tests"}));
  c->add_flag("--analytical", o->analytical, "price each size alone instead of replaying on SimGrid");
  return {c, [o] { return cli::collective(*o); }, true};
}

Command add_profile(CLI::App& app) {
  auto o = std::make_shared<cli::ProfileOptions>();
  auto* c = app.add_subcommand("profile", "time the kernels a model needs on this machine; write a kernel table");
  c->add_option("--device", o->device, "cpu, or cuda (a CUDA build on a machine with a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  c->add_option("--dtype", o->dtype, "GEMM precision on a GPU: bf16 (default), fp16, tf32, fp32; the CPU times fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "tf32", "fp32"}));
  c->add_option("--model", o->model, "model preset (default tiny-gpt)");
  c->add_option("--scenario", o->scenario, "take model, micro-batch and slicing from this scenario");
  c->add_option("--micro-batch", o->micro_batch, "micro-batch size")->check(CLI::Range(1, 1 << 20));
  c->add_option("--repeats", o->repeats, "timed repetitions per kernel (median kept)")->check(CLI::Range(1, 1000));
  c->add_option("-o,--out", o->out, "kernel table to write");
  return {c, [o] { return cli::profile(*o); }, true};
}

// The planner's answer: the best per cluster, within days, money and memory headroom.
void add_planner_flags(CLI::App* c, cli::SweepOptions& o) {
  auto* by_cluster = c->add_flag("--by-cluster", o.by_cluster,
                                 "the best strategy of each cluster size and device, with days, GPU-hours, energy and cost");
  c->add_option("--per-cluster", o.per_cluster, "rows per cluster with --by-cluster (default 1)")
      ->check(CLI::Range(1, 1000))
      ->needs(by_cluster);
  c->add_option("--max-days", o.max_days, "only plans that train within this many days (needs training.tokens or .steps)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-cost", o.max_cost, "only plans that cost at most this many USD to train (needs training.tokens or .steps)")
      ->check(CLI::PositiveNumber);
  c->add_option("--min-headroom", o.min_headroom, "only plans that leave at least this many GiB of device memory free per GPU")
      ->check(CLI::PositiveNumber);
}

Command add_sweep(CLI::App& app) {
  auto o = std::make_shared<cli::SweepOptions>();
  auto* c = app.add_subcommand("sweep", "enumerate parallel strategies for a model and cluster, rank them");
  c->add_option("scenario", o->scenario, "scenario JSON file (model, device, cluster, batch)")->required();
  c->add_option("--gpus", o->gpus, "GPU counts to plan for, comma-separated: 256,512,1024 (default: the scenario's cluster)");
  c->add_option("--devices", o->devices, "device profiles, comma-separated: a100-sxm-80gb,h100-sxm-80gb (default: the scenario's)");
  c->add_option("--rank-by", o->rank_by, "time (to train, or step time), cost, or throughput-per-gpu")
      ->check(CLI::IsMember({"time", "cost", "throughput-per-gpu"}));
  c->add_option("--write-best", o->write_best, "write the best strategy that fits as a runnable scenario");
  c->add_flag("--progress", o->progress, "progress and ETA on stderr even when it is not a terminal");
  c->add_option("--jobs", o->jobs, "simulations at once (default: cores)")->check(CLI::Range(1, 256));
  c->add_option("--top", o->top, "rows to show")->check(CLI::Range(1, 100000));
  c->add_option("--confirm", o->confirm, "replay the best K of the closed-form ranking (default 5)")
      ->check(CLI::Range(0, 1 << 30));
  c->add_flag("--exact", o->exact, "replay every strategy instead of ranking them in closed form");
  c->add_option("--format", o->format, "stdout format")->check(CLI::IsMember({"text", "json", "csv"}));
  c->add_option("--precisions", o->precisions,
                "training precisions to try, comma-separated: bf16,fp8 (default: the scenario's; fp8 only on "
                "devices with an FP8 peak)");
  add_planner_flags(c, *o);
  auto* shard = c->add_option("--shard", o->shard, "price shard K of N (K/N, from 1) and write its part file for `dtsim merge`");
  c->add_option("-o,--out", o->part_out, "the shard's part file (default: stdout), written whole or not at all")->needs(shard);
  for (const char* output : {"--format", "--top", "--write-best", "--per-cluster"}) shard->excludes(output);
  return {c, [o] { return cli::sweep(*o); }, true};
}

Command add_merge(CLI::App& app) {
  auto o = std::make_shared<cli::MergeOptions>();
  auto* c = app.add_subcommand("merge", "join the part files of a sweep run as shards (sweep --shard K/N); print it as the whole sweep");
  c->add_option("parts", o->parts, "every shard's part file")->required();
  c->add_option("--format", o->format, "stdout format")->check(CLI::IsMember({"text", "json", "csv"}));
  c->add_option("--top", o->top, "rows to show")->check(CLI::Range(1, 100000));
  c->add_option("--per-cluster", o->per_cluster, "rows per cluster of a --by-cluster sweep (default 1)")->check(CLI::Range(1, 1000));
  c->add_option("--write-best", o->write_best, "write the best strategy within the limits as a runnable scenario");
  return {c, [o] { return cli::merge(*o); }, true};
}

Command add_serve(CLI::App& app) {
  auto o = std::make_shared<cli::ServeOptions>();
  auto* c = app.add_subcommand("serve", "the explorer page and POST /api/run over HTTP (loopback by default)");
  c->add_option("--port", o->port, "TCP port (0: any free one, printed)")->check(CLI::Range(0, 65535));
  c->add_option("--bind", o->bind, "address to listen on (default 127.0.0.1)");
  c->add_option("--jobs", o->jobs, "SimGrid simulations at once (each a child process); more get HTTP 503")
      ->check(CLI::Range(1, 64));
  c->add_option("--queue", o->queue,
                "analytical requests that may wait for a core (they run in process, one per core); more get HTTP 503 "
                "(default 64)")
      ->check(CLI::Range(0, 4096));
  c->add_option("--time-limit", o->time_limit_s, "seconds per simulation; past it HTTP 504")->check(CLI::Range(1.0, 86400.0));
  c->add_option("--client-timeout", o->client_timeout_s, "seconds a client has to send its request (default 30)")
      ->check(CLI::Range(1, 3600));
  c->add_option("--max-connections", o->max_connections, "connections open at once; more get HTTP 503 (default 64)")
      ->check(CLI::Range(1, 4096));
  return {c, [o] { return cli::serve(*o); }};
}

// The chosen command's exit code (SPEC.md): bad input 2, a failure 1.
// Commands kept in their own class answer -1 when they were not chosen.
int dispatch(const std::vector<Command>& commands, const std::vector<std::function<int()>>& others) {
  try {
    for (const auto& c : commands)
      if (*c.app) return c.run();
    for (const auto& other : others)
      if (const int rc = other(); rc >= 0) return rc;
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dtsim: " << e.what() << "\n";
    return 1;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  back_heap_with_huge_pages();
  interrupt::install();
  // A simulation `dtsim serve` started ends with the server's thread that waits for it, even when
  // the server is killed outright.
  // It checks its parent after asking, in case the server died before the request took effect.
  if (const char* server = std::getenv("DTSIM_SERVE_CHILD")) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::to_string(getppid()) != server) return 137;
  }
  CLI::App app{"dtsim: a deterministic simulator of distributed deep-learning training"};
  app.set_version_flag("--version", DTSIM_VERSION);
  app.require_subcommand(1);
  // In the order `dtsim --help` lists them.
  const std::vector<Command> commands{add_run(app),        add_memory(app),  add_list(app),
                                      add_compare(app),    add_validate(app), add_collective(app),
                                      add_profile(app),    add_sweep(app),   add_merge(app),
                                      add_serve(app)};
  cli::Realrun realrun(app);  // realrun, and its hidden realrun-worker
  const cli::Describe describe(app);
  const cli::Import import(app);
  const cli::Calibrate calibrate(app);
  bool allow_outside = false;
  for (const auto& c : commands)
    if (c.reads_scenarios)
      c.app->add_flag("--allow-outside", allow_outside,
                      "let \"extends\" name a file outside the scenario's folder and the project's scenarios/");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  config::allow_extends_outside(allow_outside);
  return dispatch(commands, {[&] { return realrun.dispatch(); }, [&] { return describe.dispatch(); },
                            [&] { return import.dispatch(); }, [&] { return calibrate.dispatch(); }});
}
