#include "sim/calibrate/profile_io.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>

#include "sim/calibrate/text_input.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::calibrate {

namespace {

// A preset's file, or the file the value names; InputError at `flag` for an unknown preset.
std::string profile_file(const std::string& value, const std::string& sub, const std::string& what, const std::string& flag) {
  if (names_a_file(value)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(value, ec)) throw InputError("", flag, fmt::format("file \"{}\" not found", value));
    return value;
  }
  const auto known = list_json_stems(sub);
  if (std::find(known.begin(), known.end(), value) == known.end())
    throw InputError("", flag, fmt::format("unknown {} \"{}\"{} (known: {}; or a file's path, e.g. ./mine.json)", what, value.substr(0, 64),
                                           did_you_mean(value, known), fmt::join(known, ", ")));
  return data_dir() + "/" + sub + "/" + value + ".json";
}

// The profile's JSON with its keys in the file's order (parse_json_file has checked it).
nlohmann::ordered_json ordered(const std::string& file) {
  (void)parse_json_file(file);  // duplicate keys, depth, size: refused with their pointer
  return nlohmann::ordered_json::parse(read_text_file(file));
}

network::ClusterSpec cluster_of(const nlohmann::ordered_json& doc, const std::string& file, const std::string& name) {
  const Json plain = Json::parse(doc.dump());
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  Reader top(plain, "", origins);
  top.ignore("description");
  top.ignore("source");
  top.raw("cluster");
  top.finish();
  Json c = plain["cluster"];
  if (!c.is_object()) throw InputError(file, "/cluster", "expected an object");
  c["nodes"] = 1;
  config::Roles roles;
  return config::parse_cluster(Reader(c, "/cluster", origins), name, roles);
}

}  // namespace

BaseCluster load_base_cluster(const std::string& value, const std::string& flag) {
  BaseCluster b;
  b.file = profile_file(value, "hardware_profiles/clusters", "cluster", flag);
  b.doc = ordered(b.file);
  b.spec = cluster_of(b.doc, b.file, std::filesystem::path(b.file).stem().string());
  return b;
}

BaseDevice load_base_device(const std::string& value, const std::string& flag) {
  BaseDevice b;
  b.file = profile_file(value, "hardware_profiles", "device", flag);
  b.doc = ordered(b.file);
  b.profile = config::load_device_profile_file(b.file);
  return b;
}

void set_quantity(nlohmann::ordered_json& object, const std::string& base, units::Dimension d, double si,
                  const std::string& default_suffix) {
  for (const auto& s : units::suffixes(d)) {
    const std::string key = base + "_" + std::string(s.suffix);
    if (object.contains(key)) {
      object[key] = rounded(si / s.to_si);
      return;
    }
  }
  for (const auto& s : units::suffixes(d))
    if (s.suffix == default_suffix) object[base + "_" + default_suffix] = rounded(si / s.to_si);
}

std::string calibrated_cluster(const BaseCluster& base, const CollectiveFit& fit, const std::string& note) {
  using units::Dimension;
  nlohmann::ordered_json doc = base.doc;
  for (const auto& t : fit.tiers) {
    const bool intra = t.tier == Tier::IntraNode;
    auto& o = doc["cluster"][intra ? "intra_node" : "inter_node"];
    if (t.bandwidth_fitted) set_quantity(o, intra ? "bandwidth" : "nic_bandwidth", Dimension::Bandwidth, t.bandwidth, "GBps");
    if (t.latency_fitted) set_quantity(o, "latency", Dimension::Time, t.latency_s, "us");
  }
  const std::string was = doc.contains("source") && doc["source"].is_string() ? doc["source"].get<std::string>() + " " : "";
  doc["source"] = was + note;
  try {
    (void)cluster_of(doc, "the calibrated cluster", "calibrated");  // it must load as a preset does
  } catch (const InputError& e) {
    throw std::runtime_error("the calibrated cluster profile does not load: " + std::string(e.what()));
  }
  return doc.dump(2) + "\n";
}

}  // namespace dtsim::calibrate

namespace dtsim::calibrate {

std::string calibrated_name(const std::string& base_file) {
  return std::filesystem::path(base_file).stem().string() + "-calibrated";
}

std::string calibrated_device(const BaseDevice& base, const KernelFit& fit, const std::string& name,
                              const std::map<std::string, std::string>& notes) {
  nlohmann::ordered_json doc = base.doc;
  doc["name"] = name;
  const std::string was = doc.contains("description") && doc["description"].is_string() ? doc["description"].get<std::string>() : "";
  doc["description"] = was + (was.empty() ? "" : " ") + "(calibrated by dtsim calibrate)";
  for (const auto& c : fit.curves) {
    if (!c.fitted) continue;
    if (c.key == "attention.flash_efficiency") {
      doc["attention"]["flash_efficiency"] = c.max;
      doc["sources"]["attention"] = notes.at(c.key);
      continue;
    }
    auto& curve = doc[c.key];
    curve["max"] = c.max;
    curve["half_flops"] = c.half;
    curve.erase("points");
    doc["sources"][c.key] = notes.at(c.key);
  }
  // It must load as any device profile does: written beside nothing, read back from text.
  const std::string text = doc.dump(2) + "\n";
  const std::string check = std::filesystem::temp_directory_path() / fmt::format("dtsim-calibrated-{}.json", ::getpid());
  write_file_atomic(check, text);
  try {
    (void)config::load_device_profile_file(check);
  } catch (const InputError& e) {
    std::filesystem::remove(check);
    throw std::runtime_error("the calibrated device profile does not load: " + e.reason());
  }
  std::filesystem::remove(check);
  return text;
}

}  // namespace dtsim::calibrate
