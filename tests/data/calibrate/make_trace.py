# Writes pytorch_trace.json: a hand-made trace of one small training step on one GPU, in the
# schema torch.profiler's export_chrome_trace writes (kineto's ChromeTraceLogger,
# pytorch/kineto libkineto/src/output_json.cpp @114171df: handleTraceStart's header,
# writeCompleteEvent's "X" events, the kernel args of CuptiActivity.h's visitTypedMetadata,
# the ac2g flow events). Not measured: no GPU or torch on the machine that made it. The host
# launches a kernel every 9 us (a 31 us pause between the layers, 150 us before six small fills
# that the host then paces), each call 4.5 us, and a
# kernel starts 5 us after its launch or when its stream frees, whichever is later.
import json

KERNELS = [  # name, duration (us), stream, cpu op
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 40.0, 7, "aten::mm"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)", 30.0, 7, "aten::_flash_attention_forward"),
    ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTN", 20.0, 7, "aten::mm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)", 3.0, 7, "aten::add"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", 4.0, 7, "aten::native_layer_norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)", 3.0, 7, "aten::silu"),
]
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::BFloat16>, at::detail::Array<char*, 1>)", 2.0, 7, "aten::fill_")
STEP = KERNELS * 2 + [FILL] * 6 + [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 60.0, 20, "nccl:all_reduce"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*)", 25.0, 7, "aten::_fused_adamw_"),
]
PID, TID = 4242, 4242
events = [
    {"name": "process_name", "ph": "M", "ts": 990.0, "pid": PID, "tid": 0, "args": {"name": "python"}},
    {"name": "process_name", "ph": "M", "ts": 990.0, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    {"name": "thread_name", "ph": "M", "ts": 990.0, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    {"name": "thread_name", "ph": "M", "ts": 990.0, "pid": 0, "tid": 20, "args": {"name": "stream 20 "}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": PID, "tid": TID, "ts": 990.0, "dur": 3.0,
     "args": {"External id": 1, "cbid": 41, "correlation": 300}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, "ts": 995.0, "dur": 2.0,
     "args": {"External id": 1, "device": 0, "context": 1, "stream": 7, "correlation": 300, "bytes": 4194304,
              "memory bandwidth (GB/s)": 2097.152}},
]
host, free = 1000.0, {7: 997.0, 20: 0.0}
for i, (name, dur, stream, op) in enumerate(STEP):
    ext, corr = 10 + i, 310 + i
    start = max(host + 5.0, free[stream])
    free[stream] = start + dur
    events += [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": PID, "tid": TID, "ts": host - 1.0, "dur": 6.5,
         "args": {"External id": ext, "Record function id": 0, "Ev Idx": i}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID, "ts": host, "dur": 4.5,
         "args": {"External id": ext, "cbid": 211, "correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start, "dur": dur,
         "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": stream, "correlation": corr,
                  "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.0, "warps per SM": 8.0,
                  "grid": [132, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 13}},
        {"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": host, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": start, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    host += {5: 31.0, 11: 150.0}.get(i, 9.0)
events.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": host + 100.0})
trace = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376, "computeMajor": 9,
                          "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                          "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
                          "sharedMemPerMultiprocessor": 233472, "regsPerMultiprocessor": 65536,
                          "sharedMemPerBlockOptin": 232448}],
    "record_shapes": 0,
    "with_stack": 0,
    "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1727000000000000000,
    "traceEvents": events,
    "traceName": "rank0.1727000000000.pt.trace.json",
}
with open("pytorch_trace.json", "w") as f:
    json.dump(trace, f, indent=2)
    f.write("\n")
