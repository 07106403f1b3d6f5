#pragma once
// The C interface of libdtsim_cpu.so, the plugin that holds the CPU kernels `dtsim profile` times.
// The plugin is compiled for this machine's ISA (-march=native, CMake option
// DTSIM_PROFILE_NATIVE) while dtsim itself stays portable; cpu_loader.cpp loads it. Plain C so
// that no Eigen code compiled for one ISA can be mixed with Eigen code compiled for another.
extern "C" {

// Data, not code: the loader reads them before calling anything compiled for the ISA.
// dtsim_cpu_isa: the features the plugin was compiled for, '+'-separated ("avx512f+avx2+fma").
extern const char dtsim_cpu_isa[];
extern const int dtsim_cpu_abi;  // DTSIM_CPU_ABI

// Versions and flags: Eigen version, compiler, Eigen's SIMD sets in use, threads. 0 on success.
int dtsim_cpu_describe(char* eigen, int eigen_n, char* compiler, int compiler_n, char* simd, int simd_n, int* threads);

// A kernel ready to run: "gemm" (batch, m, n, k), or over `bytes`: "stream" (y = a x + y),
// "gelu", "softmax", "layernorm", "dropout", "launch" (a near-empty op through a framework-like
// dispatch) or "fork_join" (an empty OpenMP region over the threads). Null with `error` filled on failure.
void* dtsim_cpu_kernel_new(const char* kind, long long batch, long long m, long long n, long long k, double bytes,
                           char* error, int error_n);
// Runs it `times` times back to back.
void dtsim_cpu_kernel_run(void* kernel, long long times);
void dtsim_cpu_kernel_free(void* kernel);

// Convolutions: `shape` holds n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups
// (models::ConvShape's order). A convolution pass as the im2col formulation runs it, `pass`
// "conv_fwd", "conv_dgrad" or "conv_wgrad", over the first `groups` groups of the shape (the caller
// times a few and scales); run and freed as the kernels above. Null with `error` filled on failure.
void* dtsim_cpu_conv_new(const char* pass, const long long* shape, long long groups, char* error, int error_n);
// The forward convolution itself, the computation conv_fwd times, so a test can check it against
// the definition: x NCHW, w KCRS (C per group), y NKPQ (n*k*p*q floats). 0 on success.
int dtsim_cpu_conv2d(const float* x, const float* w, const long long* shape, float* y, char* error, int error_n);
}

#define DTSIM_CPU_ABI 2
