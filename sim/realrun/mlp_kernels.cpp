// libdtsim_mlp.so: the real trainer's Eigen MLP (mlp_kernels.hpp), compiled for this CPU's ISA.
// Everything but the C interface is hidden.
#include "sim/realrun/mlp_kernels.hpp"

#include <Eigen/Dense>
#include <cstdlib>
#include <vector>

#define DTSIM_EXPORT __attribute__((visibility("default")))

namespace {

using Map = Eigen::Map<Eigen::MatrixXf>;

// The same operations, in the same order, as realrun::mlp_kernels() lists for the prediction.
struct Mlp {
  long long batch = 0;
  std::vector<long long> dims;
  std::vector<float> weights;  // every layer's matrix, column-major, one after another
  std::vector<long long> offset;
  Eigen::MatrixXf x, y;
  // Every intermediate, kept between steps as a framework's caching allocator keeps them: a
  // fresh 1 MB temporary per layer cost page faults (on this VM, 15-20 % of the step) that no
  // profiled kernel pays.
  std::vector<Eigen::MatrixXf> act, g, back;

  Map w(float* base, std::size_t i) const { return Map(base + offset[i], dims[i], dims[i + 1]); }

  void gradients(float* grad) {
    const std::size_t layers = dims.size() - 1;
    act.resize(layers + 1);
    g.resize(layers + 1);
    back.resize(layers + 1);
    act[0] = x;
    for (std::size_t i = 0; i < layers; ++i) {
      act[i + 1].noalias() = act[i] * w(weights.data(), i);
      if (i + 1 < layers) act[i + 1] = act[i + 1].cwiseMax(0.0f);  // ReLU
    }
    g[layers] = act[layers] - y;  // d(0.5 |out - y|^2)/d out
    for (std::size_t i = layers; i-- > 0;) {
      w(grad, i).noalias() = act[i].transpose() * g[i + 1];
      if (i > 0) {
        back[i].noalias() = g[i + 1] * w(weights.data(), i).transpose();
        g[i] = (act[i].array() > 0.0f).select(back[i], 0.0f);  // ReLU's mask
      }
    }
  }
};

}  // namespace

extern "C" {

DTSIM_EXPORT void* dtsim_mlp_new(int n_dims, const long long* dims, long long batch, unsigned seed) {
  if (n_dims < 2 || batch < 1) return nullptr;
  auto* m = new Mlp;
  m->batch = batch;
  m->dims.assign(dims, dims + n_dims);
  long long total = 0;
  for (int i = 0; i + 1 < n_dims; ++i) {
    if (dims[i] < 1 || dims[i + 1] < 1) {
      delete m;
      return nullptr;
    }
    m->offset.push_back(total);
    total += dims[i] * dims[i + 1];
  }
  std::srand(seed);  // Eigen's Random draws from rand(): the same seed gives every worker the same model
  m->weights.resize(static_cast<std::size_t>(total));
  for (int i = 0; i + 1 < n_dims; ++i) m->w(m->weights.data(), static_cast<std::size_t>(i)) = Eigen::MatrixXf::Random(dims[i], dims[i + 1]) * 0.01f;
  m->x = Eigen::MatrixXf::Random(batch, dims[0]);
  m->y = Eigen::MatrixXf::Random(batch, dims[n_dims - 1]);
  return m;
}

DTSIM_EXPORT long long dtsim_mlp_params(void* mlp) { return static_cast<long long>(static_cast<Mlp*>(mlp)->weights.size()); }

DTSIM_EXPORT void dtsim_mlp_gradients(void* mlp, float* grad) { static_cast<Mlp*>(mlp)->gradients(grad); }

DTSIM_EXPORT void dtsim_mlp_apply(void* mlp, const float* grad, float lr) {
  auto* m = static_cast<Mlp*>(mlp);
  const auto n = static_cast<Eigen::Index>(m->weights.size());
  Eigen::Map<Eigen::VectorXf>(m->weights.data(), n) -= lr * Eigen::Map<const Eigen::VectorXf>(grad, n);
}

DTSIM_EXPORT void dtsim_mlp_weights(void* mlp, float* out, long long n) {
  auto* m = static_cast<Mlp*>(mlp);
  for (long long i = 0; i < n && i < static_cast<long long>(m->weights.size()); ++i) out[i] = m->weights[static_cast<std::size_t>(i)];
}

DTSIM_EXPORT void dtsim_mlp_free(void* mlp) { delete static_cast<Mlp*>(mlp); }
}
