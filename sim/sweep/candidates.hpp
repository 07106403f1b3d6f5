#pragma once
// What `dtsim sweep` enumerates: the clusters it plans for, the candidate strategies on each, and
// the scenario file it writes for the winner.
#include <string>
#include <vector>

#include "sim/config/scenario.hpp"

namespace dtsim::sweep {

// One cluster the sweep plans for: a GPU count on one device.
struct Cluster {
  int gpus = 0;
  std::string device;  // the profile's file name, as --devices and hardware.device give it
  config::Scenario base;
};

struct Candidate {
  std::size_t cluster = 0;  // index into the clusters
  std::size_t index = 0;    // in the whole sweep's enumeration (duplicates dropped), shard or not
  strategies::ParallelismSpec p;
  strategies::Precision precision = strategies::Precision::Bf16;
  // Its precision shows in its name: FP8, or any precision but the first the sweep tries (so
  // "--precisions bf16,fp16" tells the two apart while a one-precision sweep names none).
  bool precision_named = false;
  double step = 0, samples_per_s = 0, mfu = 0, peak = 0;
  double price = 0, cost_per_million_tokens = 0;  // USD; 0: no price known
  double time_to_train = 0, gpu_hours = 0, cost = 0;  // 0: the scenario gives no training length
  double energy_kwh = 0;                              // 0: no training length
  double capacity = 0;                                // the device memory `fits` is checked against, bytes
  bool fits = false, valid = false;
  bool replayed = false;  // priced by the analytical replay; else by the closed form
  double estimate = 0;    // the closed form's step time, for a candidate replayed to confirm it
  std::string error;  // why it could not be simulated
};

std::string describe(const strategies::ParallelismSpec& p, strategies::Precision precision);
std::string describe(const Candidate& c);
std::string precision_name(strategies::Precision p);
std::vector<Candidate> enumerate(const config::Scenario& s, const std::vector<strategies::Precision>& precisions);
// `flag`'s comma-separated list; an empty item is an input error naming the flag.
std::vector<std::string> split_list(const std::string& text, const std::string& flag);
std::vector<strategies::Precision> parse_precisions(const std::string& text, strategies::Precision scenario);
std::vector<int> parse_gpus(const std::string& text);
// The scenario re-planned for `gpus` GPUs of `device` (nullptr: the scenario's own device).
config::Scenario on_cluster(const config::Scenario& scenario, int gpus, const cost::DeviceProfile* device);
std::string device_stem(const cost::DeviceProfile& d);
// The scenario file as written, with the winner's device, cluster size and parallelism set.
std::string best_scenario(const std::string& path, const Cluster& c, const strategies::ParallelismSpec& p,
                          strategies::Precision precision);

}  // namespace dtsim::sweep
