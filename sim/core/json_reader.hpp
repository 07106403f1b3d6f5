#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.hpp"

namespace dtsim {

using Json = nlohmann::json;

// Which file each value came from once `extends` chains and presets are merged, so an error
// can name the file the user must edit.
struct Origins {
  std::string default_file;
  std::map<std::string, std::string> file_by_pointer;
  const std::string& file_for(const std::string& pointer) const;  // longest recorded prefix
  void record(const Json& value, const std::string& pointer, const std::string& file);
};

std::string json_pointer_append(const std::string& pointer, std::string_view key);

// Parses a file; malformed JSON becomes an InputError with line and column. Also input errors,
// at the value's JSON pointer: nesting deeper than kMaxJsonDepth, a key twice in one object, a
// number beyond a double's range; and a file larger than kMaxJsonFileBytes.
inline constexpr std::size_t kMaxJsonDepth = 64;
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{16} << 20;
Json parse_json_file(const std::string& path);
Json parse_json_text(const std::string& text, const std::string& file_for_errors);

struct Range {
  double min, max;
  bool min_exclusive = false;
};

// A strict view over one JSON object: every key must be read (or explicitly ignored) before
// finish(), so a misspelt key is an error instead of a silently ignored setting.
class Reader {
 public:
  Reader(const Json& object, std::string pointer, std::shared_ptr<const Origins> origins);

  bool has(std::string_view key) const;
  std::string pointer(std::string_view key) const { return json_pointer_append(pointer_, key); }
  const std::string& pointer() const { return pointer_; }

  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t fallback);
  double number(std::string_view key, Range r);
  double number(std::string_view key, Range r, double fallback);
  bool boolean(std::string_view key, bool fallback);
  std::string text(std::string_view key);
  std::string text(std::string_view key, const std::string& fallback);
  std::string choice(std::string_view key, const std::vector<std::string>& allowed);
  std::string choice(std::string_view key, const std::vector<std::string>& allowed, const std::string& fallback);
  // A quantity written as base + "_" + unit suffix (latency_us, latency_ms...); returns SI.
  double quantity(std::string_view base, units::Dimension d, Range si);
  double quantity(std::string_view base, units::Dimension d, Range si, double fallback_si);
  std::optional<double> optional_quantity(std::string_view base, units::Dimension d, Range si);
  // A number whose key names its unit (peak_tflops/bf16, reference/step_time_s), range r in that
  // unit; returns SI. It and every quantity must also lie in units::physical_span.
  double number_in(std::string_view key, units::Dimension d, double to_si, Range r);
  Reader object(std::string_view key);
  std::optional<Reader> optional_object(std::string_view key);
  // An optional object read as an empty one where the file has none, so that its keys' defaults
  // apply and `dtsim describe` lists them although no shipped file sets them.
  Reader section(std::string_view key);
  // The one line `dtsim describe` shows for a key this reader has read (a mechanism unit's own
  // keys carry their documentation where they are read).
  void document(std::string_view key, std::string doc) const;
  const Json& raw(std::string_view key);  // marks the key as known
  // [[size, efficiency], ...]: sizes increasing, efficiencies in (0, 1].
  std::vector<std::pair<double, double>> efficiency_points(std::string_view key);
  void ignore(std::string_view key) { seen_.insert(std::string(key)); }

  void finish() const;
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  [[noreturn]] void fail_here(const std::string& reason) const;

 private:
  // Records the key for `dtsim describe` when a KeyCatalog listens (a no-op otherwise).
  void declare(std::string_view key, const char* type, std::string range, std::string fallback, bool required,
               std::vector<std::string> choices = {}, std::string unit = "") const;
  const Json& require(std::string_view key);
  const Json* find(std::string_view key);
  double to_range(std::string_view key, double value, Range r, const std::string& shown) const;
  double physical(std::string_view key, units::Dimension d, double to_si, double value) const;

  const Json& object_;
  std::string pointer_;
  std::shared_ptr<const Origins> origins_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace dtsim
