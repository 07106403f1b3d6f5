#pragma once
#include <span>

#include "sim/network/nccl_tuning.hpp"

// What nccl_tuning.cpp and nvls_tuning.cpp share: NVIDIA/nccl v2.30.7 (commit 5067397c)
// src/graph/tuning.cc's correction table and the helpers both read it with.
namespace dtsim::network::nccl {

// Trees' bandwidth correction by size, [proto][log2(bytes / 64)] for 64 B to 512 MiB: tuning.cc
// lines 623-627 (trees read the first 23 columns, NVLS trees all 24).
inline constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

// The search's per-channel speeds (GB/s), src/graph/search.cc: across nodes lines 1052, 1058,
// 1064; inside one node lines 1051, 1057, 1063.
inline constexpr double kSpeeds[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                     7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
inline constexpr double kSpeedsSm90[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                         15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
inline constexpr double kSpeedsSm100[] = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                          20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
inline constexpr double kSpeedsIntra[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
inline constexpr double kSpeedsIntraSm90[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
inline constexpr double kSpeedsIntraSm100[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};

int gen(Gpu g);  // index of NCCL's compute-capability rows, Volta 0 .. Blackwell 3
int floor_log2(double x);  // log2i; -1 below 1
// ncclTopoDupChannels (search.cc lines 1036-1049): twice the channels at half the speed when the
// speed is high enough.
Graph dup_channels(Gpu gpu, Graph g);
// The speed array the search walks for this GPU generation, inside a node or across nodes.
std::span<const double> speeds(Gpu gpu, bool intra);

}  // namespace dtsim::network::nccl
