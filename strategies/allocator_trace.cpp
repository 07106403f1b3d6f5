#include "strategies/allocator_trace.hpp"

#include <algorithm>
#include <vector>

#include "strategies/caching_allocator.hpp"

namespace dtsim::strategies {

namespace {

// The bytes one kernel returns, as the trace allocates them.
double kernel_output_bytes(const models::Kernel& k, int activation_bytes) {
  using models::KernelKind;
  using models::KernelRole;
  const double a = activation_bytes;
  switch (k.kind) {
    case KernelKind::Gemm:
    case KernelKind::Conv: return static_cast<double>(k.batch) * k.m * k.n * a;
    case KernelKind::Attention:
      // A fused kernel returns one value per query and head dimension; an unfused one the scores.
      if (k.role == KernelRole::FlashForward || k.role == KernelRole::FlashBackward)
        return k.io.q > 0 ? k.io.q * (k.elem_bytes > 0 ? k.elem_bytes : a) : static_cast<double>(k.batch) * k.m * k.k * a;
      return static_cast<double>(k.batch) * k.m * k.n * a;
    case KernelKind::Memory: return k.elems > 0 ? k.elems * (k.elem_bytes > 0 ? k.elem_bytes : a) : k.bytes / 2;
  }
  return 0;
}

// Logit elements of a cross-entropy op (LossForward role), 0 for other ops.
double loss_elements(const models::Op& op) {
  for (const auto& k : op.forward)
    if (k.role == models::KernelRole::LossForward) return k.elems;
  return 0;
}

double op_output(const models::Op& op, int activation_bytes) {
  double most = 0;
  for (const auto& k : op.forward) most = std::max(most, kernel_output_bytes(k, activation_bytes));
  return most;
}

// One stage's trace, played as it is generated.
class Trace {
 public:
  Trace(const Layers& layers, const Checkpoints& c, const TraceOptions& o) : layers_(layers), c_(c), o_(o) {}

  double slack() {
    const int n = std::clamp(o_.in_flight, 1, kTraceMostInFlight);
    for (int step = 0; step < 2; ++step) {
      // 1F1B: a forward while fewer than n micro-batches wait for their backward.
      const int total = 2 * n;
      int f = 0, b = 0;
      std::vector<std::vector<Held>> kept(static_cast<std::size_t>(total));
      while (b < total) {
        if (f < total && f - b < n) forward(kept[static_cast<std::size_t>(f++)]);
        else backward(kept[static_cast<std::size_t>(b++)]);
      }
    }
    return static_cast<double>(a_.peak_reserved() - a_.peak_allocated());
  }

 private:
  using Held = std::vector<std::vector<int>>;  // per layer, per op: the blocks kept for backward

  bool whole(const models::Layer& l) const { return checkpoints_block(c_.of(l)); }

  // The op's output, and what it keeps beyond it; `out` is freed by the caller once read.
  void run_op(const models::Op& op, double saved, std::vector<int>& keep, int& out) {
    if (const double v = loss_elements(op); v > 0 && saved > 0) {
      // cross_entropy(logits.float(), labels): the fp32 copy, then log_softmax's output (kept);
      // the copy is freed as the loss returns.
      const int copy = a_.allocate(4 * v);
      keep.push_back(a_.allocate(saved));
      a_.free(copy);
      return;
    }
    const double o = op_output(op, o_.activation_bytes);
    if (saved >= o && saved > 0) {  // what the op returns is (part of) what backward reads
      keep.push_back(a_.allocate(saved));
      if (out >= 0) a_.free(out);
      out = -1;
      return;
    }
    const int next = o > 0 ? a_.allocate(o) : -1;
    if (out >= 0) a_.free(out);
    out = next;
    if (saved > 0) keep.push_back(a_.allocate(saved));
  }

  double saved(const models::Op& op, Recompute how) const {
    return how == Recompute::Selective ? op.saved_bytes_selective : op.saved_bytes;
  }

