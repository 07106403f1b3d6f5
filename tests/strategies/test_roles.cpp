// TensorFlow's cluster roles: a chief that also checkpoints, an evaluator that reads them.
#include <gtest/gtest.h>

#include "scenario_helpers.hpp"

using namespace dtsim;

namespace {

// GPT-2 small on 8 GPUs (the shared base), analytical backend, with `roles` as cluster.roles.
results::Result run(const std::string& roles) {
  return test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "cluster": {)" +
                                  (roles.empty() ? std::string() : R"("roles": )" + roles) + "}}");
}

double parts(const replay::Breakdown& b) {
  return b.compute + b.exposed_communication + b.pipeline_bubble + b.optimizer + b.straggler_wait + b.input_stall +
         b.checkpoint;
}

}  // namespace

// A 1 GB checkpoint every 100 steps at 0.5 GB/s: 2 s per save, 0.02 s per step that every worker waits.
TEST(Roles, ChiefCheckpointStallsEveryWorkerAmortisedPerStep) {
  const auto base = run("");
  const auto r = run(R"({"chief": {"checkpoint_every_steps": 100, "checkpoint_GB": 1, "storage_bandwidth_GBps": 0.5}})");
  ASSERT_TRUE(r.roles);
  EXPECT_DOUBLE_EQ(r.roles->save_s, 2.0);
  EXPECT_NEAR(r.roles->stall_per_step_s, 0.02, 1e-12);
  EXPECT_NEAR(r.step_time_s - base.step_time_s, 0.02, 1e-12);
  EXPECT_NEAR(r.breakdown.checkpoint, 0.02, 1e-12);
  EXPECT_NEAR(parts(r.breakdown), r.step_time_s, 1e-9);
  EXPECT_NEAR(r.samples_per_s, 64 / (base.step_time_s + 0.02), 1e-6);
  // Without roles there is no checkpoint part and no "roles" in result.json.
  EXPECT_EQ(base.breakdown.checkpoint, 0.0);
  EXPECT_FALSE(results::to_json(base, false).contains("roles"));
  EXPECT_EQ(results::to_json(r, false)["breakdown_s"]["checkpoint"].get<double>(), r.breakdown.checkpoint);
}

// Without checkpoint_GB the chief saves its weights and optimizer state as the memory plan counts them.
TEST(Roles, CheckpointDefaultsToTheModelState) {
  const auto r = run(R"({"chief": {"checkpoint_every_steps": 10, "storage_bandwidth_GBps": 2}})");
  ASSERT_TRUE(r.roles);
  const double state = r.memory.params + r.memory.optimizer;
  EXPECT_GT(state, 124e6 * 4);  // GPT-2 small's 124 M parameters at 4 bytes and more
  EXPECT_DOUBLE_EQ(r.roles->checkpoint_bytes, state);
  EXPECT_NEAR(r.roles->stall_per_step_s, state / 2e9 / 10, 1e-12);
}

// The evaluator reads each 1 GB checkpoint back at 0.5 GB/s (2 s). Saving every step leaves it
// less than 2 s between saves, so on shared storage the next save waits for the rest of the
// read: stall = 2 + (2 - t) per step, t the step without checkpoints. On its own storage, none.
TEST(Roles, EvaluatorSlowsSavesOnlyWhenItSharesTheStorageAndOutlastsTheSteps) {
  const auto base = run("");
  const double t = base.step_time_s;
  ASSERT_LT(t, 2.0);
  const std::string chief = R"("chief": {"checkpoint_every_steps": 1, "checkpoint_GB": 1, "storage_bandwidth_GBps": 0.5})";
  const auto shared = run("{" + chief + R"(, "evaluator": {}})");
  ASSERT_TRUE(shared.roles);
  EXPECT_DOUBLE_EQ(shared.roles->evaluator_read_s, 2.0);
  EXPECT_NEAR(shared.roles->wait_for_storage_s, 2.0 - t, 1e-12);
  EXPECT_NEAR(shared.step_time_s, t + 2.0 + (2.0 - t), 1e-9);
  EXPECT_NEAR(parts(shared.breakdown), shared.step_time_s, 1e-9);
  // Reads are 1 GB per save period: 1 GB / 4 s.
  EXPECT_NEAR(shared.roles->storage_read_GBps, 0.25, 1e-9);
  const auto own = run("{" + chief + R"(, "evaluator": {"shares_storage": false}})");
  EXPECT_NEAR(own.step_time_s, t + 2.0, 1e-9);
  // Saves 1,000 steps apart leave the evaluator time to finish: it costs the workers nothing.
  const auto rare = run(R"({"chief": {"checkpoint_every_steps": 1000, "checkpoint_GB": 1, "storage_bandwidth_GBps": 0.5},
                             "evaluator": {}})");
  EXPECT_NEAR(rare.step_time_s, t + 2.0 / 1000, 1e-9);
}

TEST(Roles, InputErrors) {
  auto error = [](const std::string& roles, const std::string& extra = "") {
    return test::input_error_over_base(R"({"extends": "base.json", "cluster": {"roles": )" + roles + "}" + extra + "}");
  };
  EXPECT_EQ(error(R"({"evaluator": {}})"), "/cluster/roles/evaluator: an evaluator reads the chief's checkpoints: give cluster.roles.chief");
  EXPECT_NE(error(R"({"chief": {"checkpoint_every_steps": 0, "storage_bandwidth_GBps": 1}})").find("/cluster/roles/chief/checkpoint_every_steps"),
            std::string::npos);
  EXPECT_NE(error(R"({"chief": {"checkpoint_every_steps": 5}})").find("storage_bandwidth"), std::string::npos);
  EXPECT_NE(error(R"({"chief": {"checkpoint_every_steps": 5, "storage_bandwidth_GBps": 1}})",
                  R"(, "parallelism": {"data": 4, "tensor": 2, "micro_batch_size": 4})")
                .find("give checkpoint_GB"),
            std::string::npos);
}
