#include "sim/realrun/trainer.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>

#include "sim/profile/cpu_loader.hpp"

namespace dtsim::realrun {

namespace {

struct Api {
  void* (*make)(int, const long long*, long long, unsigned) = nullptr;
  long long (*params)(void*) = nullptr;
  void (*gradients)(void*, float*) = nullptr;
  void (*apply)(void*, const float*, float) = nullptr;
  void (*weights)(void*, float*, long long) = nullptr;
  void (*release)(void*) = nullptr;
};

// Found where libdtsim_cpu.so is found: beside the binary, or in the build directory.
const Api& api() {
  static const Api a = [] {
    // The same flags build both plugins: if this CPU runs the profiled kernels, it runs these.
    (void)profile::cpu::build();
    std::vector<std::filesystem::path> candidates;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates = {exe.parent_path() / "libdtsim_mlp.so", exe.parent_path().parent_path() / "libdtsim_mlp.so"};
#ifdef DTSIM_PLUGIN_DIR
    candidates.push_back(std::filesystem::path(DTSIM_PLUGIN_DIR) / "libdtsim_mlp.so");
#endif
    for (const auto& c : candidates) {
      if (!std::filesystem::exists(c, ec)) continue;
      void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) throw std::runtime_error(std::string("cannot load the trainer's kernels: ") + dlerror());
      Api r;
      r.make = reinterpret_cast<decltype(r.make)>(dlsym(h, "dtsim_mlp_new"));
      r.params = reinterpret_cast<decltype(r.params)>(dlsym(h, "dtsim_mlp_params"));
      r.gradients = reinterpret_cast<decltype(r.gradients)>(dlsym(h, "dtsim_mlp_gradients"));
      r.apply = reinterpret_cast<decltype(r.apply)>(dlsym(h, "dtsim_mlp_apply"));
      r.weights = reinterpret_cast<decltype(r.weights)>(dlsym(h, "dtsim_mlp_weights"));
      r.release = reinterpret_cast<decltype(r.release)>(dlsym(h, "dtsim_mlp_free"));
      if (!r.make || !r.params || !r.gradients || !r.apply || !r.weights || !r.release)
        throw std::runtime_error(c.string() + " lacks the trainer's functions");
      return r;
    }
    throw std::runtime_error("libdtsim_mlp.so (the trainer's kernels) not found beside the dtsim binary");
  }();
  return a;
}

models::Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  return models::Kernel{"gemm", models::KernelKind::Gemm, 1, m, n, k, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n)};
}
models::Kernel stream(double bytes) { return models::Kernel{"elementwise", models::KernelKind::Memory, 1, 0, 0, 0, 0, bytes}; }

}  // namespace

std::int64_t MlpShape::params() const {
  std::int64_t p = 0;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) p += dims[i] * dims[i + 1];
  return p;
}

MlpShape shape_of(const models::TransformerSpec& spec, std::int64_t micro_batch) {
  MlpShape s;
  s.batch = micro_batch * spec.seq_len;
  s.dims.push_back(spec.hidden_size);
  for (std::int64_t l = 0; l < spec.num_layers; ++l) {
    s.dims.push_back(spec.ffn_hidden_size);
    s.dims.push_back(spec.hidden_size);
  }
  return s;
}

// In the order mlp_kernels.cpp runs them.
std::vector<models::Kernel> backward_kernels(const MlpShape& s) {
  const auto& d = s.dims;
  const std::size_t layers = d.size() - 1;
  std::vector<models::Kernel> out;
  out.push_back(stream(8.0 * static_cast<double>(s.batch * d[0])));  // the input copied in
  for (std::size_t i = 0; i < layers; ++i) {
    out.push_back(gemm(s.batch, d[i + 1], d[i]));
    if (i + 1 < layers) out.push_back(stream(8.0 * static_cast<double>(s.batch * d[i + 1])));  // ReLU
  }
  out.push_back(stream(12.0 * static_cast<double>(s.batch * d.back())));  // loss gradient
  for (std::size_t i = layers; i-- > 0;) {
    out.push_back(gemm(d[i], d[i + 1], s.batch));  // weight gradient
    if (i > 0) {
      out.push_back(gemm(s.batch, d[i], d[i + 1]));                         // input gradient
      out.push_back(stream(12.0 * static_cast<double>(s.batch * d[i])));  // ReLU's mask
    }
  }
  return out;
}

std::vector<models::Kernel> update_kernels(const MlpShape& s) { return {stream(12.0 * static_cast<double>(s.params()))}; }

double step_working_set_bytes(const MlpShape& s) {
  std::int64_t activations = 0;
  for (std::size_t i = 1; i < s.dims.size(); ++i) activations += s.batch * s.dims[i];
  return 8.0 * static_cast<double>(s.params()) + 12.0 * static_cast<double>(activations);
}

Mlp::Mlp(const MlpShape& s, unsigned seed) {
  std::vector<long long> dims(s.dims.begin(), s.dims.end());
  handle_ = api().make(static_cast<int>(dims.size()), dims.data(), s.batch, seed);
  if (!handle_) throw std::runtime_error("the trainer's MLP has a bad shape");
}
Mlp::~Mlp() {
  if (handle_) api().release(handle_);
}
std::int64_t Mlp::params() const { return api().params(handle_); }
void Mlp::gradients(std::vector<float>& grad) {
  grad.resize(static_cast<std::size_t>(params()));
  api().gradients(handle_, grad.data());
}
void Mlp::apply(const std::vector<float>& grad, float lr) { api().apply(handle_, grad.data(), lr); }
std::vector<float> Mlp::weights(std::int64_t n) const {
  std::vector<float> w(static_cast<std::size_t>(n));
  api().weights(handle_, w.data(), n);
  return w;
}

}  // namespace dtsim::realrun
