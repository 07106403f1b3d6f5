#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "sim/cli/commands.hpp"
#include "sim/cli/describe.hpp"
#include "sim/cli/import.hpp"
#include "sim/cli/serve.hpp"
#include "sim/cli/realrun.hpp"
#include "sim/config/merge.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/interrupt.hpp"

int main(int argc, char** argv) {
  using namespace dtsim;
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

  cli::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "simulate one training step of a scenario");
  run_cmd->add_option("scenario", run.scenario, "scenario JSON file")->required();
  run_cmd->add_option("-o,--out", run.out_dir, "output directory (default out/<scenario name>)");
  run_cmd->add_option("--format", run.format, "stdout format")->check(CLI::IsMember({"text", "json"}));
  run_cmd->add_flag("--trace", run.trace, "also write a Chrome trace (trace.json)");
  run_cmd->add_flag("--html", run.html, "also write report.html: timeline, breakdown and memory bars");
  run_cmd->add_flag("--require-fit", run.require_fit, "exit 3 when the model does not fit in the GPUs' memory");

  std::string mem_scenario, mem_format = "text";
  auto* mem_cmd = app.add_subcommand("memory", "per-GPU memory breakdown only, no time simulation");
  mem_cmd->add_option("scenario", mem_scenario, "scenario JSON file")->required();
  mem_cmd->add_option("--format", mem_format, "stdout format")->check(CLI::IsMember({"text", "json"}));

  std::string what;
  auto* list_cmd = app.add_subcommand("list", "list models, devices, clusters or scenarios");
  list_cmd->add_option("what", what, "models|devices|clusters|scenarios")
      ->required()
      ->check(CLI::IsMember({"models", "devices", "clusters", "scenarios"}));

  cli::CompareOptions cmp;
  auto* cmp_cmd = app.add_subcommand("compare", "compare two result.json files; exit 3 on a regression");
  cmp_cmd->add_option("baseline", cmp.baseline, "baseline result.json")->required();
  cmp_cmd->add_option("candidate", cmp.candidate, "candidate result.json")->required();
  cmp_cmd->add_option("--rel-tol", cmp.rel_tol, "tolerance of every metric --metric does not name (share, 0.02 = 2%)")
      ->check(CLI::Range(0.0, 10.0));
  cmp_cmd->add_option("--metric", cmp.metrics,
                      "one metric's tolerance, repeatable: step_time_s=0.02, memory.peak_bytes=0.05 (a path into result.json)");
  cmp_cmd->add_option("--format", cmp.format, "stdout format: text, json, or junit (JUnit XML for CI)")
      ->check(CLI::IsMember({"text", "json", "junit"}));
  cmp_cmd->add_option("--html", cmp.html, "also write the two results side by side as a self-contained page");
  cmp_cmd->add_flag("--strict", cmp.strict, "results of different scenarios are an error (exit 2), not a warning");

  cli::ValidateOptions val;
  auto* val_cmd = app.add_subcommand("validate", "published measurements vs predictions, error table");
  val_cmd->add_option("--dir", val.directory, "scenarios with a \"reference\" (default scenarios/validation)");
  val_cmd->add_option("-j,--jobs", val.jobs, "simulations at once (default: cores)")->check(CLI::Range(1, 256));
  val_cmd->add_option("--max-mean-error", val.max_mean_error, "exit 3 if the mean |error| exceeds this percent");
  val_cmd->add_option("--max-error", val.max_error, "exit 3 if any |error| exceeds this percent");
  val_cmd->add_option("--json", val.json_out, "also write the table as JSON here");

  cli::CollectiveOptions coll;
  auto* coll_cmd = app.add_subcommand("collective", "nccl-tests style table (size, time, algbw, busbw) from the network model");
  coll_cmd->add_option("--op", coll.op, "all_reduce|reduce_scatter|all_gather|broadcast|reduce|all_to_all");
  coll_cmd->add_option("--algorithm", coll.algorithm,
                       "ring|tree|halving-doubling|hierarchical|direct|naive|master-worker|round-robin|auto "
                       "(default: direct for all_to_all, ring otherwise)");
  coll_cmd->add_option("--gpus", coll.gpus, "GPUs taking part (default: all of --scenario's cluster, else 8)")->check(CLI::Range(1, 1 << 20));
  coll_cmd->add_option("--gpus-per-node", coll.gpus_per_node, "GPUs per node of the default cluster")->check(CLI::Range(1, 64));
  coll_cmd->add_option("--scenario", coll.scenario, "borrow this scenario's cluster");
  coll_cmd->add_option("-b,--minbytes", coll.min_bytes, "smallest size (8, 64K, 128M, 8G)");
  coll_cmd->add_option("-e,--maxbytes", coll.max_bytes, "largest size");
  coll_cmd->add_option("-f,--stepfactor", coll.factor, "size multiplier between rows");
  coll_cmd->add_option("--format", coll.format, "stdout format: text, json, or nccl-tests (its *_perf binaries' exact layout)")
      ->check(CLI::IsMember({"text", "json", "nccl-tests"}));
  coll_cmd->add_flag("--analytical", coll.analytical, "price each size alone instead of replaying on SimGrid");

  cli::ProfileOptions prof;
  auto* prof_cmd = app.add_subcommand("profile", "time the kernels a model needs on this machine; write a kernel table");
  prof_cmd->add_option("--device", prof.device, "cpu, or cuda (a CUDA build on a machine with a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  prof_cmd->add_option("--dtype", prof.dtype, "GEMM precision on a GPU: bf16 (default), fp16, tf32, fp32; the CPU times fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "tf32", "fp32"}));
  prof_cmd->add_option("--model", prof.model, "model preset (default tiny-gpt)");
  prof_cmd->add_option("--scenario", prof.scenario, "take model, micro-batch and slicing from this scenario");
  prof_cmd->add_option("--micro-batch", prof.micro_batch, "micro-batch size")->check(CLI::Range(1, 1 << 20));
  prof_cmd->add_option("--repeats", prof.repeats, "timed repetitions per kernel (median kept)")->check(CLI::Range(1, 1000));
  prof_cmd->add_option("-o,--out", prof.out, "kernel table to write");

  cli::SweepOptions sw;
  auto* sweep_cmd = app.add_subcommand("sweep", "enumerate parallel strategies for a model and cluster, rank them");
  sweep_cmd->add_option("scenario", sw.scenario, "scenario JSON file (model, device, cluster, batch)")->required();
  sweep_cmd->add_option("--gpus", sw.gpus, "GPU counts to plan for, comma-separated: 256,512,1024 (default: the scenario's cluster)");
  sweep_cmd->add_option("--devices", sw.devices, "device profiles, comma-separated: a100-sxm-80gb,h100-sxm-80gb (default: the scenario's)");
  sweep_cmd->add_option("--rank-by", sw.rank_by, "time (to train, or step time), cost, or throughput-per-gpu")
      ->check(CLI::IsMember({"time", "cost", "throughput-per-gpu"}));
  sweep_cmd->add_option("--write-best", sw.write_best, "write the best strategy that fits as a runnable scenario");
  sweep_cmd->add_flag("--progress", sw.progress, "progress and ETA on stderr even when it is not a terminal");
  sweep_cmd->add_option("--jobs", sw.jobs, "simulations at once (default: cores)")->check(CLI::Range(1, 256));
  sweep_cmd->add_option("--top", sw.top, "rows to show")->check(CLI::Range(1, 100000));
  sweep_cmd->add_option("--confirm", sw.confirm, "replay the best K of the closed-form ranking (default 5)")
      ->check(CLI::Range(0, 1 << 30));
  sweep_cmd->add_flag("--exact", sw.exact, "replay every strategy instead of ranking them in closed form");
  sweep_cmd->add_option("--format", sw.format, "stdout format")->check(CLI::IsMember({"text", "json", "csv"}));
  sweep_cmd->add_option("--precisions", sw.precisions,
                        "training precisions to try, comma-separated: bf16,fp8 (default: the scenario's; fp8 only on "
                        "devices with an FP8 peak)");

  cli::ServeOptions srv;
  auto* serve_cmd = app.add_subcommand("serve", "the explorer page and POST /api/run over HTTP (loopback by default)");
  serve_cmd->add_option("--port", srv.port, "TCP port (0: any free one, printed)")->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--bind", srv.bind, "address to listen on (default 127.0.0.1)");
  serve_cmd->add_option("--jobs", srv.jobs, "simulations at once; more get HTTP 503")->check(CLI::Range(1, 64));
  serve_cmd->add_option("--time-limit", srv.time_limit_s, "seconds per simulation; past it HTTP 504")->check(CLI::Range(1.0, 86400.0));
  serve_cmd->add_option("--client-timeout", srv.client_timeout_s, "seconds a client has to send its request (default 30)")
      ->check(CLI::Range(1, 3600));
  serve_cmd->add_option("--max-connections", srv.max_connections, "connections open at once; more get HTTP 503 (default 64)")
      ->check(CLI::Range(1, 4096));
  cli::Realrun realrun(app);  // realrun, and its hidden realrun-worker
  const cli::Describe describe(app);
  const cli::Import import(app);
  bool allow_outside = false;
  for (auto* c : {run_cmd, mem_cmd, sweep_cmd, coll_cmd, prof_cmd})
    c->add_flag("--allow-outside", allow_outside,
                "let \"extends\" name a file outside the scenario's folder and the project's scenarios/");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  config::allow_extends_outside(allow_outside);
  try {
    if (*run_cmd) return cli::run(run);
    if (*mem_cmd) return cli::memory(mem_scenario, mem_format);
    if (*list_cmd) return cli::list(what);
    if (*cmp_cmd) return cli::compare(cmp);
    if (*val_cmd) return cli::validate(val);
    if (*coll_cmd) return cli::collective(coll);
    if (*prof_cmd) return cli::profile(prof);
    if (*sweep_cmd) return cli::sweep(sw);
    if (*serve_cmd) return cli::serve(srv);
    if (const int rc = realrun.dispatch(); rc >= 0) return rc;
    if (const int rc = describe.dispatch(); rc >= 0) return rc;
    if (const int rc = import.dispatch(); rc >= 0) return rc;
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dtsim: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
