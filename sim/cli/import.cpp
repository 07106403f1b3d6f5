#include "sim/cli/import.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "sim/config/import_hf.hpp"
#include "sim/config/import_run.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

Import::Import(CLI::App& app) {
  command_ = app.add_subcommand("import", "a scenario from a Hugging Face config.json or a training framework's config");
  command_->add_option("kind", kind_,
                       "what the file is: hf (a Hugging Face config.json), megatron (Megatron-LM arguments or launch "
                       "script), torchtitan (a job TOML), deepspeed (a DeepSpeed JSON config)")
      ->required()
      ->check(CLI::IsMember({"hf", "megatron", "torchtitan", "deepspeed"}));
  command_->add_option("file", file_, "the config file")->required();
  command_->add_option("-o,--out", out_, "the scenario to write")->required();
  command_->add_option("--device", device_, "device preset of the scenario (default h100-sxm-80gb)");
  command_->add_option("--cluster", cluster_, "cluster preset of the scenario (default dgx-h100)");
  command_->add_option("--nodes", nodes_, "nodes of that cluster (default: the config's GPU count, else 1)")
      ->check(CLI::Range(1, 1 << 20));
  command_->add_option("--model", model_, "model preset (or preset file) where the config names none");
  command_->add_option("--hf", hf_, "a Hugging Face config.json for the model, where the config names none");
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

// Checked as `run` would read it before it is written: a scenario that does not load is not left behind.
void write_checked(const nlohmann::ordered_json& s, const std::string& from, const std::string& out) {
  const std::string check = out + fmt::format(".check-{}", getpid());
  write_file_atomic(check, s.dump(2) + "\n");
  try {
    config::load_scenario(check);
  } catch (const InputError& e) {
    std::filesystem::remove(check);
    // The pointer is into the scenario it would have written: which key to give, or to fix.
    const std::string where = e.pointer().empty() ? "" : " at " + e.pointer();
    throw InputError(from, "", fmt::format("the scenario made from it does not load{}: {}", where, e.reason()));
  }
  std::filesystem::rename(check, out);
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
  if (kind_ != "hf") return import_run();
  auto imported = config::import_hf_config(parse_json_file(file_), file_);
  if (seq_len_ > 0) imported.model["seq_len"] = seq_len_;
  const std::string name = slug(std::filesystem::path(out_).stem().string());
  const auto s = scenario_for(imported, name, std::filesystem::path(file_).filename().string(), device_, cluster_, std::max(nodes_, 1));
  write_checked(s, file_, out_);
  print_summary(imported, out_);
  return 0;
}

namespace {
config::ImportedRun read_run(const std::string& kind, const std::string& file) {
  if (kind == "deepspeed") return config::import_deepspeed_config(parse_json_file(file), file);
  const std::string text = read_text_file(file);
  return kind == "megatron" ? config::import_megatron_args(text, file) : config::import_torchtitan_toml(text, file);
}

// The model: the config's own, a Hugging Face config, or a preset; exactly one.
void choose_model(config::ImportedRun& run, const std::string& model, const std::string& hf, const std::string& file) {
  const bool own = run.model.contains("preset") || run.model.contains("num_layers");
  if (!model.empty() + !hf.empty() > 1) throw InputError("", "--model", "give --model or --hf, not both");
  if (!model.empty() || !hf.empty()) {
    nlohmann::ordered_json m = !hf.empty() ? config::import_hf_config(parse_json_file(hf), hf).model
                                           : nlohmann::ordered_json{{"preset", model}};
    if (run.model.contains("seq_len")) m["seq_len"] = run.model["seq_len"];
    run.model = m;
    if (own) run.unmapped.push_back("the config's own model (replaced by --model/--hf)");
    return;
  }
  if (!own)
    throw InputError(file, "", fmt::format("a {} config does not say which model: give --model PRESET or --hf config.json",
                                           run.framework));
}

void print_run_summary(const config::ImportedRun& r, const std::string& out) {
  std::cout << fmt::format("wrote {}: {} settings mapped\n", out, r.mapped.size());
  if (!r.ignored.empty())
    std::cout << fmt::format("ignored (no effect on step time or memory): {}\n", fmt::join(r.ignored, ", "));
  for (const auto& u : r.unmapped) std::cout << "not mapped: " << u << "\n";
}
}  // namespace

int Import::import_run() const {
  auto run = read_run(kind_, file_);
  choose_model(run, model_, hf_, file_);
  if (seq_len_ > 0) run.model["seq_len"] = seq_len_;
  const int per_node = 8;  // every shipped GPU cluster preset has 8 per node but the NVL72 racks
  int nodes = nodes_;
  if (nodes == 0) nodes = run.gpus > 0 ? std::max(1, (run.gpus + per_node - 1) / per_node) : 1;
  nlohmann::ordered_json s;
  s["schema_version"] = 1;
  s["name"] = slug(std::filesystem::path(out_).stem().string());
  s["description"] = fmt::format("Imported by `dtsim import {}` from {}{}; what it could not map is listed by the import.",
                                 kind_, std::filesystem::path(file_).filename().string(),
                                 run.gpus > 0 ? fmt::format(" ({} GPUs)", run.gpus) : "");
  s["model"] = run.model;
  s["cluster"] = {{"preset", cluster_}, {"nodes", nodes}};
  s["hardware"] = {{"device", device_}};
  s["parallelism"] = run.parallelism;
  if (!run.training.contains("global_batch_size") && !run.training.contains("gradient_accumulation_steps"))
    run.training["global_batch_size"] = 1024, run.unmapped.push_back("global batch size (not in the config: 1024 assumed)");
  s["training"] = run.training;
  if (!run.stack.empty()) s["stack"] = run.stack;
  write_checked(s, file_, out_);
  print_run_summary(run, out_);
  return 0;
}

}  // namespace dtsim::cli
