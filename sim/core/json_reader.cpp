#include "sim/core/json_reader.hpp"
#include "sim/core/suggest.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/key_catalog.hpp"

namespace dtsim {

const std::string& Origins::file_for(const std::string& pointer) const {
  std::string p = pointer;
  while (true) {
    if (auto it = file_by_pointer.find(p); it != file_by_pointer.end()) return it->second;
    if (p.empty()) return default_file;
    p.erase(p.rfind('/'));
  }
}

void Origins::record(const Json& value, const std::string& pointer, const std::string& file) {
  file_by_pointer[pointer] = file;
  if (value.is_object())
    for (const auto& [k, v] : value.items()) record(v, json_pointer_append(pointer, k), file);
}

std::string json_pointer_append(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

namespace {

// Builds the document as nlohmann's own DOM parser does, but refuses what the loader could not
// survive or would misread, at the JSON pointer of the offending value and before anything
// recurses over it: nesting deeper than kMaxJsonDepth (every later pass, deep_merge and
// Origins::record among them, recurses once per level), a key given twice in one object (the
// last would silently win) and numbers too large for a double (1e400). nlohmann's parser itself
// keeps its own stack on the heap, so a hostile file costs one pass over its bytes.
class DomBuilder {
 public:
  DomBuilder(Json& root, const std::string& text, const std::string& file) : root_(root), text_(text), file_(file) {}

  bool null() { return place(Json(nullptr)), true; }
  bool boolean(bool v) { return place(Json(v)), true; }
  bool number_integer(Json::number_integer_t v) { return place(Json(v)), true; }
  bool number_unsigned(Json::number_unsigned_t v) { return place(Json(v)), true; }
  bool number_float(Json::number_float_t v, const std::string& token) {
    if (!std::isfinite(v)) too_large(token);
    return place(Json(v)), true;
  }
  bool string(std::string& v) { return place(Json(std::move(v))), true; }
  bool binary(Json::binary_t& v) { return place(Json(std::move(v))), true; }
  bool start_object(std::size_t) { return open(Json::object()), true; }
  bool start_array(std::size_t) { return open(Json::array()), true; }
  bool end_object() { return stack_.pop_back(), true; }
  bool end_array() { return stack_.pop_back(), true; }
  bool key(std::string& k) {
    Frame& f = stack_.back();
    if (f.node->contains(k))
      throw InputError(file_, json_pointer_append(path_of(stack_.size() - 1), k), "this key appears twice in the same object");
    f.key = k;
    return true;
  }

  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    if (e.id == 406) too_large(token);  // nlohmann's "number overflow"
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < position && i < text_.size(); ++i) {
      if (text_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    if (auto pos = what.find("syntax error"); pos != std::string::npos) what = what.substr(pos);
    throw InputError(file_, "", fmt::format("malformed JSON at line {}, column {}: {}", line, col, what));
  }

 private:
  struct Frame {
    Json* node;
    std::string key;  // objects: the key whose value comes next
  };

  // The pointer of the value being placed below the first `depth` open containers.
  std::string path_of(std::size_t depth) const {
    std::string p;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = stack_[i];
      if (f.node->is_object()) {
        p = json_pointer_append(p, f.key);
      } else {
        // An array that holds another open container is filling its last element; the innermost
        // open array, its next one.
        const std::size_t n = f.node->size();
        p += '/';
        p += std::to_string(i + 1 < stack_.size() ? n - 1 : n);
      }
    }
    return p;
  }
  std::string here() const { return path_of(stack_.size()); }

  [[noreturn]] void too_large(const std::string& token) const {
    throw InputError(file_, here(), fmt::format("{} is too large a number (beyond {:g})", token.substr(0, 40),
                                                std::numeric_limits<double>::max()));
  }

  Json* place(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->is_array()) {
      f.node->push_back(std::move(v));
      return &f.node->back();
    }
    Json& slot = (*f.node)[f.key];
    slot = std::move(v);
    return &slot;
  }

  void open(Json&& container) {
    if (stack_.size() >= kMaxJsonDepth)
      throw InputError(file_, here(), fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    stack_.push_back({place(std::move(container)), {}});
  }

  Json& root_;
  const std::string& text_;
  const std::string& file_;
  std::vector<Frame> stack_;
};

}  // namespace

Json parse_json_text(const std::string& text, const std::string& file) {
  Json root;
  DomBuilder builder(root, text, file);
  Json::sax_parse(text, &builder);
  return root;
}

Json parse_json_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxJsonFileBytes)
    throw InputError(path, "", fmt::format("{} bytes is larger than the {} MiB a JSON input may have", size,
                                           kMaxJsonFileBytes >> 20));
  return parse_json_text(read_text_file(path), path);
}

