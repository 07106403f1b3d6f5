#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_graph.hpp"
#include "strategies/framework.hpp"
#include "strategies/schedule.hpp"
#include "strategies/stack_memory_kinds.hpp"
#include "strategies/tensor_fusion.hpp"
#include "strategies/unit_options.hpp"

namespace dtsim::strategies {

// Full keeps each block's input and re-runs one block at a time before its backward (Megatron's
// full recomputation); Stage is GPipe's re-materialisation (Huang et al. 2019, Sec. 2.3): each
// pipeline chunk keeps only its input per micro-batch and re-runs its whole forward before its
// backward. Which blocks Full reaches: ParallelismSpec::recompute_layers, recompute_every,
// recompute_group (strategies/recompute.hpp). Op is torchtitan's op-level policy: each block keeps
// its input and what its matmuls and attention return, but for every second matmul, and re-runs
// the rest (strategies/recompute.hpp).
enum class Recompute { None, Selective, Full, Stage, Op };
// Gradient compression before synchronisation: fp16 halves fp32 gradients; int8 quantises to one
// byte per value (as 1-bit/8-bit Adam-style schemes do); top-k keeps a fraction of the values with
// their 4-byte indices and must gather instead of sum (Lin et al. 2018, Deep Gradient Compression).
enum class Compression { None, Fp16, Int8, TopK };
// Fp64: weights, gradients, optimizer state and activations all in double precision, as
// scientific-computing codes (and the seeds' sizing exercises) train.
// Fp8: Transformer Engine's recipe (NVIDIA TE docs, "Using FP8 with Transformer Engine"): the GEMMs
// of the transformer blocks' linear layers in FP8 (E4M3 forward, E5M2 gradients, scaled per tensor),
// everything else (attention, softmax, norms, the output layer, the optimizer) in bf16 with bf16
// weights and fp32 master copies.
enum class Precision { Fp64, Fp32, Tf32, Bf16, Fp16, Fp8 };
// How data-parallel workers combine their work.
// - Sync: every step waits for everyone's gradients (all-reduce, parameter servers, central storage).
// - Async: each worker pushes its gradients to the parameter servers and pulls the weights back
//   on its own time (Dean et al. 2012, Downpour SGD), optionally at most a bounded number of
//   steps ahead of the slowest worker (stale-synchronous parallel, Ho et al. 2013).
// - Hogwild: workers on one node write their updates into shared host-memory weights without
//   locks (Recht et al. 2011), as PyTorch's multiprocessing Hogwild example does.
// - Easgd: each worker steps its own weights and every `easgd_period` steps exchanges them with a
//   centre variable on a CPU master, the workers taking turns (Zhang et al. 2015, elastic averaging).
enum class Updates { Sync, Async, Hogwild, Easgd };

// The data loader feeding each GPU: CPU preprocessing spread over worker processes, and reads
// from storage shared by the node's GPUs. Loaders run ahead of the GPU without bound.
struct InputPipeline {
  bool enabled = false;
  double cpu_seconds_per_sample = 0;
  int workers_per_gpu = 1;
  double sample_bytes = 0;
  double storage_bandwidth_per_gpu = 0;  // bytes/s
  // Seconds to load one micro-batch.
  double seconds(std::int64_t micro_batch) const;
};

struct ParallelismSpec {
  int data = 1, tensor = 1, pipeline = 1;
  std::int64_t micro_batch = 1;
  Recompute recompute = Recompute::None;
  // Under full recomputation, which blocks it reaches (0: every one). recompute_layers: the first
  // N blocks of each pipeline chunk, the rest keep all their activations (Megatron-LM
  // --recompute-method block --recompute-num-layers N). recompute_every: every n-th block of a
  // stage, counted through its chunks in order (torchtitan's selective_ac_option = "n").
  // recompute_group: every block, checkpointed N at a time, each group keeping only its input
  // and rebuilt whole before its backward (Megatron-LM --recompute-method uniform).
  int recompute_layers = 0, recompute_every = 0, recompute_group = 1;
  // Under selective recomputation, Megatron-Core's fine-grained modules as
  // models::recompute_module bits (0: Korthikanti's attention-score recompute).
  std::uint8_t recompute_modules = 0;
  int zero_stage = 0;
  // PyTorch DDP defaults: bucket_cap_mb = 25 and a 1 MiB first bucket (torch/nn/parallel/distributed.py).
  double bucket_bytes = 25.0 * 1024 * 1024;
  double first_bucket_bytes = 1.0 * 1024 * 1024;
  // Horovod's tensor fusion instead of those buckets (the scenario's stack; strategies/tensor_fusion.hpp).
  TensorFusion fusion;
  bool overlap_grad_reduce = true;
  // Megatron-Core's --overlap-param-gather: the distributed optimizer's parameter all-gather (ZeRO-1
  // and 2) runs during the next step's first forward, each layer waiting only for its own.
  bool overlap_param_gather = false;
  taskgraph::Algorithm algorithm = taskgraph::Algorithm::Ring;
  Schedule schedule = Schedule::OneFOneB;
  int virtual_stages = 1;
  bool sequence_parallel = false;
  // How the software stack overlaps the tensor-parallel collectives with GEMMs (the scenario's
  // stack.tp_overlap; strategies/tp_overlap.hpp). None: they block the compute stream.
  taskgraph::TpOverlap tp_overlap = taskgraph::TpOverlap::None;
  // GPU order, fastest-varying first: tensor, then pipeline, then data (tensor groups stay inside
  // a node, pipeline neighbours next to each other); `pipeline_outer` puts data before pipeline
  // as Megatron-LM's default rank order does.
  bool pipeline_outer = false;
  bool offload_optimizer = false;  // ZeRO-Offload: optimizer state and step on the host
  Compression compression = Compression::None;
  double topk_ratio = 0.01;
  InputPipeline input;
  // Give every data-parallel replica its own compute (stragglers make them differ); otherwise
  // replica 0 stands for all.
  bool all_replicas = false;
  // Backup workers (Chen et al. 2016): the gradient sync goes ahead without the last k replicas.
  int backup_workers = 0;
  // Weight-gradient GEMMs that add straight into the gradient buffer (Megatron-Core's
  // gradient_accumulation_fusion). Otherwise each micro-batch's gradients take a separate pass:
  // read the new gradient, read and write the buffer (PyTorch's AccumulateGrad, DDP's bucket
  // copy, Megatron's main_grad.add_).
  bool fused_grad_accumulation = false;
  // Stage-to-stage sends that hold the sender until they finish (Megatron-LM 2021 synchronised
  // the device after each batch_isend_irecv), instead of running beside its next pass.
  bool blocking_p2p = false;
  // Transformer blocks per model chunk when not split evenly: one count per stage, or with virtual
  // stages per chunk in model order, chunk j on stage j % pipeline (Megatron-LM's order).
  std::vector<int> stage_blocks;
  // Gradient buckets by priority (P3, Jayarajan et al. 2019; ByteScheduler, Peng et al. 2019):
  // queued buckets holding earlier layers go first, each bucket's parameters are updated as soon
  // as it is reduced, and the next step's forward runs each layer once its own update is done.
  bool priority_buckets = false;
  Updates updates = Updates::Sync;
  int staleness_bound = -1;  // async: how many steps a worker may run ahead of the slowest; -1 any
  int easgd_period = 1;      // local steps between exchanges with the centre
  // How the framework runs ZeRO-3/FSDP, its pipeline engine and offload (strategies/framework.hpp).
  FrameworkSpec framework;
  // Each micro-batch's saved activations go to host memory after its forward and come back
  // before its backward, over PCIe (Megatron-Core cpu offloading, DeepSpeed cpu_checkpointing).
  bool activation_offload = false;
  // Context parallelism (Megatron-Core --context-parallel-size, Llama 3 "CP"): the sequence split
  // over `context` ranks that sit between tensor and data in the rank order (tp, cp, dp, pp as
  // Megatron-Core orders them). Attention exchanges K and V around a ring, each step hidden behind
  // one chunk of attention (Megatron-Core's cp_comm_type "p2p"), or all-gathers them before
  // attention and reduce-scatters their gradients after (cp_comm_type "all_gather", as Llama 3 does
  // with GQA's small K/V). Gradients are reduced over data x context ranks.
  int context = 1;
  bool context_all_gather = false;
  bool context_load_balance = true;
  // Expert parallelism (Megatron-Core): each MoE layer's experts split over `expert` GPUs carved
  // out of the data-parallel ones (consecutive data ranks), which exchange tokens by all-to-all;
  // expert gradients are summed over the data / expert GPUs holding the same experts.
  int expert = 1;
  // MoE parallel folding (Megatron-Core --expert-tensor-parallel-size): the MoE layers' own grid of
  // expert_tensor x expert x expert-data ranks over the stage's tensor x context x data ranks, in
  // Megatron-Core's expert order tp-ep-dp over the dense order tp-cp-dp (parallel_state.py, the
  // expert RankGenerator). 0: as `tensor`, which keeps the expert-parallel groups on one tensor
  // rank and carved out of the context x data ranks.
  int expert_tensor = 0;
  int expert_tensor_size() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  // The ranks holding the same experts, which sum their gradients: tensor x context x data /
  // (expert x expert_tensor), context x data / expert when expert_tensor is tensor.
  int expert_data() const { return tensor * context * data / (expert * expert_tensor_size()); }
  // Expert all-to-all overlap: each steady-state forward of an MoE layer runs beside another
  // micro-batch's backward of it, the all-to-alls of one beside the computation of the other
  // (Megatron-Core's --overlap-moe-expert-parallel-comm, combined_1f1b.py; DeepSeek's DualPipe).
  enum class MoeOverlap : std::uint8_t { None, Megatron1F1B, DualPipe };
  MoeOverlap moe_a2a_overlap = MoeOverlap::None;
  // How tokens reach their experts' GPUs and come back (Megatron-Core's token dispatcher): NCCL's
  // all-to-all of one row per token and expert (alltoall), or DeepEP's kernels, which send a token
  // once to each GPU holding one of its experts, across nodes once to each such node over RDMA
  // (the flex dispatcher with DeepEP; strategies/units/experts.cpp, moe_dispatch_bytes).
  enum class MoeDispatcher : std::uint8_t { AllToAll, DeepEp };
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;
  // Node-limited routing (DeepSeek-V3's M, Megatron-Core's --moe-router-group-topk over the
  // expert-parallel group's nodes): a token's experts lie on at most this many nodes (0: any).
  int moe_node_limit = 0;
  // The all-to-alls toward the experts (forward dispatch, backward combine's gradient) in FP8 with
  // a scale per 32 elements' bytes (DeepSeek-V3's 1x128 fp32 scales, Megatron-Core's MXFP8
  // moe_dispatch_fwd_dtype / moe_combine_bwd_dtype); the other direction stays in the activations'.
  bool moe_fp8_dispatch = false;
  // Megatron-Core's --moe-shared-expert-overlap: the shared experts run on a stream of their own
  // beside the token dispatcher's all-to-alls (transformer/moe/shared_experts.py).
  bool moe_shared_expert_overlap = false;
  int gpus_per_node = 0;  // the cluster's: GPU ids count node by node (0: one node)
  // Router load imbalance: expert i gets (1 + expert_skew z_i) times its even share of the tokens,
  // z_i standard normal drawn from expert_seed per MoE layer; the GPU with the most sets the pace.
  double expert_skew = 0;
  std::uint64_t expert_seed = 1;
  // Hybrid sharding (HSDP: FSDP's HYBRID_SHARD, torchtitan's data_parallel_shard_degree x
  // data_parallel_replicate_degree): ZeRO-3 shards over groups of `shard_size` consecutive data
  // ranks (with their context ranks) and replicates across the data / shard_size groups. 0: one
  // group of every data rank (plain ZeRO-3).
  int shard_size = 0;
  // The settings of the units that declare their own (strategies/unit.hpp: UnitEntry), as read.
  UnitSettings unit_settings;
};

// Whether ZeRO-3 shards over groups smaller than the data-parallel ranks (HSDP).
inline bool hybrid_shard(const ParallelismSpec& p) {
  return p.zero_stage == 3 && p.shard_size > 0 && p.shard_size < p.data;
}

// Host side of a node, for offload.
struct HostSpec {
  double pcie_bandwidth = 16e9;          // per GPU, per direction
  double memory_bandwidth_per_gpu = 25e9;  // host DRAM bandwidth one GPU's CPU cores get
  // The CPU cores one GPU's offloaded optimizer runs on and their fp32 FLOP rate each.
  double cores_per_gpu = 8, core_flops = 50e9;
  double memory_bytes_per_node = 1e12;  // host DRAM capacity
};


struct TrainingSpec {
  std::int64_t global_batch = 1;
  Precision precision = Precision::Bf16;
  models::OptimizerKind optimizer = models::OptimizerKind::Adam;
  models::Attention attention = models::Attention::Standard;
  // FP8 scaling (Transformer Engine recipes): delayed, from an amax history of past steps
  // (DelayedScaling, TE's default), current, from this tensor's own amax (Float8CurrentScaling,
  // what NeMo's recent performance recipes use), or blockwise, a scale per tile (DeepSeek-V3's,
  // TE's Float8BlockScaling).
  models::Fp8Scaling fp8_scaling = models::Fp8Scaling::Delayed;
  // What the software stack keeps in memory (the scenario's `stack`; docs/memory.md).
  StackMemory memory;
};

// Micro-batches each data-parallel replica runs per step: the global batch over data x
// micro-batch size. Whole where the batch divides, as the scenario loader, the sweep and the
// fewest-GPUs search require before they use it.
inline std::int64_t micro_batches(std::int64_t global_batch, std::int64_t data, std::int64_t micro_batch) {
  return global_batch / (data * micro_batch);
}

inline bool mixed_precision(Precision p) { return p == Precision::Bf16 || p == Precision::Fp16 || p == Precision::Fp8; }
inline int activation_bytes(Precision p) { return mixed_precision(p) ? 2 : p == Precision::Fp64 ? 8 : 4; }
inline models::UpdatePath update_path(Precision p) {
  return p == Precision::Fp16 ? models::UpdatePath::Fp16Master
         : p == Precision::Bf16 || p == Precision::Fp8 ? models::UpdatePath::Bf16Master
         : p == Precision::Fp64 ? models::UpdatePath::Fp64
                                : models::UpdatePath::Fp32;
}
// Bytes per parameter of weights, gradients and optimizer state (ZeRO paper, Sec. 3.1: 2 + 2 + 12
// for mixed-precision Adam; plain fp32 Adam keeps 4 + 4 + 8; fp64 doubles those).
double weight_bytes_per_param(Precision p);
double grad_bytes_per_param(Precision p);
double optimizer_bytes_per_param(Precision p, models::OptimizerKind o);
const char* to_string(Recompute r);
// Megatron-Core's recompute module names dtsim models, in its order, and the bits they stand for.
std::vector<std::string> recompute_module_names();
std::uint8_t recompute_module_bit(const std::string& name);
std::vector<std::string> recompute_module_list(std::uint8_t modules);
const char* to_string(Updates u);

}  // namespace dtsim::strategies
