#include "sim/core/units.hpp"

namespace dtsim::units {

const std::vector<Suffix>& suffixes(Dimension d) {
  static const std::vector<Suffix> time{{"s", 1.0},      {"ms", 1e-3},     {"us", 1e-6},
                                        {"ns", 1e-9},     {"min", 60.0},    {"hours", 3600.0},
                                        {"days", 86400.0}};
  static const std::vector<Suffix> bytes{{"bytes", 1.0}, {"KiB", 1024.0}, {"MiB", kMiB},
                                         {"GiB", kGiB},  {"MB", 1e6},     {"GB", 1e9}};
  // Bandwidths are per direction. Gbps is bits: network cards are sold that way (200 Gb/s HDR).
  static const std::vector<Suffix> bandwidth{{"GBps", 1e9}, {"MBps", 1e6}, {"Gbps", 1e9 / 8.0}};
  static const std::vector<Suffix> flops{{"tflops", 1e12}, {"gflops", 1e9}};
  switch (d) {
    case Dimension::Time: return time;
    case Dimension::Bytes: return bytes;
    case Dimension::Bandwidth: return bandwidth;
    case Dimension::FlopRate: return flops;
  }
  return time;
}

const Span& physical_span(Dimension d) {
  // Time: 1 ns (below any kernel launch or link latency) to 1e11 s (3,000 years: failure rates
  // of whole fleets). Bytes: one byte to 1 EB. Bandwidth: 1 MB/s (a slow disk) to 1 PB/s, 200
  // times an H200's HBM. Compute: 1 MFLOP/s to 1 EFLOP/s per device.
  static const Span time{1e-9, 1e11, "a time"}, bytes{1.0, 1e18, "a size"}, bandwidth{1e6, 1e15, "a bandwidth"},
      flops{1e6, 1e18, "a compute rate"};
  switch (d) {
    case Dimension::Time: return time;
    case Dimension::Bytes: return bytes;
    case Dimension::Bandwidth: return bandwidth;
    case Dimension::FlopRate: return flops;
  }
  return time;
}

}  // namespace dtsim::units