namespace {
std::string type_name(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}
std::string shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}
std::string range_text(Range r) {
  if (r.min == -std::numeric_limits<double>::infinity() || r.min <= -1e300) return fmt::format("<= {:g}", r.max);
  return fmt::format("{} {:g} and <= {:g}", r.min_exclusive ? ">" : ">=", r.min, r.max);
}
// A default quantity in the suffix a person would write it in (the largest that keeps it >= 1).
std::string quantity_text(std::string_view base, units::Dimension d, double si) {
  const auto& all = units::suffixes(d);
  const units::Suffix* best = &all.front();
  for (const auto& s : all)
    if (s.suffix != "min" && s.suffix != "hours" && s.suffix != "days" && s.suffix != "MB" && s.suffix != "GB" &&
        s.suffix != "Gbps" && si != 0 && std::fabs(si) / s.to_si >= 1 && s.to_si > best->to_si)
      best = &s;
  return fmt::format("{}_{} = {:g}", base, best->suffix, si / best->to_si);
}
std::string unit_text(std::string_view base, units::Dimension d) {
  std::vector<std::string> names;
  for (const auto& s : units::suffixes(d)) names.push_back(std::string(base) + "_" + std::string(s.suffix));
  return fmt::format("{}", fmt::join(names, ", "));
}
}  // namespace

void Reader::declare(std::string_view key, const char* type, std::string range, std::string fallback, bool required,
                     std::vector<std::string> choices, std::string unit) const {
  KeyCatalog::note(KeyDeclaration{"", pointer(key), type, std::move(unit), std::move(range), std::move(choices),
                                  std::move(fallback), required, ""});
}

Reader::Reader(const Json& object, std::string pointer, std::shared_ptr<const Origins> origins)
    : object_(object), pointer_(std::move(pointer)), origins_(std::move(origins)) {
  if (!object_.is_object()) fail_here(fmt::format("expected an object, got {} {}", type_name(object_), shown(object_)));
}

void Reader::fail_here(const std::string& reason) const {
  throw InputError(origins_->file_for(pointer_), pointer_, reason);
}

void Reader::fail(std::string_view key, const std::string& reason) const {
  std::string p = pointer(key);
  throw InputError(origins_->file_for(p), p, reason);
}

bool Reader::has(std::string_view key) const { return object_.contains(std::string(key)); }

const Json* Reader::find(std::string_view key) {
  seen_.insert(std::string(key));
  auto it = object_.find(std::string(key));
  return it == object_.end() ? nullptr : &*it;
}

const Json& Reader::require(std::string_view key) {
  const Json* v = find(key);
  if (!v) fail(key, "required key is missing");
  return *v;
}

const Json& Reader::raw(std::string_view key) {
  if (KeyCatalog::listening()) declare(key, "any", "", "", true);
  return require(key);
}

double Reader::to_range(std::string_view key, double value, Range r, const std::string& text) const {
  bool low = r.min_exclusive ? !(value > r.min) : !(value >= r.min);
  if (!std::isfinite(value) || low || value > r.max)
    fail(key, fmt::format("{} is out of range: must be {} {:g} and <= {:g}", text, r.min_exclusive ? ">" : ">=", r.min,
                          r.max));
  return value;
}

