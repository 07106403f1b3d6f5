#pragma once
// Drawing helpers the HTML pages share (report.html, compare --html).
#include <string>
#include <utility>
#include <vector>

namespace dtsim::reports::svg {

std::string escape(const std::string& s);  // text for HTML and SVG

// A horizontal stacked bar `width` pixels for `total`, its parts' values in their titles
// ("compute: 1.23 s") and a legend that wraps to the bar's width. `capacity` >= 0 draws a line
// there, labelled (device memory on memory bars).
std::string bar(const std::vector<std::pair<std::string, double>>& parts, const std::vector<const char*>& colours, double total,
                const std::string& unit, double width = 900, double capacity = -1);

}  // namespace dtsim::reports::svg
