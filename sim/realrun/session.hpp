#pragma once
// `dtsim realrun` as one call: worker processes train an MLP for real over loopback TCP (or a
// link shaped with network namespaces), then the same step is predicted from kernels profiled on
// this machine and replayed on SimGrid. The command line only parses the flags and prints this.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/realrun/comm.hpp"
#include "sim/realrun/speed_check.hpp"
#include "sim/realrun/trainer.hpp"

namespace dtsim::realrun {

struct SessionOptions {
  int workers = 2, steps = 10, warmup = 2, timeout_s = 120, repeats = 3;
  std::int64_t micro_batch = 1;
  std::string model = "tiny-gpt", algorithm = "ring";  // algorithm: ring or parameter-server
  double bandwidth_gbps = 0;                            // 0: loopback as it is, else a link shaped to this rate
};

struct Measured {
  double step_s = 0, allreduce_s = 0, compute_s = 0;
  // What the compute's wall time was made of: CPU time the slowest worker got (the rest, other
  // processes had its core), and how much later than the first the last worker's gradients were ready.
  double compute_cpu_s = 0, compute_spread_s = 0;
  std::vector<double> step_series, allreduce_series;
};

struct Predicted {
  double step_s = 0, allreduce_s = 0, compute_s = 0, update_s = 0;
  std::string backend;
};

// What was measured and predicted, and under what conditions.
struct Comparison {
  MlpShape shape;
  int threads = 1;  // per worker
  bool shaping = false;
  LinkMeasure link;
  Measured measured;
  Predicted predicted;
  SpeedCheck speed;
  double load_before = 0, load_during = 0;  // load average before and after training
  int cpus = 1;
  bool table_noisy = false;  // the kernel table was marked noisy when profiled
  bool cold = false;         // the kernels were timed with cold caches
  double working_set = 0, llc = 0;  // bytes: the workers' step, the last-level cache
};

// The run failed at run time (a worker, the network, a timeout): exit 1. Bad options are an InputError.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Comparison train_and_predict(const SessionOptions& o);

// Internal steps of train_and_predict, in the order it takes them (sim/realrun/real_run.cpp, prediction.cpp).
struct RealRun {
  LinkMeasure link;
  Measured measured;
  double load_during = 0;
};
int online_cpus();
std::string dims_arg(const MlpShape& shape);  // "in,hidden,...,out", as realrun-worker's --dims
double load_average();
// Refuses, before anything starts, options this machine cannot run (InputError).
MlpShape check_session(const SessionOptions& o);
RealRun train(const SessionOptions& o, const MlpShape& shape, int threads, double deadline_s);
// Fills c.predicted, c.speed and the kernel table's conditions.
void predict(const SessionOptions& o, const RealRun& run, Comparison& c);

}  // namespace dtsim::realrun
