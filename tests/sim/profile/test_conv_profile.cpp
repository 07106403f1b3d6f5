// The CPU profiler runs real convolutions (im2col and Eigen GEMMs) and lists them in the table.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/cost/roofline.hpp"
#include "sim/profile/cpu_profiler.hpp"

using namespace dtsim;

TEST(CpuConv, Im2colConvolutionMatchesTheDefinition) {
  // 2 images, 4 channels of 7 x 6, 6 filters of 3 x 2 in 2 groups, stride 2 x 1, padding 1 x 0.
  const models::ConvShape c{2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 2};
  std::vector<float> x(static_cast<std::size_t>(2 * 4 * 7 * 6)), w(static_cast<std::size_t>(6 * 2 * 3 * 2));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
  const auto y = profile::conv2d(x, w, c);
  ASSERT_EQ(c.p(), 4);
  ASSERT_EQ(c.q(), 5);
  ASSERT_EQ(y.size(), static_cast<std::size_t>(2 * 6 * 4 * 5));
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 6; ++k)
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 5; ++q) {
          const int g = k / 3;
          double sum = 0;
          for (int ch = 0; ch < 2; ++ch)
            for (int r = 0; r < 3; ++r)
              for (int s = 0; s < 2; ++s) {
                const int h = p * 2 - 1 + r, wi = q - 0 + s;
                if (h < 0 || h >= 7 || wi < 0 || wi >= 6) continue;
                sum += x[static_cast<std::size_t>(((n * 4 + g * 2 + ch) * 7 + h) * 6 + wi)] *
                       w[static_cast<std::size_t>(((k * 2 + ch) * 3 + r) * 2 + s)];
              }
          EXPECT_NEAR(y[static_cast<std::size_t>(((n * 6 + k) * 4 + p) * 5 + q)], sum, 1e-4);
        }
}

TEST(CpuConv, ProfileTimesEveryConvolutionPass) {
  const models::ConvShape c{2, 16, 14, 14, 32, 3, 3, 2, 2, 1, 1, 1};
  std::vector<models::Kernel> kernels;
  for (auto pass : {models::ConvPass::Forward, models::ConvPass::Dgrad, models::ConvPass::Wgrad})
    kernels.push_back(models::conv_kernel("conv", c, pass, 4));
  profile::Options o;
  o.repeats = 1;
  cost::DeviceProfile d;
  d.name = "this-cpu";
  d.peak_flops = {{"fp32", 1e11}};
  d.hbm_bandwidth = 1e10;
  d.kernels = profile::profile_cpu(kernels, o);
  ASSERT_EQ(d.kernels->convs.size(), 3u);
  for (const auto& k : kernels) {
    const auto [seconds, source] = cost::price_kernel(d, k, "fp32");
    EXPECT_EQ(source, cost::PriceSource::Exact);
    EXPECT_GT(seconds, 0.0);
  }
}
