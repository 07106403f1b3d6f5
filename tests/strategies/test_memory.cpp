#include <gtest/gtest.h>

#include <algorithm>

#include "sim/core/json_reader.hpp"
#include "strategies/memory.hpp"

using namespace dtsim;

TEST(Memory, PlainDataParallelModelStatesAre16BytesPerParameter) {
  // ZeRO (Rajbhandari et al. 2020) Table 1: 7.5 B parameters, no partitioning: 120 GB.
  auto m = strategies::model_state_memory(7.5e9, strategies::Precision::Bf16, models::OptimizerKind::Adam, 0, 64);
  EXPECT_DOUBLE_EQ(m.params + m.gradients + m.optimizer, 120e9);
}

TEST(Memory, ZeroStagesMatchZeroPaperTable1) {
  // Every cell of Table 1 (GB as printed, 1 GB = 1e9 bytes), within 2 % or the printed rounding
  // (0.12 GB is printed for 0.117).
  Json t = parse_json_file(std::string(DTSIM_TEST_DATA) + "/zero_table1_model_state_memory.json");
  int cells = 0;
  for (const auto& row : t["rows"]) {
    double params = row["params"].get<double>();
    int nd = row["dp_degree"].get<int>();
    const std::pair<const char*, int> stages[] = {
        {"per_device_model_state_GB_P_os", 1}, {"per_device_model_state_GB_P_os_g", 2}, {"per_device_model_state_GB_P_os_g_p", 3}};
    for (auto [key, stage] : stages) {
      auto m = strategies::model_state_memory(params, strategies::Precision::Fp16, models::OptimizerKind::Adam, stage, nd);
      double got = (m.params + m.gradients + m.optimizer) / 1e9;
      double printed = row[key].get<double>();
      EXPECT_NEAR(got, printed, std::max(0.02 * printed, 0.005)) << row["model"] << " Nd=" << nd << " " << key;
      ++cells;
    }
  }
  EXPECT_EQ(cells, 54);
}

TEST(Memory, Fp32AdamAlsoKeeps16BytesPerParameter) {
  auto m = strategies::model_state_memory(1e9, strategies::Precision::Fp32, models::OptimizerKind::Adam, 0, 1);
  EXPECT_DOUBLE_EQ(m.params, 4e9);
  EXPECT_DOUBLE_EQ(m.gradients, 4e9);
  EXPECT_DOUBLE_EQ(m.optimizer, 8e9);
}