  void layer_forward(const models::Layer& l, Held& held, int& out, bool rerun) {
    const Recompute how = rerun ? Recompute::None : c_.of(l);
    const int gathered = gather(l);
    held.assign(l.ops.size(), {});
    if (!rerun && whole(l)) {
      // A checkpointed block keeps its input (or what its op-level policy keeps) and runs with
      // nothing saved.
      const double k = how == Recompute::Op ? c_.kept({&l}) : l.input_bytes;
      if (k > 0) held[0].push_back(a_.allocate(k));
      for (const auto& op : l.ops) {
        std::vector<int> none;
        run_op(op, 0, none, out);
      }
    } else {
      for (std::size_t i = 0; i < l.ops.size(); ++i) run_op(l.ops[i], saved(l.ops[i], how), held[i], out);
    }
    if (gathered >= 0) a_.free(gathered);
  }

  void layer_backward(const models::Layer& l, Held& held, int& grad) {
    Held again;
    int out = -1;
    if (whole(l)) layer_forward(l, again, out, true);
    if (out >= 0) a_.free(out);
    const int gathered = gather(l);
    for (std::size_t i = l.ops.size(); i-- > 0;) {
      const double in = i > 0 ? op_output(l.ops[i - 1], o_.activation_bytes) : l.input_bytes;
      if (const double v = loss_elements(l.ops[i]); v > 0) {
        // nll_loss's gradient, then log_softmax's, both fp32 beside the kept output.
        const int nll = a_.allocate(4 * v);
        const int lsm = a_.allocate(4 * v);
        a_.free(nll);
        if (grad >= 0) a_.free(grad);
        grad = lsm;
      }
      const int next = in > 0 ? a_.allocate(in) : -1;
      if (grad >= 0) a_.free(grad);
      grad = next;
      for (int b : held[i]) a_.free(b);
      if (!again.empty())
        for (int b : again[i]) a_.free(b);
    }
    if (gathered >= 0) a_.free(gathered);
    if (o_.grad_bytes_per_param > 0 && l.params() > 0) a_.free(a_.allocate(l.params() * o_.grad_bytes_per_param));
  }

  int gather(const models::Layer& l) {
    return o_.gathered_bytes_per_param > 0 && l.params() > 0 ? a_.allocate(l.params() * o_.gathered_bytes_per_param) : -1;
  }

  void forward(std::vector<Held>& kept) {
    kept.assign(layers_.size(), {});
    int out = -1;
    for (std::size_t i = 0; i < layers_.size(); ++i) layer_forward(*layers_[i], kept[i], out, false);
    if (out >= 0) a_.free(out);
  }

  void backward(std::vector<Held>& kept) {
    int grad = -1;
    for (std::size_t i = layers_.size(); i-- > 0;) layer_backward(*layers_[i], kept[i], grad);
    if (grad >= 0) a_.free(grad);
  }

  const Layers& layers_;
  const Checkpoints& c_;
  const TraceOptions& o_;
  CachingAllocator a_;
};

}  // namespace

std::vector<double> trace_signature(const Layers& layers, const Checkpoints& c, const TraceOptions& o) {
  std::vector<double> s{static_cast<double>(std::min(o.in_flight, kTraceMostInFlight)), o.gathered_bytes_per_param,
                        o.grad_bytes_per_param, static_cast<double>(o.activation_bytes)};
  for (const auto* l : layers) {
    const Recompute how = c.of(*l);
    s.insert(s.end(), {static_cast<double>(how), l->input_bytes, l->params(), how == Recompute::Op ? c.kept({l}) : 0.0});
    for (const auto& op : l->ops)
      s.insert(s.end(), {op_output(op, o.activation_bytes), op.saved_bytes, op.saved_bytes_selective, loss_elements(op)});
  }
  return s;
}

double caching_slack(const Layers& layers, const Checkpoints& checkpoints, const TraceOptions& o) {
  return Trace(layers, checkpoints, o).slack();
}

}  // namespace dtsim::strategies
