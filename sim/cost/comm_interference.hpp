#pragma once
// Communication-computation interference (issue 30): a collective's kernels hold SMs while they
// run, and compute on the same GPU runs on the others. NCCL launches one CTA per channel and its
// CTAs never share an SM with a compute kernel (NVIDIA/nccl issue #689, maintainer; calibration
// comm_interference.json comm-001, comm-003), so while any collective of a GPU is in flight its
// compute progresses at 1 - comm_sms / sm_count of its rate. The replays apply the rate
// (ReplayInput::comm_core_share); the breakdown books what compute lost as `comm_interference`.
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// SMs the device's stack gives its collectives: the stack's own count, or the device profile's
// nccl_sms for kDeviceCommSms; 0 when the stack models none.
int comm_sms(const DeviceProfile& d);
// `sms` as a share of the device's SMs; 0 when the profile names no sm_count.
double sm_share(const DeviceProfile& d, int sms);
// The share of its SMs a GPU's compute loses while one of its collectives is in flight.
double comm_sm_share(const DeviceProfile& d);

}  // namespace dtsim::cost
