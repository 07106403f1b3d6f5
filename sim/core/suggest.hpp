#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dtsim {

// The candidate a misspelt `word` most likely meant (edit distance, ignoring case), or "" when
// none is close enough to be worth suggesting.
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean \"KEY\"?)" for nearest(), or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace dtsim
