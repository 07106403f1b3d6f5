#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_graph.hpp"

// The real trainer's model: the feed-forward stack of a transformer preset as an fp32 MLP
// (num_layers x (hidden -> ffn -> hidden), ReLU between layers, squared-error loss), over
// micro_batch x seq_len tokens of synthetic data, trained with SGD. Its compute runs in
// libdtsim_mlp.so, compiled for this CPU's ISA as the profiled kernels are.
namespace dtsim::realrun {

struct MlpShape {
  std::int64_t batch = 1;            // rows: tokens per step
  std::vector<std::int64_t> dims;    // input, hidden..., output
  std::int64_t params() const;
};

MlpShape shape_of(const models::TransformerSpec& spec, std::int64_t micro_batch);

// The kernels of one worker's step as the trainer runs them, for pricing with a kernel table:
// forward and backward, then the SGD update.
std::vector<models::Kernel> backward_kernels(const MlpShape& s);
std::vector<models::Kernel> update_kernels(const MlpShape& s);

// Bytes one worker's step touches: weights and gradients (4 bytes per parameter each) and three
// times the activations (the forward's, and the backward's two temporaries per layer). When the
// workers' together exceed the last-level cache, the step's kernels find their operands in memory.
double step_working_set_bytes(const MlpShape& s);

// One worker's model in libdtsim_mlp.so; throws std::runtime_error when the plugin cannot be used.
class Mlp {
 public:
  Mlp(const MlpShape& s, unsigned seed);
  ~Mlp();
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;
  std::int64_t params() const;
  void gradients(std::vector<float>& grad);
  void apply(const std::vector<float>& grad, float lr);
  std::vector<float> weights(std::int64_t n) const;

 private:
  void* handle_ = nullptr;
};

}  // namespace dtsim::realrun
