#include "sim/cli/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "sim/calibrate/fit_report.hpp"
#include "sim/calibrate/profile_io.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/suggest.hpp"
#include "sim/cost/stack.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/result.hpp"

namespace dtsim::cli {

using namespace dtsim::calibrate;

Calibrate::Calibrate(CLI::App& app) {
  command_ = app.add_subcommand("calibrate", "fit device and cluster profiles to what you measured; write them and the residuals");
  command_->add_option("--base-device", base_device_, "device preset or file the kernel fits start from (dtsim list devices)");
  command_->add_option("--base-cluster", base_cluster_, "cluster preset or file the link fits start from (dtsim list clusters)");
  command_->add_option("--nccl-tests", nccl_, "nccl-tests output (all_reduce_perf ...), repeatable; OP=FILE names its test");
  command_->add_option("--gemm", gemm_, "GEMM microbenchmark CSV: m,n,k,dtype,time_us (or tflops), repeatable");
  command_->add_option("--attention", attention_, "attention microbenchmark CSV: batch,heads,seq,head_dim,causal,time_us, repeatable");
  command_->add_option("--trace", trace_, "PyTorch profiler trace (Chrome JSON): kernel time by role and the host's dispatch");
  command_->add_option("--steps", steps_, "measured step times (\"step N time_s X\" lines or a step,time_s CSV)");
  command_->add_option("--scenario", scenario_, "the scenario the step times ran (its prediction is compared)");
  command_->add_option("--stack", stack_, "stack preset to compare the trace's dispatch with (default: --scenario's)");
  command_->add_option("-o,--out", out_, "folder for the calibrated profiles and calibration.txt/.json")->required();
}

namespace {

struct Inputs {
  std::vector<NcclTestsFile> nccl;
  std::vector<std::pair<std::string, std::vector<GemmRow>>> gemm;
  std::vector<std::pair<std::string, std::vector<AttentionRow>>> attention;
  std::optional<Trace> trace;
  std::vector<StepTime> steps;
};

void check_flags(bool nccl, bool kernels, bool trace, bool steps, const std::string& device, const std::string& cluster,
                 const std::string& scenario, const std::string& stack) {
  if (!nccl && !kernels && !trace && !steps)
    throw InputError("", "", "nothing to calibrate: give --nccl-tests, --gemm, --attention, --trace or --steps");
  if (nccl && cluster.empty()) throw InputError("", "--nccl-tests", "needs --base-cluster: the cluster preset or file the fit starts from");
  if (kernels && device.empty()) throw InputError("", "--gemm", "needs --base-device: the device preset or file the fit starts from");
  if (steps && scenario.empty()) throw InputError("", "--steps", "needs --scenario: the scenario those steps ran");
  if (!stack.empty() && !trace) throw InputError("", "--stack", "compares a --trace's dispatch with a stack: give --trace");
  if (!stack.empty() && !cost::find_stack(stack))
    throw InputError("", "--stack", fmt::format("unknown stack \"{}\"{} (known: {})", stack, did_you_mean(stack, cost::stack_names()),
                                                fmt::join(cost::stack_names(), ", ")));
}

// "Fitted by dtsim calibrate to FILES (N rows): RMS relative error X % (the base: Y %)."
std::string note(const std::vector<std::string>& files, std::size_t rows, double base_rms, double fitted_rms) {
  return fmt::format("Fitted by dtsim calibrate to {} ({} rows): RMS relative error {:.3g} % (the base's {:.3g} %); calibration.txt "
                     "beside this file lists every row.",
                     fmt::join(files, ", "), rows, fitted_rms * 100, base_rms * 100);
}

}  // namespace

namespace {

// A fit prices each row about a hundred times (three per closed-form solve, a few solves, the
// halvings between them): a table too large for the analytical backend's budget is refused
// before any of it runs, as `dtsim collective --analytical` would refuse it.
void check_budget(const network::ClusterSpec& base, const NcclTestsFile& f) {
  network::ClusterSpec c = base;
  c.nodes = place(base, f).nodes;
  const auto a = f.op == taskgraph::CollectiveOp::AllToAll ? taskgraph::Algorithm::Direct : taskgraph::Algorithm::Ring;
  try {
    results::check_collective_budget(c, f.op, a, f.ranks(), 100.0 * static_cast<double>(f.rows.size()), true);
  } catch (const InputError& e) {
    throw InputError(f.path, "", fmt::format("too large to fit: {}", e.reason()));
  }
}

// The collectives: the cluster profile and its rows; the written file's text in `text`.
void calibrate_links(Calibration& c, const BaseCluster& base, std::vector<NcclTestsFile> files, std::string& text) {
  c.base_cluster = base.file;
  for (const auto& f : files) check_budget(base.spec, f);
  c.collectives = fit_collectives(base.spec, files);
  std::vector<std::pair<double, double>> b, f;
  for (const auto& r : c.collectives->rows) b.emplace_back(r.base_s, r.measured_s), f.emplace_back(r.fitted_s, r.measured_s);
  std::vector<std::string> names;
  for (const auto& file : files) names.push_back(file.path);
  text = calibrated_cluster(base, *c.collectives, note(names, b.size(), rms_relative(b), rms_relative(f)));
  c.nccl = std::move(files);
}

void calibrate_kernels(Calibration& c, const BaseDevice& base, const Inputs& in, const std::string& name, std::string& text) {
  c.base_device = base.file;
  c.kernels = fit_kernels(base.profile, in.gemm, in.attention);
  for (const auto& [file, rows] : in.gemm) c.kernel_files.push_back(file);
  for (const auto& [file, rows] : in.attention) c.kernel_files.push_back(file);
  std::map<std::string, std::string> notes;
  for (const auto& curve : c.kernels->curves) {
    std::vector<std::pair<double, double>> b, f;
    std::vector<std::string> names;
    for (const auto& r : c.kernels->rows) {
      if (r.curve != curve.key || !r.used) continue;
      b.emplace_back(r.base_s, r.measured_s), f.emplace_back(r.fitted_s, r.measured_s);
      if (std::find(names.begin(), names.end(), r.file) == names.end()) names.push_back(r.file);
    }
    notes[curve.key] = note(names, b.size(), rms_relative(b), rms_relative(f));
  }
  text = calibrated_device(base, *c.kernels, name, notes);
}

Inputs read_inputs(const std::vector<std::string>& nccl, const std::vector<std::string>& gemm, const std::vector<std::string>& attention,
                   const std::string& trace, const std::string& steps) {
  Inputs in;
  for (const auto& spec : nccl) in.nccl.push_back(parse_nccl_tests(spec));
  for (const auto& f : gemm) in.gemm.emplace_back(f, read_gemm_csv(f));
  for (const auto& f : attention) in.attention.emplace_back(f, read_attention_csv(f));
  if (!trace.empty()) in.trace = parse_trace(trace);
  if (!steps.empty()) in.steps = read_step_log(steps);
  return in;
}

}  // namespace

int Calibrate::dispatch() const {
  if (!*command_) return -1;
  const bool kernels = !gemm_.empty() || !attention_.empty();
  check_flags(!nccl_.empty(), kernels, !trace_.empty(), !steps_.empty(), base_device_, base_cluster_, scenario_, stack_);
  const auto cluster = nccl_.empty() ? std::nullopt : std::optional(load_base_cluster(base_cluster_, "--base-cluster"));
  const auto device = !kernels ? std::nullopt : std::optional(load_base_device(base_device_, "--base-device"));
  const std::string cluster_out = cluster ? out_ + "/" + calibrated_name(cluster->file) + ".json" : "";
  const std::string device_out = device ? out_ + "/" + calibrated_name(device->file) + ".json" : "";
  for (const auto& p : {cluster_out, device_out, out_ + "/calibration.txt", out_ + "/calibration.json"})
    if (!p.empty()) check_output_path(p);  // before the work: a bad folder costs nothing
  Inputs in = read_inputs(nccl_, gemm_, attention_, trace_, steps_);
  Calibration c;
  OutputSet files;
  std::string text;
  if (cluster) {
    calibrate_links(c, *cluster, std::move(in.nccl), text);
    files.add(cluster_out, text);
    c.written.push_back(cluster_out);
  }
  if (device) {
    calibrate_kernels(c, *device, in, calibrated_name(device->file), text);
    files.add(device_out, text);
    c.written.push_back(device_out);
  }
  std::optional<config::Scenario> scenario;
  if (!scenario_.empty()) scenario = config::load_scenario(scenario_);
  if (in.trace) {
    c.trace_file = trace_;
    c.trace = summarize(*in.trace);
    if (!stack_.empty()) c.dispatch = DispatchCompare{stack_, cost::find_stack(stack_)->dispatch_s * 1e6};
    else if (scenario) c.dispatch = DispatchCompare{scenario->device.stack.name, scenario->device.stack.dispatch_s * 1e6};
  }
  if (!in.steps.empty()) c.steps = compare_steps(steps_, in.steps, scenario_, results::simulate(*scenario).step_time_s);
  const std::string report = report_text(c);
  files.add(out_ + "/calibration.txt", report);
  files.add(out_ + "/calibration.json", report_json(c).dump(2) + "\n");
  files.commit();
  std::cout << report;
  return 0;
}

}  // namespace dtsim::cli
