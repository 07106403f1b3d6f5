#include "sim/sweep/human.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "sim/core/units.hpp"

namespace dtsim::sweep {

namespace {

// Three significant digits of 0 <= x < 1000 (after rounding, which may reach 1000: the caller
// moves to the next unit first).
std::string three_digits(double x) {
  if (x < 9.995) return fmt::format("{:.2f}", x);
  if (x < 99.95) return fmt::format("{:.1f}", x);
  return fmt::format("{:.0f}", x);
}

}  // namespace

std::string human_number(double x) {
  if (!std::isfinite(x)) return fmt::format("{}", x);
  const std::string sign = x < 0 ? "-" : "";
  x = std::fabs(x);
  static constexpr std::array<const char*, 5> kUnits{"", " k", " M", " B", " T"};
  std::size_t u = 0;
  while (x >= 999.5 && u + 1 < kUnits.size()) x /= 1000, ++u;
  return sign + three_digits(x) + kUnits[u];
}

std::string human_money(double usd) {
  const std::string n = human_number(usd);
  return n.front() == '-' ? "-$" + n.substr(1) : "$" + n;
}

std::string human_days(double seconds) {
  if (seconds >= 86400) return fmt::format("{:.1f} days", seconds / 86400);
  if (seconds >= 3600) return fmt::format("{:.1f} hours", seconds / 3600);
  if (seconds >= 59.5) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.0f} s", seconds);
}

std::string human_energy(double kwh) {
  if (kwh >= 999.5e3) return human_number(kwh / 1e6).append(" GWh");
  if (kwh >= 999.5) return human_number(kwh / 1e3).append(" MWh");
  return human_number(kwh).append(" kWh");
}

std::string human_gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / units::kGiB); }

}  // namespace dtsim::sweep
