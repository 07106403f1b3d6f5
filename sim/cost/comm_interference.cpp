#include "sim/cost/comm_interference.hpp"

#include <algorithm>

namespace dtsim::cost {

int comm_sms(const DeviceProfile& d) { return d.stack.comm_sms == kDeviceCommSms ? d.nccl_sms : d.stack.comm_sms; }

double sm_share(const DeviceProfile& d, int sms) {
  if (d.sm_count <= 0 || sms <= 0) return 0.0;
  return std::min(0.95, static_cast<double>(sms) / d.sm_count);  // the stack key refuses more (stack_config.cpp)
}

double comm_sm_share(const DeviceProfile& d) { return sm_share(d, comm_sms(d)); }

}  // namespace dtsim::cost
