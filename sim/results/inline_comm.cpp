#include "sim/results/inline_comm.hpp"

#include <algorithm>

namespace dtsim::results {

using taskgraph::OverlapCut;

InlineCost inline_cost(const taskgraph::InlineCollective& c, double total, const std::function<double(double)>& alone,
                       double kernel_s, double margin_share) {
  InlineCost out;
  if (c.hidden_work >= 0) {  // an expert all-to-all beside another micro-batch's piece
    const double a = total / c.count, slowed = kernel_s / (1.0 - margin_share);
    out.exposed = c.count * std::max(0.0, a - slowed);
    out.interference = c.count * (a >= slowed ? slowed - kernel_s : margin_share * a);
    return out;
  }
  if (c.cut == OverlapCut::None) {
    out.exposed = c.hidden_by >= 0 ? c.count * std::max(0.0, total / c.count - c.hidden_share * kernel_s) : total;
    return out;
  }
  const double slowed = kernel_s / (1.0 - margin_share);
  const double n = std::max(1, c.chunks), slice = slowed / n;
  double exposed = 0;
  switch (c.cut) {
    case OverlapCut::Ring:
      exposed = n > 1 ? (n - 1) * std::max(0.0, alone(c.bytes) / (n - 1) - slice) : alone(c.bytes);
      break;
    case OverlapCut::Pipeline: {
      const double r = alone(c.bytes / n);
      exposed = (n - 1) * std::max(0.0, r - slice) + r;
      break;
    }
    case OverlapCut::Bulk:
      exposed = std::max(0.0, alone(c.bytes) - slowed);
      break;
    case OverlapCut::None:
      break;
  }
  out.exposed = c.count * exposed;
  out.interference = c.count * (slowed - kernel_s);
  return out;
}

}  // namespace dtsim::results
