// Issue 27 item 2: what `dtsim calibrate` reads. nccl-tests' text in the layouts its versions
// print, microbenchmark CSVs, a PyTorch profiler trace and step logs; bad input names the file,
// the line or JSON pointer, and the reason.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/calibrate/kernel_csv.hpp"
#include "sim/calibrate/nccl_tests_parse.hpp"
#include "sim/calibrate/step_log.hpp"
#include "sim/calibrate/trace_parse.hpp"
#include "sim/core/errors.hpp"

namespace {

using namespace dtsim;
using namespace dtsim::calibrate;
using test::TempDir;
const std::string kData = DTSIM_TEST_DATA "/calibrate";

// The InputError `f` throws, as "file:pointer: reason".
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// tests/data/calibrate/all_reduce_perf_8xh100.txt: nccl-tests 2.19.6's layout (src/util.cu),
// Azure's published 8 x H100 all-reduce (README.md there).
TEST(CalibrateNcclTests, TheCurrentLayoutReads) {
  const auto f = parse_nccl_tests(kData + "/all_reduce_perf_8xh100.txt");
  EXPECT_EQ(f.test, "all_reduce_perf");
  EXPECT_EQ(f.op_from, "its header");
  EXPECT_EQ(f.ranks(), 8);
  EXPECT_EQ(f.host_of_rank.front(), "nd-h100-v5");
  ASSERT_EQ(f.rows.size(), 7u);
  EXPECT_EQ(f.rows[0].size, 1024);
  EXPECT_DOUBLE_EQ(f.rows[0].time_us, 25.60);
  EXPECT_EQ(f.rows[6].size, 8589934592.0);
  EXPECT_DOUBLE_EQ(f.rows[6].busbw, 478.87);
  EXPECT_EQ(f.rows[6].line, 24);
  ASSERT_TRUE(f.avg_busbw);
  EXPECT_DOUBLE_EQ(*f.avg_busbw, 281.507);
}

// nccl-tests before "Group", "root" and "#wrong" (2.0's "error" column), two hosts of 4 ranks,
// a 0-byte row and NCCL_DEBUG lines among the rows.
const char* kOldLayout = R"(# nThread 1 nGpus 1 minBytes 0 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid   1320 on     node-a device  0 [0x07] Tesla V100-SXM2-16GB
#   Rank  1 Pid   1321 on     node-a device  1 [0x0a] Tesla V100-SXM2-16GB
#   Rank  2 Pid   1322 on     node-a device  2 [0x47] Tesla V100-SXM2-16GB
#   Rank  3 Pid   1323 on     node-a device  3 [0x4d] Tesla V100-SXM2-16GB
#   Rank  4 Pid   2066 on     node-b device  0 [0x07] Tesla V100-SXM2-16GB
#   Rank  5 Pid   2067 on     node-b device  1 [0x0a] Tesla V100-SXM2-16GB
#   Rank  6 Pid   2068 on     node-b device  2 [0x47] Tesla V100-SXM2-16GB
#   Rank  7 Pid   2069 on     node-b device  3 [0x4d] Tesla V100-SXM2-16GB
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0     float      sum     5.70    0.00    0.00  0e+00     5.54    0.00    0.00  0e+00
node-a:1320:1400 [0] NCCL INFO Launch mode Parallel
     1048576        262144     float      sum    100.0   10.49   18.35  0e+00    102.0   10.28   17.99  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 18.17
)";

