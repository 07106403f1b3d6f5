#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/family.hpp"
#include "models/model_graph.hpp"

// A model as a scenario names it, of any family. Everything outside models/ asks it neutral
// questions (how many blocks, tokens per sample, can t ranks split it) and builds its op graph;
// only the family (models/families/) reads the family's fields.
namespace dtsim::models {

class ModelSpec {
 public:
  ModelSpec();  // an empty transformer
  ModelSpec(std::string name, std::shared_ptr<const Family> family) : name(std::move(name)), family_(std::move(family)) {}

  std::string name;

  const char* kind() const { return family_->kind(); }  // "transformer", "vit", "cnn"
  ModelGraph build(const BuildOptions& o) const { return family_->build(o); }
  // Body layers pipeline stages share between them (transformer blocks, a CNN's layers).
  std::int64_t blocks() const { return family_->blocks(); }
  // How messages name that count ("model.num_layers").
  std::string blocks_key() const { return family_->blocks_key(); }
  // Tokens in one sample; 0 when samples are not token sequences (images).
  std::int64_t tokens_per_sample() const { return family_->tokens_per_sample(); }
  // Why `t`-way tensor parallelism cannot split the model; empty when it can.
  std::string tensor_split_error(std::int64_t t) const { return family_->tensor_split_error(t); }
  // Why `c`-way context parallelism cannot split the model's sequence; empty when it can.
  std::string context_split_error(std::int64_t c) const { return c == 1 ? "" : family_->context_split_error(c); }
  // Why `ep`-way expert parallelism cannot split the model's experts; empty when it can.
  std::string expert_split_error(std::int64_t ep) const { return ep == 1 ? "" : family_->expert_split_error(ep); }
  // Sizes a result reports beside the parameter count, as (key, value): "layers", "seq_len"...
  Sizes sizes() const { return family_->sizes(); }

  // The family's spec when it is a `Spec` (FamilyOf<Spec>), else null: for callers that need one
  // family's specifics (Megatron's vocabulary padding, expert tensor parallelism).
  template <class Spec>
  const Spec* as() const {
    const auto* f = dynamic_cast<const FamilyOf<Spec>*>(family_.get());
    return f ? &f->spec : nullptr;
  }
  const TransformerSpec* transformer() const { return as<TransformerSpec>(); }

 private:
  std::shared_ptr<const Family> family_;
};

}  // namespace dtsim::models
