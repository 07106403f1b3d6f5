#include "sim/cli/describe.hpp"

#include <iostream>

#include "sim/config/describe.hpp"

namespace dtsim::cli {

Describe::Describe(CLI::App& app) {
  command_ = app.add_subcommand("describe", "what a scenario key is: type, unit, default, range, one line of doc");
  command_->add_option("key", key_, "a key, dotted (parallelism.tensor) or as a JSON pointer; none: list them all");
  command_->add_option("--format", format_,
                       "text; markdown (the reference page, docs/keys.md); schema (JSON Schema of a scenario file)")
      ->check(CLI::IsMember({"text", "markdown", "schema"}));
}

int Describe::dispatch() const {
  if (!*command_) return -1;
  const auto keys = config::declared_keys();
  if (!key_.empty()) {
    std::cout << config::describe_key(keys, key_);
    return 0;
  }
  if (format_ == "markdown") std::cout << config::keys_markdown(keys);
  else if (format_ == "schema") std::cout << config::scenario_schema(keys).dump(2) << "\n";
  else std::cout << config::keys_text(keys);
  return 0;
}

}  // namespace dtsim::cli
