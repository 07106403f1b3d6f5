// One line of documentation for each key the loader reads (describe.hpp). The key's type, range,
// choices and default come from the code that reads it; only the words are here, and a model
// family's beside the code that reads its keys (models/families/). A CNN's nested layers share the
// top level's lines (/model/layers/*/...).
#include "sim/config/describe.hpp"

#include <fmt/format.h>

#include <iterator>
#include <utility>

#include "models/family.hpp"
#include "strategies/schedule.hpp"

namespace dtsim::config {

namespace {
// "document pointer" -> the line describe shows.
constexpr std::pair<const char*, const char*> kDocs[] = {
      {"device profile /name", "the device's name as results show it"},
      {"device profile /description", "one line on what the device is"},
      {"device profile /peak_tflops", "dense peak compute per precision, TFLOP/s (datasheet)"},
      {"device profile /peak_tflops/fp64", "FP64 dense peak, TFLOP/s"},
      {"device profile /peak_tflops/fp32", "FP32 dense peak, TFLOP/s (required)"},
      {"device profile /peak_tflops/tf32", "TF32 tensor-core dense peak, TFLOP/s"},
      {"device profile /peak_tflops/bf16", "BF16 tensor-core dense peak, TFLOP/s"},
      {"device profile /peak_tflops/fp16", "FP16 tensor-core dense peak, TFLOP/s"},
      {"device profile /peak_tflops/fp8", "FP8 tensor-core dense peak, TFLOP/s; without it FP8 training is refused on this device"},
      {"device profile /peak_tflops/fp4", "FP4 tensor-core dense peak, TFLOP/s"},
      {"device profile /memory", "device memory capacity"},
      {"device profile /hbm_bandwidth", "device memory bandwidth (datasheet)"},
      {"device profile /pcie_bandwidth", "host link bandwidth per direction (offload copies, input)"},
      {"device profile /gemm_efficiency", "the share of peak a GEMM reaches by its size: max * f / (f + half_flops), or measured points"},
      {"device profile /gemm_efficiency/max", "the share of peak the largest GEMMs reach"},
      {"device profile /gemm_efficiency/half_flops", "the GEMM size (FLOPs) that reaches half of max"},
      {"device profile /gemm_efficiency/points", "measured [[flops, efficiency], ...] pairs, used instead of the curve"},
      {"device profile /gemm_k_loop", "a 16-bit GEMM tile's fixed work beside its loop over K, under stacks that hand cuBLAS the model's shapes: (k / (k + overhead)) / (reference / (reference + overhead)) of the curve, at most 1"},
      {"device profile /gemm_k_loop/overhead", "the fixed work per output tile (pipeline fill, epilogue) in elements of K"},
      {"device profile /gemm_k_loop/reference", "the K of the shape gemm_efficiency's max was measured at"},
      {"device profile /fp8_gemm_efficiency", "as gemm_efficiency, for FP8 GEMMs against the FP8 peak"},
      {"device profile /fp8_gemm_efficiency/max", "the share of the FP8 peak the largest FP8 GEMMs reach"},
      {"device profile /fp8_gemm_efficiency/half_flops", "the FP8 GEMM size (FLOPs) that reaches half of max"},
      {"device profile /fp8_gemm_efficiency/points", "measured [[flops, efficiency], ...] pairs for FP8 GEMMs"},
      {"device profile /fp8_block_gemm_efficiency", "as fp8_gemm_efficiency, for block-scaled FP8 GEMMs (fp8_recipe blockwise), "
       "times K / (K + k_overhead)"},
      {"device profile /fp8_block_gemm_efficiency/max", "the share of the FP8 peak the largest block-scaled GEMMs reach"},
      {"device profile /fp8_block_gemm_efficiency/half_flops", "the block-scaled GEMM size (FLOPs) that reaches half of max"},
      {"device profile /fp8_block_gemm_efficiency/k_overhead", "each output tile's fixed work beside its loop over K, in elements of K"},
      {"device profile /memory_efficiency", "the share of hbm_bandwidth a memory-bound kernel reaches by its size"},
      {"device profile /memory_efficiency/max", "the share of hbm_bandwidth the largest memory-bound kernels reach"},
      {"device profile /memory_efficiency/half_bytes", "the bytes moved at which a kernel reaches half of max"},
      {"device profile /kernel_min", "the shortest time any kernel takes on this device"},
      {"device profile /launch_overhead", "host time to launch one kernel; absent: the kernel table's measured one, else 0"},
      {"device profile /attention", "how fused attention kernels run on this device"},
      {"device profile /attention/scores_memory_efficiency", "the share of memory bandwidth unfused attention's score matrices move at"},
      {"device profile /attention/flash_efficiency", "the share of the GEMM curve fused (flash) attention reaches"},
      {"device profile /comm_core_share", "the share of compute a collective running beside it takes (0: none)"},
      {"device profile /eager_batch_norm", "eager PyTorch's channels-last batch norm kernels measured on this device, each at its own rate; absent: batch norm streams at the memory-bound rate"},
      {"device profile /eager_batch_norm/statistics", "the forward's per-channel mean and variance (reads x)"},
      {"device profile /eager_batch_norm/transform", "the forward's normalisation (reads x, writes y)"},
      {"device profile /eager_batch_norm/backward_reduce", "the backward's per-channel sums of dy and dy·x (reads x and dy)"},
      {"device profile /eager_batch_norm/backward_input", "the backward's input gradient (reads x and dy, writes dx)"},
      {"device profile /attention_tables", "which GPU's published fused-attention tables price a stack's attention kernels: h100-sxm5 (default: the H100's, scaled by the device's matrix peak) or a100-sxm4 (the A100's own forward + backward rates, shape by shape)"},
      {"device profile /cast_up_bandwidth", "bytes read + written per second by a copy into a wider type (PyTorch's bf16 to fp32 casts, FSDP2's fp32 reduce-scatter copy-in); absent: such copies stream at the memory-bound rate"},
      {"device profile /sm_count", "streaming multiprocessors: the share NCCL's kernels take is nccl_sms / sm_count"},
      {"device profile /gemm_alignment", "whether a GEMM whose leading dimensions are not 16-byte multiples runs slower: cublas (NVIDIA tensor-core GPUs: H100's measured rates by alignment, sim/cost/gemm_alignment.cpp) or none (default: TPUs, CPUs, AMD GPUs; not modelled there); a stack's gemm_shapes decides whether it applies"},
      {"device profile /nccl_sms", "SMs NCCL's collective kernels hold on this device while they run"},
      {"device profile /power_W", "board power, W (energy and cost figures)"},
      {"device profile /price_per_gpu_hour_usd", "rental price per GPU-hour, USD (cost figures; a scenario's training value wins)"},
      {"device profile /sources", "an object naming the source of each number in this file"},
      {"device profile /kernel_table", "a measured kernel table (a path inside hardware_profiles/) that prices kernels instead of the curves"},
      {"scenario /schema_version", "the file format's version; only 1 exists"},
      {"scenario /name", "the scenario's name: results, output folders and comparisons use it"},
      {"scenario /description", "one or two sentences on what the scenario asks"},
      {"scenario /extends", "a base scenario (a path relative to this file, or a shipped scenario) whose keys this file starts from"},
      {"scenario /model", "the model: a preset, its overrides, or a whole description"},
      {"scenario /model/preset", "a shipped model (dtsim list models) or a preset file's path; the keys beside it override the preset's"},
      {"scenario /cluster", "the machines and their network: a preset, its overrides, or a whole description"},
      {"scenario /cluster/preset", "a shipped cluster (dtsim list clusters) or a preset file's path; the keys beside it override the preset's"},
      {"scenario /cluster/nodes", "nodes (machines)"},
      {"scenario /cluster/gpus_per_node", "GPUs per node (one NVLink domain)"},
      {"scenario /cluster/intra_node", "the links between a node's GPUs"},
      {"scenario /cluster/intra_node/fabric", "nvswitch (every GPU to a switch), nvlink-ring, or pcie (through the host bridge)"},
      {"scenario /cluster/intra_node/bandwidth", "one GPU's link bandwidth to the node's fabric, per direction"},
      {"scenario /cluster/intra_node/latency", "one hop's latency inside the node"},
      {"scenario /cluster/intra_node/efficiency", "the share of bandwidth a large transfer reaches (flat)"},
      {"scenario /cluster/intra_node/efficiency_points", "measured [[bytes, efficiency], ...] for transfers inside a node"},
      {"scenario /cluster/intra_node/host_bridge_bandwidth", "pcie nodes: the host bridge's bandwidth; default one GPU link's"},
      {"scenario /cluster/intra_node/nvls", "the NVSwitches reduce in the network (NVLink SHARP, NCCL's NVLS)"},
      {"scenario /cluster/inter_node", "the network between nodes"},
      {"scenario /cluster/inter_node/nics_per_node", "network cards per node"},
      {"scenario /cluster/inter_node/nic_bandwidth", "one card's bandwidth per direction (Gbps is bits, as cards are sold)"},
      {"scenario /cluster/inter_node/latency", "one message's latency between nodes"},
      {"scenario /cluster/inter_node/efficiency", "the share of bandwidth a large transfer reaches (flat)"},
      {"scenario /cluster/inter_node/efficiency_points", "measured [[bytes, efficiency], ...] for transfers between nodes"},
      {"scenario /cluster/inter_node/nccl", "NCCL's tuning model for collectives across nodes: {\"gpu\": ..., \"cpu\": ...}, or false for none"},
      {"scenario /cluster/inter_node/nccl/gpu", "the GPU generation NCCL tunes for: volta, ampere, hopper, blackwell"},
      {"scenario /cluster/inter_node/nccl/cpu", "the host CPU NCCL tunes for: intel, amd, arm"},
      {"scenario /cluster/inter_node/topology", "fat-tree, rail-optimized, single-switch, torus-2d or torus-3d"},
      {"scenario /cluster/inter_node/oversubscription", "a fat-tree's downlinks per uplink (1: full bisection)"},
      {"scenario /cluster/inter_node/dimensions", "torus: chips along each dimension of one torus; their product times pods is the cluster's GPUs"},
      {"scenario /cluster/inter_node/link_bandwidth", "torus: one link's bandwidth per direction"},
      {"scenario /cluster/inter_node/pods", "torus: how many tori of these dimensions (TPU pods), joined through their hosts' NICs; chips numbered pod by pod"},
      {"scenario /cluster/inter_node/link_latency", "torus: one link's latency"},
      {"scenario /cluster/parameter_servers", "parameter servers on their own machines (parameter-server algorithm)"},
      {"scenario /cluster/parameter_servers/count", "how many"},
      {"scenario /cluster/parameter_servers/nic_bandwidth", "each server's network bandwidth per direction"},
      {"scenario /cluster/pcie", "each node's PCIe tree between GPUs and host memory (offload, central storage)"},
      {"scenario /cluster/pcie/gpus_per_switch", "GPUs behind one PCIe switch"},
      {"scenario /cluster/pcie/switch_bandwidth", "a switch's uplink bandwidth to the host"},
      {"scenario /cluster/pcie/latency", "one PCIe transfer's latency"},
      {"scenario /cluster/background_traffic", "other jobs on the same network: the share of each kind of link they keep busy"},
      {"scenario /cluster/background_traffic/intra_node", "busy share of the links inside a node"},
      {"scenario /cluster/background_traffic/nic", "busy share of the network cards"},
      {"scenario /cluster/background_traffic/uplink", "busy share of shared uplinks (rail-optimized, or an oversubscribed fat-tree)"},
      {"scenario /cluster/roles", "machines with a role besides training (TensorFlow's chief and evaluator)"},
      {"scenario /cluster/roles/chief", "the chief also writes checkpoints"},
      {"scenario /cluster/roles/chief/checkpoint", "bytes one checkpoint writes (default: the model's weights and optimizer state)"},
      {"scenario /cluster/roles/chief/checkpoint_every_steps", "steps between checkpoints"},
      {"scenario /cluster/roles/chief/storage_bandwidth", "the chief's write bandwidth to storage"},
      {"scenario /cluster/roles/evaluator", "an evaluator reads the checkpoints"},
      {"scenario /cluster/roles/evaluator/shares_storage", "the evaluator reads from the storage the chief writes to"},
      {"scenario /hardware", "the GPU and the host beside it"},
      {"scenario /hardware/device", "a shipped device (dtsim list devices), or a device profile file's path relative to this file (same schema)"},
      {"scenario /hardware/reserved", "device memory not available to training (CUDA context, NCCL buffers)"},
      {"scenario /hardware/host_memory_bandwidth", "a node's host memory bandwidth, shared by its GPUs' offloaded optimizers"},
      {"scenario /hardware/host_memory", "a node's host memory (offload must fit)"},
      {"scenario /hardware/host_cores", "a node's CPU cores (offloaded optimizer steps)"},
      {"scenario /hardware/host_core", "one CPU core's fp32 rate"},
      {"scenario /parallelism", "how the model is split and replicated over the GPUs"},
      {"scenario /parallelism/tensor", "tensor-parallel GPUs (Megatron's intra-layer split; a CNN's channels, as AlexNet split them)"},
      {"scenario /parallelism/pipeline", "pipeline stages"},
      {"scenario /parallelism/context", "context-parallel GPUs (the sequence split, ring attention)"},
      {"scenario /parallelism/data", "data-parallel replicas; default: the GPUs left after tensor x pipeline x context"},
      {"scenario /parallelism/context_comm", "context parallelism's K/V exchange: p2p (ring) or all_gather"},
      {"scenario /parallelism/context_load_balance", "context parallelism splits causal attention's work evenly (zig-zag chunks)"},
      {"scenario /parallelism/micro_batch_size", "samples per micro-batch"},
      {"scenario /parallelism/pipeline_schedule", ""},  // the registry's names: schedule_choices()
      {"scenario /parallelism/virtual_stages", "interleaved-1f1b: model chunks per GPU"},
      {"scenario /parallelism/stage_layers", "blocks per pipeline stage, one count per stage (uneven stages); with virtual stages one per model chunk, chunk j on stage j % pipeline"},
      {"scenario /parallelism/moe_dispatcher",
       "how tokens reach their experts: alltoall (NCCL, a row per token and expert, Megatron-Core's alltoall dispatcher) "
       "or deepep (once per GPU, and per node over RDMA, holding one of the token's experts: the flex dispatcher with DeepEP)"},
      {"scenario /parallelism/moe_node_limit",
       "node-limited routing: a token's experts lie on at most this many of the expert-parallel group's nodes (DeepSeek-V3's M = 4; "
       "Megatron-Core's --moe-router-group-topk); 0: any. It changes what DeepEP sends over RDMA"},
      {"scenario /parallelism/moe_shared_expert_overlap",
       "the shared experts run beside the expert all-to-alls, their input projection beside the dispatch and their output "
       "projection beside the combine (Megatron-Core --moe-shared-expert-overlap); no effect without shared experts"},
      {"scenario /parallelism/moe_dispatch_dtype",
       "what the all-to-alls toward the experts carry (forward dispatch, backward combine's gradient): the activations' dtype, or "
       "fp8 with a scale per 32 elements' bytes (DeepSeek-V3's FP8 dispatch, Megatron-Core's mxfp8 moe_dispatch_fwd_dtype); "
       "needs training.precision fp8"},
      {"scenario /parallelism/recompute_modules",
       "with recompute \"selective\": Megatron-Core's --recompute-modules, the sub-modules backward runs again (core_attn, "
       "layernorm, moe_act, mla_up_proj; mlp, moe and shared_experts whole, with their collectives and, for moe, its "
       "all-to-alls); without it, selective re-runs the attention scores (Korthikanti et al.)"},
      {"scenario /parallelism/sequence_parallel", "tensor parallelism also splits norms and dropout along the sequence"},
      {"scenario /parallelism/zero_stage", "ZeRO: 1 shards optimizer state, 2 also gradients, 3 also weights"},
      {"scenario /parallelism/fsdp", "fully sharded data parallel: the same as zero_stage 3"},
      {"scenario /parallelism/shard_size",
       "HSDP: ZeRO-3 shards within groups of this many consecutive data ranks and replicates across data / shard_size "
       "groups (FSDP's HYBRID_SHARD, torchtitan's data_parallel_shard_degree); 0 (default): one group of every data rank"},
      {"scenario /parallelism/offload_optimizer", "the optimizer state and step live on the host (ZeRO-Offload)"},
      {"scenario /parallelism/placement", "which groups are nearest: tp-dp-pp (tensor inside a node, then data, then pipeline: Megatron-LM's, DeepSpeed's and torchtitan's rank order) or tp-pp-dp (pipeline before data)"},
      {"scenario /parallelism/recompute", "activation recomputation: none, selective (attention), full (every block), stage, or op (torchtitan's op-level policy)"},
      {"scenario /parallelism/recompute_layers", "recompute full: only the first N blocks of each pipeline chunk (Megatron --recompute-method block); 0: every block"},
      {"scenario /parallelism/recompute_every", "recompute full: only every n-th block of a stage (torchtitan selective_ac_option = n); 0: every block"},
      {"scenario /parallelism/recompute_group", "recompute full: blocks checkpointed N at a time, each run keeping its input (Megatron --recompute-method uniform)"},
      {"scenario /parallelism/bucket_size", "gradient bucket size for the data-parallel reduction"},
      {"scenario /parallelism/first_bucket_size", "the first (last layers') bucket's size, reduced early"},
      {"scenario /parallelism/overlap_grad_reduce", "gradient reduction overlaps backward compute"},
      {"scenario /parallelism/overlap_param_gather",
       "ZeRO-1/2 under megatron-lm: the parameter all-gather runs during the next forward, each layer waiting for its own "
       "(Megatron-Core --overlap-param-gather)"},
      {"scenario /parallelism/pipeline_p2p", "pipeline sends: overlapped with compute, or blocking"},
      {"scenario /parallelism/all_reduce_algorithm", "the collective algorithm; auto: as NCCL's tuner picks per collective"},
      {"scenario /parallelism/updates", "sync, async (parameter server without waiting), hogwild or easgd"},
      {"scenario /parallelism/staleness_bound", "async: steps a worker may run ahead of the slowest (default: unbounded)"},
      {"scenario /parallelism/easgd_period", "easgd: steps between exchanges with the centre variable"},
      {"scenario /parallelism/bucket_order", "fifo, or priority (the first layers' gradients first, as ByteScheduler)"},
      {"scenario /parallelism/gradient_compression", "none, fp16, int8 or topk"},
      {"scenario /parallelism/topk_ratio", "topk: the share of gradient entries sent"},
      {"scenario /parallelism/framework", "whose ZeRO and bucketing to model: megatron-lm, deepspeed or fsdp"},
      {"scenario /parallelism/zero3", "DeepSpeed's or FSDP's ZeRO-3 knobs, named as in dtsim"},
      {"scenario /parallelism/zero3/gather", "gather per sub-module (DeepSpeed) or per wrapped unit (FSDP)"},
      {"scenario /parallelism/zero3/prefetch_bucket_params", "parameters gathered ahead in one prefetch (DeepSpeed stage3_prefetch_bucket_size)"},
      {"scenario /parallelism/zero3/persistence_threshold_params", "parameters below which a tensor stays gathered (DeepSpeed stage3_param_persistence_threshold)"},
      {"scenario /parallelism/zero3/max_reuse_distance_params", "parameters within which a gathered tensor is kept for reuse (DeepSpeed stage3_max_reuse_distance)"},
      {"scenario /parallelism/zero3/max_live_params", "DeepSpeed's stage3_max_live_parameters"},
      {"scenario /parallelism/zero3/forward_prefetch_depth", "units gathered ahead in forward (-1: unlimited)"},
      {"scenario /parallelism/zero3/backward_prefetch_depth", "units gathered ahead in backward (-1: unlimited)"},
      {"scenario /parallelism/zero3/backward_prefetch", "FSDP's backward_prefetch: backward_pre, backward_post or none"},
      {"scenario /parallelism/zero3/limit_all_gathers", "FSDP's limit_all_gathers (true: one gather ahead)"},
      {"scenario /parallelism/zero3/regather_for_recompute", "recomputation gathers the weights again"},
      {"scenario /parallelism/zero3/fp8_all_gather",
       "FSDP2 with torchao's float8 all-gather (torchtitan's float8.enable_fsdp_float8_all_gather): FP8 GEMM weights gathered "
       "in one byte each; needs training.precision \"fp8\""},
      {"scenario /parallelism/zero3/root_kept_gathered", "the root unit (embeddings, head) stays gathered through the step"},
      {"scenario /parallelism/zero3/reduce_bucket_params", "parameters per reduce-scatter bucket"},
      {"scenario /parallelism/zero3/reduce_dtype", "the reduce-scatter's precision: grad, fp32, bf16 or fp16"},
      {"scenario /parallelism/zero3/sync_after_backward", "the device synchronises after backward"},
      {"scenario /parallelism/zero3/collective_launch", "host time to launch one collective"},
      {"scenario /parallelism/pipeline_grad_reduce", "pipelines: data-parallel reduction overlapped, or after the flush (DeepSpeed's pipeline engine)"},
      {"scenario /parallelism/pipeline_reduce_dtype", "after-flush reduction's precision: grad, fp32, bf16 or fp16"},
      {"scenario /parallelism/activation_offload", "activations are copied to host memory and back"},
      {"scenario /parallelism/activation_offload_copies", "those copies overlap compute, or block it"},
      {"scenario /parallelism/expert", "expert-parallel GPUs"},
      {"scenario /parallelism/expert_tensor", "GPUs each expert's MLP is split over (Megatron-Core's expert tensor parallelism); the expert grid then folds over tensor x data GPUs (default: as tensor)"},
      {"scenario /parallelism/moe_a2a_overlap", "expert all-to-alls run beside another micro-batch's computation: Megatron-Core's 1F1B overlap or DualPipe"},
      {"scenario /parallelism/expert_skew", "how unevenly tokens go to experts (0: evenly)"},
      {"scenario /parallelism/expert_seed", "the seed that draws the skewed routing"},
      {"scenario /training", "how long and in what precision"},
      {"scenario /training/global_batch_size", "samples per optimizer step over all replicas"},
      {"scenario /training/gradient_accumulation_steps", "micro-batches per step per replica, instead of global_batch_size"},
      {"scenario /training/precision", "fp64, fp32, tf32, bf16, fp16 or fp8"},
      {"scenario /training/optimizer", "adam or sgd"},
      {"scenario /training/fp8_recipe",
       "FP8 scaling: delayed (an amax history), current (each tensor's own amax), blockwise (a scale per 1x128 tile and "
       "128x128 block, DeepSeek-V3's; GEMMs on the device's fp8_block_gemm_efficiency) or mxfp8 (an E8M0 scale per 32 "
       "elements, Blackwell)"},
      {"scenario /training/attention", "standard (scores in memory) or flash (fused)"},
      {"scenario /training/tokens", "tokens to train on (the run's length)"},
      {"scenario /training/train_batch_size", "DeepSpeed's name for global_batch_size"},
      {"scenario /training/train_iters", "Megatron's name for steps"},
      {"scenario /training/max_steps", "Hugging Face's name for steps"},
      {"scenario /training/train_samples", "samples to train on, instead of tokens"},
      {"scenario /training/steps", "optimizer steps to train for, instead of tokens"},
      {"scenario /training/price_per_gpu_hour_usd", "price per GPU-hour for the cost figures, USD"},
      {"scenario /training/deadline_days", "the plan gives the probability of finishing within this many days"},
      {"scenario /training/budget_usd", "the plan gives the probability of costing at most this, USD"},
      {"scenario /training/grad_accumulation", "separate (a gradient buffer per micro-batch sum) or fused into the wgrad GEMM"},
      {"scenario /input_pipeline", "the data loader: storage reads and CPU preprocessing per sample"},
      {"scenario /input_pipeline/sample", "bytes one sample reads from storage"},
      {"scenario /input_pipeline/storage_bandwidth", "storage read bandwidth per node"},
      {"scenario /input_pipeline/cpu_per_sample", "CPU time to prepare one sample"},
      {"scenario /input_pipeline/loader_workers_per_gpu", "data-loader processes per GPU"},
      {"scenario /stack", "the software stack: attention kernels, element-wise kernels, dispatch (docs/stacks.md)"},
      {"scenario /stack/preset", "a registered stack: default, pytorch-eager, torchtitan-compile, torchtitan-async-tp, megatron-te, megatron-te-tp-overlap, llm-foundry, pytorch-eager-2.8, deepspeed, deepspeed-0.5 (the deepspeed ones need framework deepspeed), horovod, horovod-0.16 (Horovod's tensor fusion, data parallelism only), jax-xla (JAX/XLA on TPU: compiled, collective matmul)"},
      {"scenario /stack/fusion_threshold", "Horovod's HOROVOD_FUSION_THRESHOLD: the largest fusion buffer (a horovod preset: 128 MiB, horovod-0.16: 64 MiB)"},
      {"scenario /stack/cycle_time", "Horovod's HOROVOD_CYCLE_TIME: the background thread's cycle; gradients ready in one cycle are fused (horovod: 1 ms, horovod-0.16: 5 ms)"},
      {"scenario /stack/zero3_gathers", "DeepSpeed's ZeRO-3: coalesced (0.6 and later) or per-parameter (0.3.13-0.5.10: one gather and one reduce-scatter per tensor, each gather after a device synchronisation)"},
      {"scenario /stack/gather_copies", "what FSDP does with an all-gather's output: none (FSDP1's flat parameter is its storage) or copy-out (FSDP2 copies it into the unsharded parameters on the compute stream before each forward and backward, and copies each unit's gradients into its reduce-scatter's input, cast to the reduce dtype; the pytorch-eager and torchtitan presets); applies with framework fsdp"},
      {"scenario /stack/attention", "attention kernels: gemm-curve, flash2 (the flash-attn package), flash3, cudnn, sdpa-math or sdpa-flash (PyTorch SDPA's own FlashAttention-2, the pytorch-eager and torchtitan presets)"},
      {"scenario /stack/elementwise", "element-wise kernels: fused (the model's), eager (one per op) or compiled"},
      {"scenario /stack/copies", "the copies and casts around fused attention: fused (none beyond the model's kernels), eager (torchtitan's QKV split copies and RoPE's fp32 casts and complex multiply, as eager PyTorch runs them) or eager-rotate-half (HF's rotate-half RoPE on the transposed q and k, as scripts/gpu_train.py writes it too)"},
      {"scenario /stack/norm", "how eager PyTorch runs RMSNorm: fused (one kernel each way: F.rms_norm from PyTorch 2.9, and LayerNorm always) or composite (the ops it is written as: torchtitan's and HF's RMSNorm, nn.RMSNorm up to PyTorch 2.8; 8 kernels forward, 16 backward, and the fp32 copy it keeps; the llm-foundry and pytorch-eager-2.8 presets); needs elementwise eager"},
      {"scenario /stack/swiglu", "where an eager stack's SwiGLU takes its gate and up from: chunked (views of one GEMM's output, y.chunk(2, -1): Megatron-LM unfused, scripts/gpu_train.py; silu, the product and two of the backward's kernels read a strided view and run unvectorised, and the backward writes a cat) or separate (two GEMMs' outputs: torchtitan, HF; the pytorch-eager and llm-foundry presets); element-wise eager only"},
      {"scenario /stack/gemm_shapes", "the GEMM shapes the stack hands cuBLAS: curve (every GEMM at the device's curve, the default preset), as-written (the model's shapes: unaligned ones run at cuBLAS's slower rates on a gemm_alignment \"cublas\" device; eager PyTorch, llm-foundry, Megatron, DeepSpeed) or padded (torch.compile's Inductor pads m, n, k to 16 bytes: the padded FLOPs at the aligned rate)"},
      {"scenario /stack/vocab_divisible_by", "Megatron-LM's --make-vocab-size-divisible-by: the vocabulary is padded to a multiple of this times parallelism.tensor (megatron and deepspeed presets: 128; others 0, the model's vocabulary as given)"},
      {"scenario /stack/loss", "the loss over the logits: fused (the model's kernel), eager-fp32 (F.cross_entropy on logits cast to fp32: five kernels) or compiled (the same under Inductor: one reduction each way; the torchtitan presets)"},
      {"scenario /stack/tp_overlap", "tensor-parallel collectives overlapped with their GEMMs: none, te-userbuffers (Transformer Engine) or async-tp (PyTorch)"},
      {"scenario /stack/comm_sms", "SMs a collective's kernels hold while it runs, taken from overlapped compute (0: no interference)"},
      {"scenario /stack/buffers", "optimizer and gradient buffers: zero-paper (the ZeRO paper's bytes) or framework (each framework's own, docs/memory.md)"},
      {"scenario /stack/fp8_weight_copies",
       "FP8 training: copy-and-transpose (Transformer Engine keeps both), none (FP8 all-gathered shards) or fp8-params (FP8 weights, "
       "Megatron's --fp8-param-gather)"},
      {"scenario /stack/grad_reduce_dtype", "Megatron-LM's data-parallel gradient buffer, held and reduced in fp32 (its default under bf16; the megatron-te presets) or bf16 (--grad-reduce-in-bf16; the update then casts its shard up to fp32 first, as a plain loop that keeps bf16 .grad does); framework megatron-lm, bf16 or fp8, ZeRO 0-1"},
      {"scenario /stack/allocator", "the caching allocator whose cache users read: none, pytorch-caching or pytorch-expandable"},
      {"scenario /stragglers", "slow GPUs, throttling, jitter and flapping links"},
      {"scenario /stragglers/slow_gpus", "GPUs slower for the whole run"},
      {"scenario /stragglers/slow_gpus/*/gpu", "which GPU"},
      {"scenario /stragglers/slow_gpus/*/slowdown", "its compute takes this many times as long"},
      {"scenario /stragglers/throttles", "GPUs slower for a while (thermal throttling)"},
      {"scenario /stragglers/throttles/*/gpu", "which GPU"},
      {"scenario /stragglers/throttles/*/slowdown", "its compute takes this many times as long meanwhile"},
      {"scenario /stragglers/throttles/*/start", "when the throttling starts, from the start of the step"},
      {"scenario /stragglers/throttles/*/duration", "how long it lasts"},
      {"scenario /stragglers/flapping_links", "network links that degrade and recover periodically"},
      {"scenario /stragglers/flapping_links/*/gpu", "the GPU whose link flaps"},
      {"scenario /stragglers/flapping_links/*/period", "time between degradations"},
      {"scenario /stragglers/flapping_links/*/degraded", "how long each degradation lasts"},
      {"scenario /stragglers/flapping_links/*/bandwidth_fraction", "the bandwidth left while degraded"},
      {"scenario /stragglers/flapping_links/*/degraded_latency", "the latency while degraded"},
      {"scenario /stragglers/jitter", "random per-kernel slowdowns"},
      {"scenario /stragglers/jitter/distribution", "exponential, lognormal, or empirical (measured)"},
      {"scenario /stragglers/jitter/sigma", "the spread of the slowdown"},
      {"scenario /stragglers/seed", "the seed that draws the jitter"},
      {"scenario /stragglers/backup_workers", "workers whose gradients a synchronous step does not wait for"},
      {"scenario /stragglers/rebalance_stages", "pipelines: give a slow GPU's stage fewer layers"},
      {"scenario /faults", "failures, restarts and checkpoints over the whole run"},
      {"scenario /faults/gpu_mtbf", "mean time between failures of one GPU"},
      {"scenario /faults/node_mtbf", "mean time between failures of one node"},
      {"scenario /faults/restart", "time from a failure to training again"},
      {"scenario /faults/checkpoint_interval", "time between checkpoints (default: Young/Daly's optimum)"},
      {"scenario /faults/checkpoint_save", "time to write one checkpoint"},
      {"scenario /simulation", "how dtsim simulates"},
      {"scenario /simulation/backend", "simgrid (flows share links) or analytical (closed-form collectives)"},
      {"scenario /simulation/steps", "steps replayed (asynchronous updates and priority buckets show over several)"},
      {"scenario /simulation/seed", "the seed of anything random in the replay"},
      {"scenario /reference", "a published measurement of this configuration, for dtsim validate"},
      {"scenario /reference/source", "where the measurement was published"},
      {"scenario /reference/step_time_s", "the measured step time, s"},
      {"scenario /reference/tflops_per_gpu", "the measured model TFLOP/s per GPU"},
      {"scenario /reference/flops_per_step", "the model FLOPs per step the source counts"},
      {"scenario /reference/group", "validate --suite summarises rows by this group (a stack, a paper)"},
      {"scenario /reference/ranking", "rows naming the same set are ranked against each other (Kendall tau, top-1)"},
      {"scenario /reference/tolerance_percent", "the step-time error the row may have and still pass, percent"},
      {"scenario /reference/peak_memory", "the published peak memory per GPU"},
      {"scenario /reference/memory_reading", "which reading peak_memory is: allocated, reserved, or device (nvidia-smi)"},
};
// "a, b or c": every registered pipeline schedule (strategies/schedules/registry.cpp).
std::string schedule_choices() {
  auto names = strategies::schedule_names();
  const std::string last = names.back();
  names.pop_back();
  return names.empty() ? last : fmt::format("{} or {}", fmt::join(names, ", "), last);
}

// "the model family: transformer, vit or cnn", from the registered kinds.
std::string kind_doc() {
  const auto& kinds = models::family_kinds();
  std::string out = "the model family: ";
  for (std::size_t i = 0; i < kinds.size(); ++i)
    out += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i].name;
  return out;
}

std::vector<std::pair<std::string, std::string>> all_docs() {
  std::vector<std::pair<std::string, std::string>> docs(std::begin(kDocs), std::end(kDocs));
  for (auto& [key, doc] : docs)
    if (key == "scenario /parallelism/pipeline_schedule") doc = schedule_choices();
  docs.emplace_back("scenario /model/kind", kind_doc());
  // Families that share a key (image_size) give it the same line; the first is shown.
  for (const auto& kind : models::family_kinds())
    for (const auto& [key, doc] : kind.docs) docs.emplace_back("scenario /model/" + key, doc);
  return docs;
}
}  // namespace

const std::vector<std::pair<std::string, std::string>>& key_docs() {
  static const std::vector<std::pair<std::string, std::string>> docs = all_docs();
  return docs;
}

}  // namespace dtsim::config