TEST(CalibrateNcclTests, AnOldLayoutReadsByItsColumnNames) {
  TempDir dir;
  const auto f = parse_nccl_tests("all_reduce=" + dir.file("run1.log", kOldLayout));
  EXPECT_EQ(f.op, taskgraph::CollectiveOp::AllReduce);
  EXPECT_EQ(f.op_from, "given before \"=\"");
  EXPECT_EQ(f.ranks(), 8);
  EXPECT_EQ(f.host_of_rank[4], "node-b");
  EXPECT_EQ(f.zero_rows, 1);
  ASSERT_EQ(f.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(f.rows[0].time_us, 101.0) << "the mean of out of place and in place";
  EXPECT_DOUBLE_EQ(f.rows[0].algbw, 10.49);
}

TEST(CalibrateNcclTests, TheTestComesFromTheFileNameWhenTheHeaderDoesNotSay) {
  TempDir dir;
  const auto f = parse_nccl_tests(dir.file("all_reduce_perf-2nodes.txt", kOldLayout));
  EXPECT_EQ(f.op, taskgraph::CollectiveOp::AllReduce);
  EXPECT_EQ(f.op_from, "its file name");
}

TEST(CalibrateNcclTests, ABandwidthRatioOfAnotherTestNamesIt) {
  TempDir dir;
  // busbw/algbw = 1.75: all_reduce's on 8 ranks, not reduce_scatter's 0.875.
  const auto e = error_of([&] { parse_nccl_tests(dir.file("reduce_scatter_perf.txt", kOldLayout)); });
  EXPECT_NE(e.find("reduce_scatter_perf.txt:18: busbw/algbw is 1.749"), std::string::npos) << e;
  EXPECT_NE(e.find("it is all_reduce_perf's"), std::string::npos) << e;
}

TEST(CalibrateNcclTests, BadTablesSayWhereAndWhy) {
  TempDir dir;
  std::string no_ranks = kOldLayout;
  while (no_ranks.find("Rank") != std::string::npos) no_ranks.replace(no_ranks.find("Rank"), 4, "Runk");
  EXPECT_NE(error_of([&] { parse_nccl_tests(dir.file("all_reduce_perf.txt", no_ranks)); }).find("no \"#  Rank ... on HOST"), std::string::npos);
  std::string bad_time = kOldLayout;
  bad_time.replace(bad_time.find("100.0"), 5, "1O0.0");
  EXPECT_NE(error_of([&] { parse_nccl_tests(dir.file("all_reduce_perf.txt", bad_time)); }).find("all_reduce_perf.txt:18: time: \"1O0.0\" is not a number"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_nccl_tests(dir.file("run.txt", kOldLayout)); }).find("which test is this?"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_nccl_tests("allreduse=" + dir.path("run.txt")); }).find("names no test calibrate reads"), std::string::npos);
}

TEST(CalibrateCsv, GemmAndAttentionRowsRead) {
  TempDir dir;
  const auto g = read_gemm_csv(dir.file("g.csv", "# from a sweep\nm,n,k,dtype,tflops,batch\n4096,4096,4096,bf16,687.2,2\n"));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].line, 3);
  EXPECT_NEAR(g[0].time_s, 2.0 * 2 * 4096.0 * 4096 * 4096 / 687.2e12, 1e-15);
  EXPECT_EQ(g[0].kernel().flops, 2.0 * 2 * 4096.0 * 4096 * 4096);
  const auto a = read_attention_csv(dir.file("a.csv", "batch,heads,seq,head_dim,causal,time_us\n2,16,4096,128,true,812.5\n"));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].causal);
  EXPECT_EQ(a[0].kernel().flops, 4.0 * 2 * 16 * 4096.0 * 4096 * 128);
}

TEST(CalibrateCsv, BadCellsAndColumnsSayWhereAndWhy) {
  TempDir dir;
  auto e = error_of([&] { read_gemm_csv(dir.file("g.csv", "m,n,k,dtype,time_us\n1,2,3,bf61,4\n")); });
  EXPECT_NE(e.find("g.csv:2: dtype \"bf61\" is not one of"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean \"bf16\""), std::string::npos) << e;
  e = error_of([&] { read_gemm_csv(dir.file("h.csv", "m,n,k,dtype,time_ms\n1,2,3,bf16,4\n")); });
  EXPECT_NE(e.find("h.csv:1: unknown column \"time_ms\""), std::string::npos) << e;
  e = error_of([&] { read_gemm_csv(dir.file("i.csv", "m,n,k,dtype,time_us\n1,2,3,bf16\n")); });
  EXPECT_NE(e.find("i.csv:2: 4 cells, the header names 5 columns"), std::string::npos) << e;
  e = error_of([&] { read_attention_csv(dir.file("j.csv", "batch,heads,seq,head_dim,causal,time_us\n1,2,3,4,maybe,5\n")); });
  EXPECT_NE(e.find("j.csv:2: causal: \"maybe\" is not true or false"), std::string::npos) << e;
}

