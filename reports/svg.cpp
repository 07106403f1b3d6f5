#include "reports/svg.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::reports::svg {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else if (c == '\'') o += "&#39;";
    else o += c;
  }
  return o;
}

std::string bar(const std::vector<std::pair<std::string, double>>& parts, const std::vector<const char*>& colours, double total,
                const std::string& unit, double width, double capacity) {
  // The legend's entries, wrapped to the bar's width at about 6.5 px per character of 11 px text,
  // so none runs off the picture.
  std::string legend;
  double lx = 0;
  int lines = 1;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string text = fmt::format("{} {:.4g} {}", parts[i].first, parts[i].second, unit);
    const double w = 16 + 6.5 * static_cast<double>(text.size()) + 14;
    if (lx > 0 && lx + w > width + 60) {
      lx = 0;
      ++lines;
    }
    legend += fmt::format("<rect x='{:.1f}' y='{}' width='10' height='10' fill='{}'/><text x='{:.1f}' y='{}'>{}</text>\n", lx,
                          46 + 16 * (lines - 1), colours[i % colours.size()], lx + 14, 55 + 16 * (lines - 1), escape(text));
    lx += w;
  }
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{:.0f}' height='{}' font-family='sans-serif' font-size='11'>\n",
                                width + 140, 46 + 16 * lines + 4);
  double at = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const double w = total > 0 ? parts[i].second / total * width : 0;
    svg += fmt::format("<rect x='{:.1f}' y='14' width='{:.1f}' height='20' fill='{}'><title>{}: {:.4g} {}</title></rect>\n", at, w,
                       colours[i % colours.size()], escape(parts[i].first), parts[i].second, unit);
    at += w;
  }
  if (capacity >= 0 && total > 0) {
    const double x = std::min(capacity / total, 1.0) * width;
    // Labelled above the bar, on the side of the line with room.
    svg += fmt::format("<line class='capacity' x1='{:.1f}' y1='2' x2='{:.1f}' y2='38' stroke='#000' stroke-width='2'/>"
                       "<text x='{:.1f}' y='10' text-anchor='{}'>capacity {:.4g} {}</text>\n",
                       x, x, x > width / 2 ? x - 4 : x + 4, x > width / 2 ? "end" : "start", capacity, unit);
  }
  return svg + legend + "</svg>\n";
}

}  // namespace dtsim::reports::svg
