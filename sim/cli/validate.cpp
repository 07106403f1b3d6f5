#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <thread>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace fs = std::filesystem;

namespace {

struct Row {
  std::string file, name;
  config::Reference ref;
  int gpus = 0;
  double predicted_s = 0;
  std::string failure;
};

// SimGrid runs once per process, so every row is simulated by a child `dtsim run`.
void simulate(Row& row, const std::string& self, const fs::path& scratch) {
  const fs::path out = scratch / row.name;
  const std::string cmd = fmt::format("'{}' run '{}' --format json -o '{}' > '{}' 2> '{}'", self, row.file, out.string(),
                                      (scratch / (row.name + ".json")).string(), (scratch / (row.name + ".err")).string());
  const int status = std::system(cmd.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    row.failure = read_text_file((scratch / (row.name + ".err")).string());
    return;
  }
  const Json j = parse_json_file((scratch / (row.name + ".json")).string());
  row.predicted_s = j.at("step_time_s").get<double>();
}

}  // namespace

int validate(const ValidateOptions& o) {
  std::vector<Row> rows;
  const fs::path dir = o.directory.empty() ? fs::path(data_dir()) / "scenarios/validation" : fs::path(o.directory);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json" || e.path().stem() == "base") continue;
    const config::Scenario s = config::load_scenario(e.path().string());
    if (!s.reference) continue;
    rows.push_back({e.path().string(), s.name, *s.reference, s.cluster.num_gpus(), 0, ""});
  }
  if (rows.empty()) {
    std::cerr << "error: no scenarios with a \"reference\" in " << dir.string() << "\n";
    return 2;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.gpus < b.gpus; });

  const fs::path scratch = fs::temp_directory_path() / fmt::format("dtsim-validate-{}", ::getpid());
  fs::create_directories(scratch);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int j = 0; j < jobs; ++j)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < rows.size(); i = next++) simulate(rows[i], self, scratch);
    });
  for (auto& t : pool) t.join();
  fs::remove_all(scratch, ec);

  double sum = 0, worst = 0;
  int failed = 0;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::cout << fmt::format("{:<22} {:>6} {:>13} {:>13} {:>11} {:>11} {:>8}\n", "scenario", "GPUs", "published_s",
                           "predicted_s", "pub_TFLOPs", "pred_TFLOPs", "error");
  for (const auto& r : rows) {
    if (!r.failure.empty()) {
      ++failed;
      std::cout << fmt::format("{:<22} {:>6} failed: {}", r.name, r.gpus, r.failure);
      continue;
    }
    const double err = 100.0 * (r.predicted_s / r.ref.step_time_s - 1.0);
    const double tflops = r.ref.flops_per_step / (r.predicted_s * r.gpus) / 1e12;
    sum += std::fabs(err);
    worst = std::max(worst, std::fabs(err));
    std::cout << fmt::format("{:<22} {:>6} {:>13.2f} {:>13.2f} {:>11.1f} {:>11.1f} {:>+7.1f}%\n", r.name, r.gpus,
                             r.ref.step_time_s, r.predicted_s, r.ref.tflops_per_gpu, tflops, err);
    out.push_back({{"scenario", r.name}, {"gpus", r.gpus}, {"published_step_time_s", r.ref.step_time_s},
                   {"predicted_step_time_s", r.predicted_s}, {"error_percent", err}, {"source", r.ref.source}});
  }
  const int ok = static_cast<int>(rows.size()) - failed;
  const double mean = ok > 0 ? sum / ok : 0.0;
  std::cout << fmt::format("\nmean |error| {:.1f}%, max |error| {:.1f}% over {} rows", mean, worst, ok)
            << (failed ? fmt::format(", {} failed", failed) : "") << "\n";
  if (!o.json_out.empty())
    write_file_atomic(o.json_out, nlohmann::ordered_json{{"rows", out}, {"mean_abs_error_percent", mean},
                                                         {"max_abs_error_percent", worst}}.dump(2) + "\n");
  if (failed) return 1;
  if ((o.max_mean_error >= 0 && mean > o.max_mean_error) || (o.max_error >= 0 && worst > o.max_error)) return 3;
  return 0;
}

}  // namespace dtsim::cli
