// `dtsim list`: one line per entry, with what tells entries apart (a model's size, a device's peak
// and memory, a cluster's node and fabric, a scenario's model and GPUs).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace {

std::string model_line(const std::string& name) {
  const auto m = config::load_model_preset(name);
  const double params = m.build(models::BuildOptions{}).params();
  std::string out = fmt::format("{:<12} {:.2f} M parameters", m.kind(), params / 1e6);
  if (params >= 1e9) out += fmt::format(" ({:.1f}B)", params / 1e9);
  for (const auto& [key, value] : m.sizes()) out += fmt::format(", {} {}", key, value);
  return out;
}

std::string device_line(const std::string& name) {
  const auto d = config::load_device_profile(name);
  std::string dtype = d.peak_flops.contains("bf16") ? "bf16" : "fp32";
  std::string out = fmt::format("{:g} TFLOP/s {}, {:g} GiB at {:g} GB/s", d.peak_flops.at(dtype) / 1e12, dtype,
                                d.memory_bytes / (1024.0 * 1024 * 1024), d.hbm_bandwidth / 1e9);
  for (const char* low : {"fp8", "fp4"})  // the peaks a planner weighs FP8 training against
    if (d.peak_flops.contains(low)) out += fmt::format(", {:g} {}", d.peak_flops.at(low) / 1e12, low);
  if (d.power_w > 0) out += fmt::format(", {:g} W", d.power_w);
  if (d.price_per_gpu_hour_usd > 0) out += fmt::format(", ${:.2f}/GPU-hour", d.price_per_gpu_hour_usd);
  return out;
}

// A value with its unit as the JSON spells it: {"bandwidth_GBps": 450} -> "450 GBps".
std::string with_unit(const Json& obj, const std::string& base) {
  for (const auto& [k, v] : obj.items())
    if (k.rfind(base + "_", 0) == 0 && v.is_number()) return fmt::format("{:g} {}", v.get<double>(), k.substr(base.size() + 1));
  return "?";
}

std::string cluster_line(const std::string& name) {
  const Json doc = parse_json_file(data_dir() + "/hardware_profiles/clusters/" + name + ".json");
  const Json& c = doc.at("cluster");
  const Json intra = c.value("intra_node", Json::object()), inter = c.value("inter_node", Json::object());
  const std::string topology = inter.value("topology", std::string("one switch"));
  if (topology.rfind("torus", 0) == 0) {  // chips talk over their own links, not a switch or the NICs
    std::string dims;
    for (const auto& d : inter.value("dimensions", Json::array())) dims += (dims.empty() ? "" : " x ") + d.dump();
    return fmt::format("{} chips per host, {} ({}), {} links; set cluster.nodes and dimensions; sets no device (give "
                       "hardware.device)",
                       c.value("gpus_per_node", 0), topology, dims, with_unit(inter, "link_bandwidth"));
  }
  std::string out = fmt::format("{} GPUs per node, {} {} per GPU", c.value("gpus_per_node", 0),
                                intra.value("fabric", std::string("nvswitch")), with_unit(intra, "bandwidth"));
  out += fmt::format("; {} x {} NICs per node, {}", inter.value("nics_per_node", 1), with_unit(inter, "nic_bandwidth"),
                     topology);
  out += c.contains("nodes") ? fmt::format("; {} nodes", c["nodes"].get<int>()) : "; nodes: set cluster.nodes";
  // A cluster preset describes the machines' network; the GPU model is the scenario's hardware.device.
  return out + "; sets no device (give hardware.device)";
}

std::string scenario_line(const std::string& path) {
  if (!parse_json_file(path).contains("name")) return "a base for \"extends\" (no name: not run alone)";
  const auto s = config::load_scenario(path);
  const auto& p = s.parallelism;
  return fmt::format("{} on {} x {} (data {}, tensor {}, pipeline {})", s.model.name.empty() ? s.model_preset : s.model.name,
                     s.cluster.num_gpus(), s.device.name, p.data, p.tensor, p.pipeline);
}

// "name  description", or the reason it cannot be described: one bad file spoils no listing.
// `files`: each entry's file follows, so a user can see which preset a name reads and copy it.
template <class Describe>
void print(const std::vector<std::string>& names, const std::vector<std::string>& shown, Describe describe,
           const std::vector<std::string>& files = {}) {
  std::size_t width = 0;
  for (const auto& n : shown) width = std::max(width, n.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::string what;
    try {
      what = describe(names[i]);
    } catch (const std::exception& e) {
      what = fmt::format("(cannot be read: {})", e.what());
    }
    std::cout << fmt::format("{:<{}}  {}", shown[i], width, what);
    if (i < files.size()) std::cout << fmt::format("  [{}]", files[i]);
    std::cout << "\n";
  }
}

}  // namespace

int list(const std::string& what, bool files) {
  const auto where = [&](const std::vector<std::string>& names, const std::string& dir) {
    std::vector<std::string> out;
    if (files)
      for (const auto& n : names) out.push_back((std::filesystem::path(data_dir()) / dir / (n + ".json")).string());
    return out;
  };
  if (what == "models") {
    const auto names = list_json_stems("models/presets");
    print(names, names, model_line, where(names, "models/presets"));
  } else if (what == "devices") {
    const auto names = list_json_stems("hardware_profiles");
    print(names, names, device_line, where(names, "hardware_profiles"));
  } else if (what == "clusters") {
    const auto names = list_json_stems("hardware_profiles/clusters");
    print(names, names, cluster_line, where(names, "hardware_profiles/clusters"));
  } else {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(data_dir()) / "scenarios";
    std::vector<std::string> paths, shown;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it)
      if (it->is_regular_file() && it->path().extension() == ".json") paths.push_back(it->path().string());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) shown.push_back(fs::relative(p, root).string());
    print(paths, shown, scenario_line, files ? paths : std::vector<std::string>{});
  }
  return 0;
}

}  // namespace dtsim::cli
