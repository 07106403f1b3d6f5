#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "models/cnn.hpp"
#include "models/model_graph.hpp"

// A model as a scenario names it, of any family. Everything outside models/ asks it neutral
// questions (how many blocks, tokens per sample, can t ranks split it) and builds its op graph;
// only the family's builder reads the family's fields.
namespace dtsim::models {

struct ModelSpec {
  std::string name;
  std::variant<TransformerSpec, CnnSpec> family;

  const char* kind() const;  // "transformer", "vit", "cnn"
  ModelGraph build(const BuildOptions& o) const;
  // Body layers pipeline stages share between them (transformer blocks, a CNN's layers).
  std::int64_t blocks() const;
  // How messages name that count ("model.num_layers").
  std::string blocks_key() const;
  // Tokens in one sample; 0 when samples are not token sequences (images).
  std::int64_t tokens_per_sample() const;
  // Why `t`-way tensor parallelism cannot split the model; empty when it can.
  std::string tensor_split_error(std::int64_t t) const;
  // Why `c`-way context parallelism cannot split the model's sequence; empty when it can.
  std::string context_split_error(std::int64_t c) const;
  // Why `ep`-way expert parallelism cannot split the model's experts; empty when it can.
  std::string expert_split_error(std::int64_t ep) const;
  // Sizes a result reports beside the parameter count, as (key, value): "layers", "seq_len"...
  std::vector<std::pair<std::string, std::int64_t>> sizes() const;

  const TransformerSpec& transformer() const { return std::get<TransformerSpec>(family); }
};

}  // namespace dtsim::models
