#pragma once
// Communication-computation interference (issue 30): a collective's kernels hold SMs while they
// run, and compute on the same GPU runs on the others. NCCL launches one CTA per channel and its
// CTAs never share an SM with a compute kernel (NVIDIA/nccl issue #689, maintainer; calibration
// comm_interference.json comm-001, comm-003). What a kernel loses to the SMs taken depends on the
// kernel (this project's H200 timings, docs/gpu_check.md "Kernel microbenchmarks on the H200"): a
// GEMM's tile waves stretch, streams barely notice. The replays apply one rate per scenario, the
// step's kernels' (ReplayInput::comm_core_share); the breakdown books what compute lost as
// `comm_interference`.
#include <string>
#include <vector>

#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// SMs the device's stack gives its collectives: the stack's own count, or the device profile's
// nccl_sms for kDeviceCommSms; 0 when the stack models none.
int comm_sms(const DeviceProfile& d);
// `sms` as a share of the device's SMs; 0 when the profile names no sm_count.
double sm_share(const DeviceProfile& d, int sms);
// The share of its SMs a GPU's compute loses while one of its collectives is in flight.
double comm_sm_share(const DeviceProfile& d);

// How much longer kernel `k` runs while `sms` of the device's SMs are held (1: no longer).
double kernel_slowdown(const DeviceProfile& d, const models::Kernel& k, int sms);

// The share of compute a GPU loses while one of its collectives is in flight, over the step's
// kernels: 1 - (their time alone) / (their time beside the collective), each work's kernels counted
// once per compute task that runs them. 0 where the stack models no interference.
double comm_kernel_share(const DeviceProfile& d, const taskgraph::TaskGraph& g, const std::string& dtype);

}  // namespace dtsim::cost
