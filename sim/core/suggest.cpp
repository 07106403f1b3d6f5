#include "sim/core/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace dtsim {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours (the usual typo), case-insensitive.
std::size_t distance(std::string_view a, std::string_view b) {
  auto low = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 200) return "";  // a quadratic table is no place for a huge key
  std::string best;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    if (c.size() > 200 || c == word) continue;
    const std::size_t d = distance(word, c);
    if (best.empty() || d < best_d || (d == best_d && c < best)) best = c, best_d = d;
  }
  // A third of the longer word may differ (at least 2 edits): "steps" for "step", not "seed" for "name".
  const std::size_t room = std::max<std::size_t>(2, std::max(word.size(), best.size()) / 3);
  return !best.empty() && best_d <= room ? best : "";
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string n = nearest(word, candidates);
  return n.empty() ? "" : " (did you mean \"" + n + "\"?)";
}

}  // namespace dtsim