// tests/data/calibrate/pytorch_trace.json, made by make_trace.py beside it (by hand in kineto's
// schema: no torch or GPU here). Its closed forms: the host launches every 9 us, each call 4.5
// us; six 2 us fills launched 9 us apart start 5 us after their launch, 7 us after the last ended.
TEST(CalibrateTrace, APytorchTraceSumsKernelsByRoleAndMeasuresTheDispatch) {
  const auto t = parse_trace(kData + "/pytorch_trace.json");
  const auto s = summarize(t);
  auto role = [](TraceRole r) { return static_cast<std::size_t>(r); };
  EXPECT_EQ(s.count[role(TraceRole::Gemm)], 4);
  EXPECT_DOUBLE_EQ(s.busy_us[role(TraceRole::Gemm)], 2 * (40.0 + 20.0));
  EXPECT_DOUBLE_EQ(s.busy_us[role(TraceRole::Attention)], 2 * 30.0);
  EXPECT_DOUBLE_EQ(s.busy_us[role(TraceRole::Elementwise)], 2 * (3.0 + 4.0 + 3.0) + 6 * 2.0);
  EXPECT_DOUBLE_EQ(s.busy_us[role(TraceRole::Nccl)], 60.0);
  EXPECT_DOUBLE_EQ(s.busy_us[role(TraceRole::Optimizer)], 25.0);
  EXPECT_EQ(s.count[role(TraceRole::Copy)], 1);
  EXPECT_EQ(s.count[role(TraceRole::Other)], 0);
  EXPECT_DOUBLE_EQ(s.dispatch_us, 9.0);
  EXPECT_DOUBLE_EQ(s.launch_call_us, 4.5);
  EXPECT_DOUBLE_EQ(s.gap_us, 7.0);
  EXPECT_GE(s.host_bound_kernels, 5);
}

TEST(CalibrateTrace, KernelNamesMapToRoles) {
  EXPECT_EQ(role_of_kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), TraceRole::Nccl);
  EXPECT_EQ(role_of_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0"), TraceRole::Attention);
  EXPECT_EQ(role_of_kernel("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)"), TraceRole::Gemm);
  EXPECT_EQ(role_of_kernel("triton_poi_fused_add_mul_silu_0"), TraceRole::Elementwise);
  EXPECT_EQ(role_of_kernel("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<{lambda(float)#1}>>"), TraceRole::Elementwise)
      << "a C++ lambda is not the LAMB optimizer";
  EXPECT_EQ(role_of_kernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>"), TraceRole::Optimizer);
}

TEST(CalibrateTrace, BadEventsSayWhere) {
  TempDir dir;
  auto e = error_of([&] { parse_trace(dir.file("t.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1}]})")); });
  EXPECT_NE(e.find("t.json:/traceEvents/0/dur: expected a number"), std::string::npos) << e;
  e = error_of([&] { parse_trace(dir.file("u.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})")); });
  EXPECT_NE(e.find("no GPU kernels"), std::string::npos) << e;
  e = error_of([&] { parse_trace(dir.file("v.json", R"({"events": []})")); });
  EXPECT_NE(e.find("v.json:/traceEvents: expected a Chrome trace"), std::string::npos) << e;
}

TEST(CalibrateSteps, BothFormsReadAndCompare) {
  TempDir dir;
  const auto kv = read_step_log(dir.file("a.log", "# warm-up first\nstep 1 loss 7.1 time_s 0.90\nstep 2 time_ms 510\nstep 3 time_s 0.5\n"));
  ASSERT_EQ(kv.size(), 3u);
  EXPECT_DOUBLE_EQ(kv[1].seconds, 0.51);
  const auto csv = read_step_log(dir.file("b.csv", "step,time_s\n1,0.9\n2,0.51\n3,0.5\n"));
  ASSERT_EQ(csv.size(), 3u);
  const auto c = compare_steps("a.log", kv, "s.json", 0.55);
  EXPECT_DOUBLE_EQ(c.median_s, 0.51);
  EXPECT_NEAR(c.error, 0.55 / 0.51 - 1, 1e-12);
  auto e = error_of([&] { read_step_log(dir.file("c.log", "step 1 time_s 0.5\nstep 1 time_s 0.6\n")); });
  EXPECT_NE(e.find("c.log:2: step 1 is given twice"), std::string::npos) << e;
  e = error_of([&] { read_step_log(dir.file("d.log", "step 1 time 0.5\n")); });
  EXPECT_NE(e.find("d.log:1: a line without"), std::string::npos) << e;
}

}  // namespace
