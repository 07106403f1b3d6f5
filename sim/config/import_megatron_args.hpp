#pragma once
// What the Megatron-LM importer's parts share (sim/config/import_megatron.cpp reads the flags,
// import_megatron_pipeline.cpp the pipeline split): the parsed arguments and the run they fill.
#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/config/import_run.hpp"

namespace dtsim::config::megatron_args {

using Args = std::vector<std::pair<std::string, std::string>>;  // flag, value ("" for a switch)

struct Mapper {
  ImportedRun& run;
  const std::string& file;
  bool number(const std::string& flag, const std::string& v, nlohmann::ordered_json& obj, const char* key) {
    try {
      std::size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
      obj[key] = n;
      run.mapped.push_back(flag);
      return true;
    } catch (const std::exception&) {
      run.unmapped.push_back(fmt::format("{} {} (not a number: a shell value dtsim does not evaluate?)", flag, v));
      return false;
    }
  }
};

bool has_flag(const Args& args, const std::string& flag);
// The flag's number, or 0 when it is absent or not a whole number.
long long flag_number(const Args& args, const std::string& flag);

// Virtual stages and uneven stages (--num-virtual-stages-per-pipeline-rank,
// --num-layers-per-virtual-pipeline-stage, --decoder-first/last-pipeline-num-layers,
// --account-for-embedding/loss-in-pipeline-split, --pipeline-model-parallel-layout) as
// virtual_stages and stage_layers, once the layers and stages are known.
void map_pipeline_split(const Args& args, Mapper& m);

}  // namespace dtsim::config::megatron_args