std::int64_t Reader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  if (KeyCatalog::listening()) declare(key, "integer", fmt::format("{} to {}", min, max), "", true);
  const Json& v = require(key);
  bool integral = v.is_number_integer() || v.is_number_unsigned() ||
                  (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
                   std::fabs(v.get<double>()) < 9e15);
  if (!v.is_number()) fail(key, fmt::format("expected an integer, got {} {}", type_name(v), shown(v)));
  if (!integral) {
    double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d)  // e.g. 1e30: integral but absurd
      fail(key, fmt::format("{} is out of range: must be between {} and {}", shown(v), min, max));
    fail(key, fmt::format("expected an integer, got {}", shown(v)));
  }
  double d = v.get<double>();
  if (d < static_cast<double>(min) || d > static_cast<double>(max))
    fail(key, fmt::format("{} is out of range: must be between {} and {}", shown(v), min, max));
  return static_cast<std::int64_t>(d);
}

std::int64_t Reader::integer(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t fallback) {
  if (KeyCatalog::listening()) declare(key, "integer", fmt::format("{} to {}", min, max), std::to_string(fallback), false);
  return has(key) ? integer(key, min, max) : (seen_.insert(std::string(key)), fallback);
}

double Reader::number(std::string_view key, Range r) {
  if (KeyCatalog::listening()) declare(key, "number", range_text(r), "", true);
  const Json& v = require(key);
  if (!v.is_number()) fail(key, fmt::format("expected a number, got {} {}", type_name(v), shown(v)));
  return to_range(key, v.get<double>(), r, shown(v));
}

double Reader::number(std::string_view key, Range r, double fallback) {
  if (KeyCatalog::listening()) declare(key, "number", range_text(r), fmt::format("{:g}", fallback), false);
  return has(key) ? number(key, r) : (seen_.insert(std::string(key)), fallback);
}

bool Reader::boolean(std::string_view key, bool fallback) {
  if (KeyCatalog::listening()) declare(key, "boolean", "", fallback ? "true" : "false", false);
  const Json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("expected true or false, got {} {}", type_name(*v), shown(*v)));
  return v->get<bool>();
}

