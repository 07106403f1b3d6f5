#pragma once
// The base profiles a calibration starts from (a shipped preset's name or a file's path, as
// `hardware.device` and `cluster.preset` take them) and the calibrated files written from them:
// the base's own JSON, key order kept, with only the fitted values (and their sources) changed.
#include <nlohmann/json.hpp>
#include <map>
#include <string>

#include "sim/calibrate/kernel_fit.hpp"
#include "sim/calibrate/nccl_fit.hpp"
#include "sim/core/units.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/platform.hpp"

namespace dtsim::calibrate {

struct BaseCluster {
  std::string file;
  nlohmann::ordered_json doc;   // {"description", "source", "cluster": {...}}
  network::ClusterSpec spec;    // one node of it; calibrate sets the nodes each file used
};
struct BaseDevice {
  std::string file;
  nlohmann::ordered_json doc;
  cost::DeviceProfile profile;
};

// `value` names a preset (hardware_profiles/clusters/NAME.json, hardware_profiles/NAME.json) or a
// file; InputError at `flag` for an unknown name (with the nearest) or a file that does not load.
BaseCluster load_base_cluster(const std::string& value, const std::string& flag);
BaseDevice load_base_device(const std::string& value, const std::string& flag);

// Sets the quantity written under `base` + a unit suffix in `object` (bandwidth_GBps,
// latency_us...) to `si`, in the unit the object already uses, to 6 significant digits;
// "<base>_<default_suffix>" when it has none.
void set_quantity(nlohmann::ordered_json& object, const std::string& base, units::Dimension d, double si,
                  const std::string& default_suffix);

// The cluster profile text with the values `fit` fitted in place of the base's (those it kept are
// left as the base writes them), and `note` appended to its "source"; it loads as a cluster preset
// (checked before it is returned).
std::string calibrated_cluster(const BaseCluster& base, const CollectiveFit& fit, const std::string& note);

// The device profile text with the curves `fit` fitted (a fitted curve's measured "points" are
// dropped: its max and half_flops now describe every size), each fitted key's "sources" entry
// set to its note (by CurveFit::key), and `name` as its name; it loads as a device profile (checked).
std::string calibrated_device(const BaseDevice& base, const KernelFit& fit, const std::string& name,
                              const std::map<std::string, std::string>& notes);

// "h100-sxm-80gb-calibrated.json": the file name a calibrated profile is written under.
std::string calibrated_name(const std::string& base_file);

}  // namespace dtsim::calibrate
