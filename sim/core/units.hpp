#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// JSON keys carry their unit (SPEC.md); inside the program everything is SI.
namespace dtsim::units {

enum class Dimension { Time, Bytes, Bandwidth, FlopRate };

struct Suffix {
  std::string_view suffix;  // without the leading underscore, e.g. "us"
  double to_si;             // multiply the JSON value by this to get SI
};

// The suffixes accepted for a dimension, e.g. Time: s, ms, us, ns.
const std::vector<Suffix>& suffixes(Dimension d);

// What real hardware and real training runs span, in SI. A non-zero quantity outside is a typo or
// hostile input, whatever its key allows: a bandwidth of 1e-300 GB/s would make one step last
// 1e299 s. Zero is left to each key's own range (an ideal, zero latency is a fair question).
struct Span {
  double min, max;
  const char* what;  // "a bandwidth"
};
const Span& physical_span(Dimension d);

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

}  // namespace dtsim::units
