#include "sim/profile/cuda_timing.hpp"

#include <stdexcept>

// Built without CUDA: nothing can be timed on a GPU.
namespace dtsim::profile::cuda {

bool probe(DeviceInfo&, std::string& why) {
  why = "this dtsim was built without CUDA (configure with -DDTSIM_CUDA=ON where the toolkit is installed)";
  return false;
}

double time_gemm(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const std::string&, int, int) {
  throw std::logic_error("built without CUDA");
}

double time_stream(double, int, int) { throw std::logic_error("built without CUDA"); }

}  // namespace dtsim::profile::cuda
