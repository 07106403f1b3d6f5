// Which scenarios the closed form prices, and the first thing that sends one to the replay.
#include "sim/cost/comm_interference.hpp"
#include "sim/results/closed_form.hpp"
#include "strategies/unit.hpp"

namespace dtsim::results {

using strategies::Recompute;

std::string closed_form_gap(const config::Scenario& s) {
  const auto& p = s.parallelism;
  // A whitelist: what is not named here is replayed. The planner's mechanism units answer for
  // themselves (strategies/unit.hpp), each at its place in this order.
  const auto units = strategies::make_units(p);
  if (!p.schedule->closed_form) return "pipeline schedule";
  if (auto why = strategies::replay_only(units, "async-updates", p); !why.empty()) return why;
  if (auto why = strategies::replay_only(units, "zero", p); !why.empty()) return why;
  if (p.recompute == Recompute::Stage) return "stage recomputation";
  if (auto why = strategies::replay_only(units, "optimizer-offload", p); !why.empty()) return why;
  if (auto why = strategies::replay_only(units, "activation-offload", p); !why.empty()) return why;
  if (p.context > 1) return "context parallelism";
  if (auto why = strategies::replay_only(units, "experts", p); !why.empty()) return why;
  if (s.training.precision == strategies::Precision::Fp8) return "FP8";
  if (auto why = strategies::replay_only(units, "framework-zero3", p); !why.empty()) return why;
  // The framework's pipeline engine and collectives, with or without its ZeRO-3.
  if (p.framework.framework != strategies::Framework::MegatronLM) return "framework behaviour (deepspeed, fsdp)";
  if (p.compression != strategies::Compression::None) return "gradient compression";
  if (auto why = strategies::replay_only(units, "input-loader", p); !why.empty()) return why;
  if (p.all_replicas || p.backup_workers > 0 || s.stragglers.enabled) return "every replica simulated";
  if (!p.stage_blocks.empty()) return "uneven stage layers";
  if (auto why = strategies::replay_only(units, "priority-buckets", p); !why.empty()) return why;
  if (p.blocking_p2p) return "blocking stage-to-stage sends";
  if (s.roles.chief) return "chief checkpoints";
  if (s.steps_simulated != 1) return "several simulated steps";
  if (!s.stragglers.throttles.empty() || !s.stragglers.flapping_links.empty()) return "time-varying hardware";
  // Compute beside a collective runs on the SMs it leaves (sim/cost/comm_interference.hpp): the
  // replay follows which collectives are in flight when.
  if (cost::comm_sm_share(s.device) > 0) return "communication interference";
  // Any other unit the strategy uses, until the closed form is taught it.
  for (const auto& u : units)
    if (auto why = u->replay_only(p); !why.empty()) return why;
  return "";
}

}  // namespace dtsim::results
