#include "sim/results/kernel_view.hpp"

#include <array>

#include "sim/cost/roofline.hpp"

namespace dtsim::results {

namespace {

using models::KernelKind, models::KernelRole;

enum Group { Gemm, Attention, Conv, Norm, Activation, Residual, Loss, Cast, OtherMemory, Optimizer, kGroups };
constexpr std::array<const char*, kGroups> kNames{
    "GEMMs", "attention", "convolutions", "norms", "activations", "residual and dropout", "loss", "casts up",
    "other memory-bound", "optimizer"};

// By role, not by name: what the model says the kernel is for.
Group group_of(const models::Kernel& k) {
  if (k.scores) return Attention;  // standard attention's passes over the score matrix
  switch (k.role) {
    case KernelRole::FlashForward:
    case KernelRole::FlashBackward: return Attention;
    case KernelRole::NormForward:
    case KernelRole::NormBackward:
    case KernelRole::RmsNormForward:
    case KernelRole::RmsNormBackward:
    case KernelRole::BatchNormForward:
    case KernelRole::BatchNormBackward: return Norm;
    case KernelRole::GeluForward:
    case KernelRole::GeluBackward:
    case KernelRole::SwiGluForward:
    case KernelRole::SwiGluBackward:
    case KernelRole::SquaredReluForward:
    case KernelRole::SquaredReluBackward: return Activation;
    case KernelRole::ResidualForward:
    case KernelRole::ResidualBackward: return Residual;
    case KernelRole::LossForward:
    case KernelRole::LossBackward: return Loss;
    case KernelRole::CastUp: return Cast;
    default: break;
  }
  switch (k.kind) {
    case KernelKind::Gemm: return Gemm;
    case KernelKind::Conv: return Conv;
    case KernelKind::Attention: return Attention;
    case KernelKind::Memory: return OtherMemory;
  }
  return OtherMemory;
}

}  // namespace

std::vector<KernelGroup> kernel_view(const Result& r, int rank) {
  const auto& s = r.scenario_spec;
  const std::string dtype = config::compute_dtype(s.training.precision);
  std::array<KernelGroup, kGroups> groups{};
  for (const auto& t : r.plan.graph.tasks) {
    if (t.is_collective || t.work < 0 || t.rank != rank) continue;
    const auto& w = r.plan.graph.works[static_cast<std::size_t>(t.work)];
    for (const auto& k : w.kernels) {
      // The optimizer's own kernels (its casts too) under its name: the breakdown's part.
      const Group g = t.category == taskgraph::Category::Optimizer ? Optimizer : group_of(k);
      groups[g].kernels += w.repeat;
      groups[g].seconds += w.repeat * cost::quote_kernel(s.device, k, dtype).seconds;
    }
  }
  std::vector<KernelGroup> out;
  for (int g = 0; g < kGroups; ++g)
    if (groups[g].kernels > 0) out.push_back({kNames[g], groups[g].kernels, groups[g].seconds});
  return out;
}

}  // namespace dtsim::results
