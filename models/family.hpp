#pragma once
// A model family (transformer, CNN...) as one unit: its spec, its op-graph builder, its answers to
// the neutral questions ModelSpec forwards, and how a scenario's `model` object is read into it.
// A family lives in one file under models/families/ and is registered by its `model.kind` names
// in models/families.cpp; nothing outside it reads its spec's fields.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/model_graph.hpp"

namespace dtsim {
class Reader;  // sim/core/json_reader.hpp: a family reads its keys with it
struct Origins;
}  // namespace dtsim

namespace dtsim::models {

// Sizes a result reports beside the parameter count, as (key, value): "layers", "seq_len"...
using Sizes = std::vector<std::pair<std::string, std::int64_t>>;

class Family {
 public:
  virtual ~Family() = default;

  virtual const char* kind() const = 0;  // the model.kind it was read as
  virtual ModelGraph build(const BuildOptions& o) const = 0;
  // Body layers pipeline stages share between them (transformer blocks, a CNN's layers).
  virtual std::int64_t blocks() const = 0;
  // How messages name that count ("model.num_layers").
  virtual std::string blocks_key() const = 0;
  // Tokens in one sample; 0 when samples are not token sequences (images).
  virtual std::int64_t tokens_per_sample() const = 0;
  // Why `t`-way tensor parallelism cannot split the model; empty when it can.
  virtual std::string tensor_split_error(std::int64_t t) const = 0;
  // Why `c`-way (c > 1) context parallelism cannot split the model's sequence; empty when it can.
  // By default the family has no token sequence to split.
  virtual std::string context_split_error(std::int64_t c) const;
  // Why `ep`-way (ep > 1) expert parallelism cannot split the model's experts; empty when it can.
  // By default the family has no experts.
  virtual std::string expert_split_error(std::int64_t ep) const;
  virtual Sizes sizes() const = 0;
};

// A family whose spec callers may read by its type (ModelSpec::as).
template <class Spec>
class FamilyOf : public Family {
 public:
  explicit FamilyOf(Spec s) : spec(std::move(s)) {}
  const Spec spec;
};

// One `model.kind` a family is read as.
struct FamilyKind {
  std::string name;
  // Reads the rest of the model object (its kind already read) and finishes it; `model_name` is
  // the preset's name or "inline"; `origins` locates values nested in lists for errors.
  std::shared_ptr<const Family> (*parse)(Reader& r, const std::string& model_name, const std::shared_ptr<const Origins>& origins);
  // `dtsim describe`'s line for each key it reads, by its pointer under the model ("num_layers",
  // "layers/*/op").
  std::vector<std::pair<std::string, std::string>> docs;
};

// Every registered kind, in the order `model.kind` lists them.
const std::vector<FamilyKind>& family_kinds();
const FamilyKind* find_family_kind(std::string_view name);

// Registers a kind beyond the shipped ones for as long as it lives (a test's own family).
class ScopedFamilyKind {
 public:
  explicit ScopedFamilyKind(FamilyKind kind);
  ~ScopedFamilyKind();
  ScopedFamilyKind(const ScopedFamilyKind&) = delete;
  ScopedFamilyKind& operator=(const ScopedFamilyKind&) = delete;

 private:
  std::string name_;
};

// A transformer (language, vision or mixture-of-experts) as a family, for callers that adjust a
// spec (Megatron's vocabulary padding) or write one (tests); models/families/transformer.cpp.
std::shared_ptr<const Family> transformer_family(TransformerSpec spec);

}  // namespace dtsim::models