std::string Reader::text(std::string_view key) {
  if (KeyCatalog::listening()) declare(key, "string", "", "", true);
  const Json& v = require(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, got {} {}", type_name(v), shown(v)));
  return v.get<std::string>();
}

std::string Reader::text(std::string_view key, const std::string& fallback) {
  if (KeyCatalog::listening()) declare(key, "string", "", Json(fallback).dump(), false);
  return has(key) ? text(key) : (seen_.insert(std::string(key)), fallback);
}

std::string Reader::choice(std::string_view key, const std::vector<std::string>& allowed) {
  if (KeyCatalog::listening()) declare(key, "string", "", "", true, allowed);
  std::string s = text(key);
  for (const auto& a : allowed)
    if (a == s) return s;
  fail(key, fmt::format("\"{}\" is not one of: {}", s, fmt::join(allowed, ", ")));
}

std::string Reader::choice(std::string_view key, const std::vector<std::string>& allowed, const std::string& fallback) {
  if (KeyCatalog::listening()) declare(key, "string", "", Json(fallback).dump(), false, allowed);
  return has(key) ? choice(key, allowed) : (seen_.insert(std::string(key)), fallback);
}

std::optional<double> Reader::optional_quantity(std::string_view base, units::Dimension d, Range si) {
  if (KeyCatalog::listening()) declare(base, "quantity", range_text(si) + " (SI)", "", false, {}, unit_text(base, d));
  std::optional<double> out;
  std::string found;
  for (const auto& s : units::suffixes(d)) {
    std::string key = std::string(base) + "_" + std::string(s.suffix);
    seen_.insert(key);  // known, given or not: finish() suggests it for a misspelling
    if (!has(key)) continue;
    if (out) fail(key, fmt::format("gives {} a second time (already set by {})", base, found));
    const Json& v = require(key);
    if (!v.is_number()) fail(key, fmt::format("expected a number, got {} {}", type_name(v), shown(v)));
    Range r{si.min / s.to_si, si.max / s.to_si, si.min_exclusive};
    out = physical(key, d, s.to_si, to_range(key, v.get<double>(), r, shown(v)));
    found = key;
  }
  return out;
}

double Reader::physical(std::string_view key, units::Dimension d, double to_si, double value) const {
  const auto& span = units::physical_span(d);
  const double si = value * to_si;
  if (si != 0 && !(std::fabs(si) >= span.min && std::fabs(si) <= span.max))
    fail(key, fmt::format("{:g} is not {} any hardware has: {} must be between {:g} and {:g}", value, span.what, key,
                          span.min / to_si, span.max / to_si));
  return si;
}

double Reader::number_in(std::string_view key, units::Dimension d, double to_si, Range r) {
  return physical(key, d, to_si, number(key, r));
}

double Reader::quantity(std::string_view base, units::Dimension d, Range si) {
  if (KeyCatalog::listening()) declare(base, "quantity", range_text(si) + " (SI)", "", true, {}, unit_text(base, d));
  if (auto v = optional_quantity(base, d, si)) return *v;
  std::vector<std::string> names;
  for (const auto& s : units::suffixes(d)) names.push_back(std::string(base) + "_" + std::string(s.suffix));
  fail(base, fmt::format("required key is missing (one of: {})", fmt::join(names, ", ")));
}

double Reader::quantity(std::string_view base, units::Dimension d, Range si, double fallback_si) {
  if (KeyCatalog::listening()) declare(base, "quantity", range_text(si) + " (SI)", quantity_text(base, d, fallback_si), false, {}, unit_text(base, d));
  return optional_quantity(base, d, si).value_or(fallback_si);
}

Reader Reader::object(std::string_view key) {
  if (KeyCatalog::listening()) declare(key, "object", "", "", true);
  return Reader(require(key), pointer(key), origins_);
}

std::optional<Reader> Reader::optional_object(std::string_view key) {
  if (KeyCatalog::listening()) declare(key, "object", "", "", false);
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return Reader(*v, pointer(key), origins_);
}

Reader Reader::section(std::string_view key) {
  static const Json empty = Json::object();
  if (auto r = optional_object(key)) return std::move(*r);
  return Reader(empty, pointer(key), origins_);
}

void Reader::document(std::string_view key, std::string doc) const { KeyCatalog::note_doc(pointer(key), std::move(doc)); }

void Reader::finish() const {
  for (const auto& [key, value] : object_.items())
    if (!seen_.contains(key)) fail(key, "unknown key" + did_you_mean(key, {seen_.begin(), seen_.end()}));
}

std::vector<std::pair<double, double>> Reader::efficiency_points(std::string_view key) {
  if (KeyCatalog::listening()) declare(key, "array", "[[size, efficiency], ...]: sizes increasing, 0 < efficiency <= 1", "", true);
  std::vector<std::pair<double, double>> out;
  const Json& pts = raw(key);
  auto bad = [&] { fail(key, "expected [[size, efficiency], ...] with sizes increasing and 0 < efficiency <= 1"); };
  if (!pts.is_array() || pts.empty()) bad();
  for (const auto& p : pts) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) bad();
    const double x = p[0].get<double>(), e = p[1].get<double>();
    if (!(x > 0) || !(e > 0) || e > 1 || !std::isfinite(x) || (!out.empty() && x <= out.back().first)) bad();
    out.emplace_back(x, e);
  }
  return out;
}

}  // namespace dtsim
