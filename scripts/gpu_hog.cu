// A stand-in for NCCL's CTAs beside compute (scripts/gpu_microbench.py, issue 30): N thread blocks,
// one per SM (the dynamic shared memory asked for keeps a GEMM's block off that SM, as NCCL's
// blocks do), that either copy HBM to HBM (what a collective's channel does to local memory) or
// spin on the SM's clock (the SM taken, no memory traffic), until a deadline on the GPU's global
// timer. Each block adds the bytes it copied and its first and last timer reading to `stats`, so
// the caller gets the copy's own bandwidth over the time it ran.
//   nvcc -O3 -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -o libgpu_hog.so gpu_hog.cu
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stats[0]: bytes copied; stats[1]: earliest start (ns); stats[2]: latest end (ns).
__global__ void hog(const int4* __restrict__ src, int4* __restrict__ dst, long long vecs_per_block,
                    long long duration_ns, int mode, unsigned long long* stats) {
  extern __shared__ int4 reserved[];  // only reserved: it keeps other kernels' blocks off this SM
  __shared__ unsigned long long start;
  __shared__ int stop;
  if (threadIdx.x == 0) {
    start = global_ns();
    stop = 0;
    reserved[0] = make_int4(0, 0, 0, 0);
  }
  __syncthreads();
  const long long base = static_cast<long long>(blockIdx.x) * vecs_per_block;
  unsigned long long passes = 0;
  while (true) {
    if (mode == 0) {
      for (long long i = threadIdx.x; i < vecs_per_block; i += blockDim.x) dst[base + i] = src[base + i];
      ++passes;
    } else {
      const long long until = clock64() + 20000;  // about 10 us at 2 GHz between timer checks
      while (clock64() < until) {
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) stop = (global_ns() - start) >= static_cast<unsigned long long>(duration_ns);
    __syncthreads();
    if (stop) break;
  }
  if (threadIdx.x == 0) {
    const unsigned long long end = global_ns();
    const unsigned long long bytes = passes * static_cast<unsigned long long>(vecs_per_block) * 16ull * 2ull;
    atomicAdd(&stats[0], bytes);
    atomicMin(&stats[1], start);
    atomicMax(&stats[2], end);
  }
}

}  // namespace

extern "C" int hog_launch(const void* src, void* dst, long long bytes_per_block, int blocks, int threads,
                          int shared_bytes, long long duration_ns, int mode, unsigned long long* stats,
                          void* stream) {
  cudaError_t e = cudaFuncSetAttribute(hog, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  hog<<<blocks, threads, shared_bytes, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const int4*>(src), static_cast<int4*>(dst), bytes_per_block / 16, duration_ns, mode, stats);
  return static_cast<int>(cudaGetLastError());
}

// The device's own view, for the record: SMs and the shared memory one block may take.
extern "C" int hog_device(int* sm_count, int* max_shared_per_block, int* max_shared_per_sm) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(max_shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(max_shared_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  return static_cast<int>(e);
}
