#include "models/model_graph.hpp"

#include <cmath>

namespace dtsim::models {

double Layer::params() const {
  double p = 0;
  for (const auto& op : ops) p += op.params;
  return p;
}

double Layer::expert_params() const {
  double p = 0;
  for (const auto& op : ops)
    if (op.expert) p += op.params;
  return p;
}

double Layer::forward_flops() const {
  double f = 0;
  for (const auto& op : ops)
    for (const auto& k : op.forward) f += k.flops;
  return f;
}

double Layer::saved_bytes() const {
  double b = 0;
  for (const auto& op : ops) b += op.saved_bytes;
  return b;
}

double ModelGraph::params() const {
  double p = 0;
  for (const auto& l : layers) p += l.params();
  return p;
}

double ModelGraph::active_params(bool input_embedding) const {
  double p = 0;
  for (const auto& l : layers) {
    if (!input_embedding && l.kind == LayerKind::Embedding) continue;
    p += l.params() - l.expert_params() * (1.0 - l.experts.active_share);
  }
  return p;
}

double ModelGraph::model_flops() const {
  double f = 0;
  for (const auto& l : layers)
    for (const auto& op : l.ops)
      if (op.matmul)
        for (const auto& k : op.forward) f += 3.0 * k.flops * op.useful;  // backward of a matmul is two matmuls
  return f;
}

Kernel scale_expert_tokens(const Kernel& k, double factor) {
  Kernel out = k;
  out.flops *= factor;
  if (k.kind != KernelKind::Gemm) {
    out.bytes *= factor;
    return out;
  }
  // dW = X^T dY: tokens are the inner dimension
  const bool wgrad = k.role == KernelRole::WeightGrad || k.role == KernelRole::BiasWeightGrad;
  auto grow = [&](std::int64_t v) { return static_cast<std::int64_t>(std::ceil(static_cast<double>(v) * factor)); };
  if (wgrad) out.k = grow(k.k);
  else out.m = grow(k.m);
  const double b = static_cast<double>(out.batch), m = static_cast<double>(out.m), n = static_cast<double>(out.n),
               kk = static_cast<double>(out.k);
  out.flops = 2.0 * b * m * n * kk;
  const double e = k.bytes / (b * (static_cast<double>(k.m) * static_cast<double>(k.k) + static_cast<double>(k.k) * n +
                                   static_cast<double>(k.m) * n));
  out.bytes = e * b * (m * kk + kk * n + m * n);
  return out;
}

double megatron_eq2_params(const TransformerSpec& s) {
  double l = static_cast<double>(s.num_layers), h = static_cast<double>(s.hidden_size);
  double v = static_cast<double>(s.vocab_size), q = static_cast<double>(s.seq_len);
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + q) / (12.0 * l * h));
}

double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch) {
  double sbh = static_cast<double>(s.seq_len) * static_cast<double>(micro_batch) * static_cast<double>(s.hidden_size);
  double as2b = static_cast<double>(s.num_heads) * static_cast<double>(s.seq_len) * static_cast<double>(s.seq_len) *
                static_cast<double>(micro_batch);
  return 34.0 * sbh + 5.0 * as2b;
}

double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch, std::int64_t t, bool sp) {
  double sbh = static_cast<double>(s.seq_len) * static_cast<double>(micro_batch) * static_cast<double>(s.hidden_size);
  double as_h = static_cast<double>(s.num_heads) * static_cast<double>(s.seq_len) / static_cast<double>(s.hidden_size);
  double tt = static_cast<double>(t);
  if (sp) return sbh / tt * (34.0 + 5.0 * as_h);
  return sbh * (10.0 + 24.0 / tt + 5.0 * as_h / tt);
}

Kernel conv_kernel(const std::string& name, const ConvShape& c, ConvPass pass, double element_bytes) {
  const std::int64_t npq = c.n * c.p() * c.q(), kg = c.k / c.groups, crs = c.c / c.groups * c.r * c.s;
  Kernel k;
  k.name = name;
  k.kind = KernelKind::Conv;
  k.batch = c.groups;
  switch (pass) {
    case ConvPass::Forward: k.m = npq, k.n = kg, k.k = crs; break;
    case ConvPass::Dgrad: k.m = npq, k.n = crs, k.k = kg; break;
    case ConvPass::Wgrad: k.m = crs, k.n = kg, k.k = npq; break;
  }
  k.flops = 2.0 * static_cast<double>(k.batch) * static_cast<double>(k.m) * static_cast<double>(k.n) * static_cast<double>(k.k);
  const double input = static_cast<double>(c.n * c.c) * static_cast<double>(c.h * c.w);
  const double output = static_cast<double>(npq) * static_cast<double>(c.k);
  const double weights = static_cast<double>(c.k) * static_cast<double>(crs);
  k.bytes = element_bytes * (input + weights + output);
  k.conv = c;
  k.pass = pass;
  return k;
}

Kernel optimizer_kernel(OptimizerKind kind, double params, UpdatePath path) {
  // Bytes touched per parameter, pass by pass. The update reads the fp32 gradient, weight, m and
  // v and writes the last three (SGD with momentum drops v); the gradient norm for clipping reads
  // the gradient once more. Mixed precision then writes the 16-bit weights from the fp32 ones
  // (read 4, write 2); fp16 first copies the 16-bit gradients to fp32 (read 2, write 4), and
  // unscales them while checking for overflow (read 4, write 4).
  double per_param = (kind == OptimizerKind::Adam ? 16.0 + 12.0 : 12.0 + 8.0) + 4.0;
  if (path != UpdatePath::Fp32) per_param += 6.0;
  if (path == UpdatePath::Fp16Master) per_param += 6.0 + 8.0;
  if (path == UpdatePath::Fp64) per_param *= 2.0;
  Kernel k;
  k.name = kind == OptimizerKind::Adam ? "adam_step" : "sgd_step";
  k.kind = KernelKind::Memory;
  k.flops = (kind == OptimizerKind::Adam ? 12.0 : 4.0) * params;
  k.bytes = per_param * params;
  return k;
}

Kernel grad_accumulate_kernel(double params, int element_bytes) {
  Kernel k;
  k.name = "grad_accumulate";
  k.kind = KernelKind::Memory;
  k.flops = params;
  k.bytes = 3.0 * element_bytes * params;
  return k;
}

std::vector<double> param_tensors(const Op& op) {
  if (op.params <= 0) return {};
  double listed = 0;
  for (double t : op.tensors) listed += t;
  if (listed <= 0) return {op.params};
  std::vector<double> out;
  for (double t : op.tensors) out.push_back(t * op.params / listed);
  return out;
}

}  // namespace dtsim::models
