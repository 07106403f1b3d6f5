#include "sim/cli/import.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "sim/config/import_hf.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

Import::Import(CLI::App& app) {
  command_ = app.add_subcommand("import", "a scenario from a model's Hugging Face config.json");
  command_->add_option("kind", kind_, "what the file is: hf (a Hugging Face config.json)")
      ->required()
      ->check(CLI::IsMember({"hf"}));
  command_->add_option("file", file_, "the config file")->required();
  command_->add_option("-o,--out", out_, "the scenario to write")->required();
  command_->add_option("--device", device_, "device preset of the scenario (default h100-sxm-80gb)");
  command_->add_option("--cluster", cluster_, "cluster preset of the scenario (default dgx-h100)");
  command_->add_option("--nodes", nodes_, "nodes of that cluster (default 1)")->check(CLI::Range(1, 1 << 20));
  command_->add_option("--seq-len", seq_len_, "training sequence length (default: the config's longest)")
      ->check(CLI::Range(1, 10000000));
}

namespace {
nlohmann::ordered_json scenario_for(const config::ImportedModel& m, const std::string& name, const std::string& from,
                                    const std::string& device, const std::string& cluster, int nodes) {
  nlohmann::ordered_json s;
  s["schema_version"] = 1;
  s["name"] = name;
  s["description"] = fmt::format("Imported by `dtsim import hf` from {} (model_type {}); parallelism and training are a "
                                 "starting point to edit.", from, m.family);
  s["model"] = m.model;
  s["cluster"] = {{"preset", cluster}, {"nodes", nodes}};
  s["hardware"] = {{"device", device}};
  s["parallelism"] = {{"micro_batch_size", 1}};
  s["training"] = {{"global_batch_size", 1024}, {"precision", "bf16"}, {"steps", 1000}};
  return s;
}

void print_summary(const config::ImportedModel& m, const std::string& out) {
  std::cout << fmt::format("wrote {}: a {} model ({} settings mapped)\n", out, m.family, m.mapped.size());
  if (!m.ignored.empty())
    std::cout << fmt::format("ignored (no effect on step time or memory): {}\n", fmt::join(m.ignored, ", "));
  for (const auto& u : m.unmapped) std::cout << "not mapped: " << u << "\n";
}
}  // namespace

int Import::dispatch() const {
  if (!*command_) return -1;
  auto imported = config::import_hf_config(parse_json_file(file_), file_);
  if (seq_len_ > 0) imported.model["seq_len"] = seq_len_;
  const std::string name = slug(std::filesystem::path(out_).stem().string());
  const auto s = scenario_for(imported, name, std::filesystem::path(file_).filename().string(), device_, cluster_, nodes_);
  // Checked as `run` would read it before it is written: a scenario that does not load is not left behind.
  const std::string check = out_ + fmt::format(".check-{}", getpid());
  write_file_atomic(check, s.dump(2) + "\n");
  try {
    config::load_scenario(check);
  } catch (const InputError& e) {
    std::filesystem::remove(check);
    throw InputError(file_, "", fmt::format("the scenario made from it does not load: {}", e.reason()));
  }
  std::filesystem::rename(check, out_);
  print_summary(imported, out_);
  return 0;
}

}  // namespace dtsim::cli
