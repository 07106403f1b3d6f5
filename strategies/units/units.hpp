#pragma once
// What the mechanism units (one file each, registered in strategies/unit.cpp) share with the rest
// of the planner.
#include <memory>

#include "sim/taskgraph/task_graph.hpp"
#include "strategies/unit.hpp"

namespace dtsim::strategies {

// How many times its even share of the tokens the most loaded GPU of an expert-parallel group
// gets in layer l of graph g under the router's skew (units/experts.cpp).
double slowest_expert_load(const ParallelismSpec& p, const models::ModelGraph& g, const models::Layer& l);

// Expert all-to-all overlap (units/experts.cpp): which passes of a stage's schedule run beside a
// pass of the other direction, and an all-to-all of `bytes` per GPU on `group` carried by a piece
// of a pass, beside work `hidden_work` of the paired pass (-1: beside nothing).
std::vector<bool> paired_passes(const std::vector<PipeOp>& ops);
taskgraph::InlineCollective overlapped_all_to_all(const ParallelismSpec& p, int group, double bytes, int hidden_work);
// One GPU's bytes for MoE layer l's dispatch all-to-all (and its combine) over an expert-parallel
// group of `gpus` GPUs on `nodes` nodes, by the scenario's token dispatcher (units/experts.cpp).
double moe_dispatch_bytes(const ParallelismSpec& p, const models::Layer& l, int gpus, int nodes);
// What the all-to-alls toward the experts carry under moe_dispatch_dtype "fp8", per byte of the
// activations' dtype (units/experts.cpp).
double fp8_dispatch_share(Precision precision);

// DeepSpeed's BF16_Optimizer runs the step (units/bf16_optimizer.cpp): bf16 without ZeRO.
bool bf16_optimizer(const ParallelismSpec& p, Precision t);

// DeepSpeed's or FSDP's ZeRO-3 runs the passes (rather than Megatron-LM's idealised one).
bool framework_zero3(const ParallelismSpec& p);
// Under expert parallelism the framework's ZeRO-3 (FSDP's, per unit) runs the dense layers and
// hands each MoE layer to the experts unit, its all-to-alls included (units/framework_zero3.cpp).
bool framework_hands_moe_layers(const ParallelismSpec& p);

}  // namespace dtsim::strategies
