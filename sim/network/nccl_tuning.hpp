#pragma once
namespace dtsim::taskgraph {
enum class CollectiveOp;  // sim/taskgraph/task_graph.hpp
}

// NCCL's own cost model for a collective across nodes: the latency and bandwidth it predicts for
// each algorithm and protocol, and the pair it picks (the fastest). Transcribed from NVIDIA/nccl
// v2.30.7 (commit 5067397c2676d5aed50042fc39e5c8ee96eb0027): src/graph/tuning.cc
// ncclTopoTuneModel (lines 243-441) and ncclTopoGetAlgoTime (lines 630-655), with the per-channel
// speed NCCL's topology search settles on (src/graph/search.cc lines 1051-1066, 1036-1049).
// Ring and tree, each with the LL, LL128 and Simple protocols, PAT for all-gather and
// reduce-scatter with one GPU per node, and on NVLink SHARP switches (Hopper and later) NVLS inside
// a node and NVLS trees across nodes (Simple only). Groups inside one node are modelled only where
// NVLS is on offer (nvls_tuning.cpp has those graphs). Not modelled: CollNet, which needs SHARP
// network switches; tree graphs whose intra-node bandwidth the search raises above the network's
// on 2 nodes (the same per-channel caps bound both).
namespace dtsim::network::nccl {

enum class Gpu { None, Volta, Ampere, Hopper, Blackwell };  // NCCL's compute-capability index
enum class Cpu { Intel, Amd, Arm };
enum class Algo { Tree, Ring, Pat, Nvls, NvlsTree };
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
  // The node's NVSwitches reduce (NVLink SHARP): NCCL offers NVLS and NVLS trees on Hopper and
  // later. `nvlinks`: NVLink links per GPU (NCCL counts each at its per-link speed, topo.h).
  bool nvls = false;
  int nvlinks = 18;
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
// offer the pair for this collective. `nodes` 1 needs `nvls` (see above).
Prediction cost(const Setup& s, taskgraph::CollectiveOp op, Algo a, Proto p, double bytes);
// NCCL's choice: the pair with the shortest latency + bytes / bandwidth. `bytes` is the full
// buffer (nccl-tests' S; NCCL's nBytes is the same for all-gather and reduce-scatter). Needs
// an all-reduce, all-gather or reduce-scatter, and nodes >= 2 or `nvls`.
Prediction predict(const Setup& s, taskgraph::CollectiveOp op, double bytes);

// What NCCL's topology search (src/graph/search.cc) settles on for a graph: channels and the
// per-channel speed inside the node and across it (GB/s).
struct Graph {
  int channels = 1;
  double intra = 0, inter = 0;
};
// The NVLink bandwidth per GPU NCCL's topology holds (links x its per-link figure, topo.h).
double nvlink_bandwidth(const Setup& s);
// Ring and tree graph of a group inside one node (NVLink speeds), and the NVLS graph.
Graph intra_ring_graph(const Setup& s);
Graph nvls_graph(const Setup& s);
// NVLS and NVLS tree's cost (Algo Nvls or NvlsTree), Simple only; bandwidth 0 where NCCL does not
// offer it (nvls_tuning.cpp).
Prediction nvls_cost(const Setup& s, taskgraph::CollectiveOp op, Algo a, double bytes);

}  // namespace dtsim::network::nccl
