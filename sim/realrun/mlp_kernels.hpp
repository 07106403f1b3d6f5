#pragma once
// The C interface of libdtsim_mlp.so: the real trainer's compute (an fp32 Eigen MLP), compiled for
// this machine's ISA like libdtsim_cpu.so, so that the trainer runs the same code quality as the
// kernels the profiler times. Plain C: no Eigen code compiled for one ISA meets code compiled for
// another.
extern "C" {

// An MLP with `n_dims - 1` layers (dims[0] -> dims[1] -> ... ; ReLU between layers), squared-error
// loss on a synthetic batch of `batch` rows, weights drawn from `seed`. Null on a bad shape.
void* dtsim_mlp_new(int n_dims, const long long* dims, long long batch, unsigned seed);
long long dtsim_mlp_params(void* mlp);
// Forward and backward on the batch: the gradient of every weight, layer after layer, into `grad`.
void dtsim_mlp_gradients(void* mlp, float* grad);
// w -= lr * grad over all weights.
void dtsim_mlp_apply(void* mlp, const float* grad, float lr);
// The first `n` weights, for checks that workers stay in step.
void dtsim_mlp_weights(void* mlp, float* out, long long n);
void dtsim_mlp_free(void* mlp);
}
