#include "models/model.hpp"

#include <fmt/format.h>

namespace dtsim::models {

ModelSpec::ModelSpec() {
  static const std::shared_ptr<const Family> empty = transformer_family({});
  family_ = empty;
}

std::string Family::context_split_error(std::int64_t) const {
  return fmt::format("context parallelism splits a language model's token sequence; model.kind \"{}\" has none", kind());
}

std::string Family::expert_split_error(std::int64_t ep) const {
  return fmt::format("{}-way expert parallelism needs a mixture-of-experts model (model.num_experts)", ep);
}

}  // namespace dtsim::models
