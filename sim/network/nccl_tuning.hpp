#pragma once
namespace dtsim::taskgraph {
enum class CollectiveOp;  // sim/taskgraph/task_graph.hpp
}

// NCCL's own cost model for a collective across nodes: the latency and bandwidth it predicts for
// each algorithm and protocol, and the pair it picks (the fastest). Transcribed from NVIDIA/nccl
// v2.30.7 (commit 5067397c2676d5aed50042fc39e5c8ee96eb0027): src/graph/tuning.cc
// ncclTopoTuneModel (lines 243-441) and ncclTopoGetAlgoTime (lines 630-655), with the per-channel
// speed NCCL's topology search settles on (src/graph/search.cc lines 1051-1066, 1036-1049).
// Ring and tree, each with the LL, LL128 and Simple protocols, and PAT for all-gather and
// reduce-scatter with one GPU per node. Not modelled: NVLink SHARP (NVLS, NVLS tree) and CollNet,
// which need NVLS or SHARP hardware; tree graphs whose intra-node bandwidth the search raises
// above the network's on 2 nodes (the same per-channel caps bound both).
namespace dtsim::network::nccl {

enum class Gpu { None, Volta, Ampere, Hopper, Blackwell };  // NCCL's compute-capability index
enum class Cpu { Intel, Amd, Arm };
enum class Algo { Tree, Ring, Pat };
enum class Proto { LL, LL128, Simple };

const char* to_string(Algo a);
const char* to_string(Proto p);

struct Setup {
  Gpu gpu = Gpu::Ampere;
  Cpu cpu = Cpu::Intel;
  int ranks = 2, nodes = 2;
  int nics = 1;                // NICs the group leaves each node through: NCCL's channels, one per NIC
  double nic_GBps = 25;        // per NIC and direction, GB/s (1e9 bytes)
  bool nvlink = true;          // GPUs of a node talk over NVLink (else PCIe)
};

struct Prediction {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  double latency_us = 0, bandwidth_GBps = 0;  // algorithm bandwidth: bytes / time once latency is paid
  double time_us = 0;
};

// The speed of one channel that NCCL's search picks for a NIC of `nic_GBps`: the largest entry of
// its speed array not above the NIC's bandwidth (200 Gb/s HDR, 25 GB/s: 24; 400 Gb/s NDR: 48).
double channel_speed(Gpu gpu, double nic_GBps);

// One algorithm and protocol, as ncclTopoTuneModel tabulates it; bandwidth 0 where NCCL does not
// offer the pair for this collective.
Prediction cost(const Setup& s, taskgraph::CollectiveOp op, Algo a, Proto p, double bytes);
// NCCL's choice: the pair with the shortest latency + bytes / bandwidth. `bytes` is the full
// buffer (nccl-tests' S; NCCL's nBytes is the same for all-gather and reduce-scatter). Needs
// nodes >= 2 and an all-reduce, all-gather or reduce-scatter.
Prediction predict(const Setup& s, taskgraph::CollectiveOp op, double bytes);

}  // namespace dtsim::network::nccl
