#!/usr/bin/env python3
"""Kernel microbenchmarks on one NVIDIA GPU, for calibrating dtsim's per-kernel costs (issue 30).

Not training runs: each section times kernels by shape (docs/gpu_check.md, "Kernel microbenchmarks
on the H200"; tests H200Microbench.* read the file it writes).

  gpu_microbench.py --out FILE.json [--hog libgpu_hog.so] [--budget SECONDS] [--only a,b]

Sections, in the order they run (each under its share of the budget; the JSON is rewritten after
every row, so a kill keeps what was measured):
  env          the GPU, clocks, driver, versions
  stream       HBM copy, scale, triad, cast and fill by size (1 MiB .. 2 GiB)
  interference GEMMs, a copy and flash attention beside N blocks of scripts/gpu_hog.cu that copy
               or spin (NCCL's channels stand-in): the slowdown by N
  attention    SDPA flash, cuDNN and memory-efficient kernels, forward and forward + backward, at
               FlashAttention's benchmark shapes (16k tokens, 2048 / head-dim heads), a head sweep
               and GPT-2 XL's shape with dropout
  eager        the memory-bound ops eager PyTorch runs in a transformer and ResNet step (norms,
               activations, the fp32 loss, casts, cat, strided element-wise, batch norm), with the
               kernels each launches
  gemm         bf16 torch.matmul over m, n, k in 256 .. 16384, the three training layouts at a few
               shapes, and unaligned leading dimensions
  dispatch     host time per eager op, GPU time per kernel from a CUDA graph

Timing: CUDA events around a run of calls long enough (~10 ms) to hide the launch, after warm-up;
samples' median and spread (1.4826 MAD / median). Random data (values in a normal distribution),
since the GPU's clock depends on the data.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

MiB = 1 << 20


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


class Out:
    def __init__(self, path):
        self.path, self.data = path, {"schema": "dtsim gpu_microbench 1", "started_unix": time.time()}

    def add(self, section, row):
        self.data.setdefault(section, []).append(row)
        self.save()

    def set(self, key, value):
        self.data[key] = value
        self.save()

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)


class Bench:
    def __init__(self, torch):
        self.torch = torch

    def median_spread(self, xs):
        m = statistics.median(xs)
        mad = statistics.median([abs(x - m) for x in xs])
        return m, (1.4826 * mad / m if m > 0 else 0.0)

    def time(self, fn, target_ms=10.0, samples=7, warmup=2):
        """(median ms per call, spread, calls per sample) by CUDA events."""
        torch = self.torch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        one = max(a.elapsed_time(b), 1e-3)
        inner = max(1, min(2000, int(target_ms / one)))
        for _ in range(warmup):
            fn()
        xs = []
        for _ in range(samples):
            a.record()
            for _ in range(inner):
                fn()
            b.record()
            b.synchronize()
            xs.append(a.elapsed_time(b) / inner)
        m, s = self.median_spread(xs)
        return m, s, inner

    def time_graph(self, fn, target_ms=10.0, samples=7):
        """Like time() but replaying the calls from a CUDA graph: no launch cost in the figure."""
        torch = self.torch
        m0, _, _ = self.time(fn, target_ms=2.0, samples=3, warmup=1)
        inner = max(1, min(500, int(target_ms / max(m0, 1e-3))))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(inner):
                fn()
        g.replay()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        xs = []
        for _ in range(samples):
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            xs.append(a.elapsed_time(b) / inner)
        del g
        m, sp = self.median_spread(xs)
        return m, sp, inner


def smi(query):
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
        return r.stdout.strip()
    except Exception as e:  # noqa: BLE001
        return repr(e)


# ----------------------------------------------------------------------------------------------

def sec_env(torch, out, ctx):
    p = torch.cuda.get_device_properties(0)
    env = {"gpu": p.name, "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
           "capability": f"{p.major}.{p.minor}", "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "python": sys.version.split()[0],
           "l2_bytes": getattr(p, "L2_cache_size", None),
           "smi": smi("name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.limit,"
                      "temperature.gpu,clocks_throttle_reasons.active")}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    out.set("env", env)
    log("env:", env)


def sec_stream(torch, out, ctx):
    B = ctx["bench"]
    for mib in [1, 4, 16, 64, 256, 1024, 2048]:
        if ctx["over"]():
            return
        n = mib * MiB // 2
        a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        b = torch.empty_like(a)
        c = torch.randn_like(a)
        f32 = torch.empty(n, device="cuda", dtype=torch.float32)
        ops = {
            "copy": (lambda: b.copy_(a), 4 * n),
            "scale": (lambda: torch.mul(a, 2.0, out=b), 4 * n),
            "triad": (lambda: torch.add(b, c, alpha=2.0, out=a), 6 * n),
            "cast_bf16_fp32": (lambda: f32.copy_(a), 6 * n),
            "cast_fp32_bf16": (lambda: b.copy_(f32), 6 * n),
            "fill": (lambda: b.fill_(1.0), 2 * n),
        }
        for name, (fn, nbytes) in ops.items():
            try:
                ms, sp, inner = B.time_graph(fn)
                row = {"op": name, "mib": mib, "bytes_moved": nbytes, "ms": ms, "spread": sp, "calls": inner,
                       "gb_s": nbytes / (ms * 1e-3) / 1e9, "timing": "cuda-graph"}
            except Exception as e:  # noqa: BLE001
                row = {"op": name, "mib": mib, "error": repr(e)[:300]}
            out.add("stream", row)
        log(f"stream {mib} MiB:", ", ".join(f"{r['op']} {r.get('gb_s', 0):.0f} GB/s"
                                            for r in out.data["stream"][-len(ops):]))
        del a, b, c, f32
    torch.cuda.empty_cache()


def hog_setup(torch, ctx, path):
    lib = ctypes.CDLL(path)
    lib.hog_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.hog_launch.restype = ctypes.c_int
    sm, smb, sms = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    lib.hog_device(ctypes.byref(sm), ctypes.byref(smb), ctypes.byref(sms))
    per_block = 4 * MiB
    blocks_max = 132
    src = torch.randn(per_block * blocks_max // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    stats = torch.zeros(3, device="cuda", dtype=torch.int64)
    stream = torch.cuda.Stream()
    shared = min(120 * 1024, smb.value)
    info = {"sm_count": sm.value, "max_shared_per_block": smb.value, "max_shared_per_sm": sms.value,
            "shared_per_block": shared, "threads": 512, "bytes_per_block": per_block}

    def launch(n, mode, duration_ms):
        stats.zero_()
        stats[1] = 1 << 62
        torch.cuda.synchronize()
        rc = lib.hog_launch(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), per_block, n, 512,
                            shared, int(duration_ms * 1e6), mode, ctypes.c_void_p(stats.data_ptr()),
                            ctypes.c_void_p(stream.cuda_stream))
        if rc != 0:
            raise RuntimeError(f"hog_launch returned CUDA error {rc}")

    def result():
        torch.cuda.synchronize()
        moved, t0, t1 = (int(x) for x in stats.tolist())
        return moved, (t1 - t0) * 1e-9  # the global timer counts nanoseconds

    return launch, result, info


def interference_ops(torch):
    ops = {}

    def gemm(m, n, k):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        return (lambda: torch.matmul(a, b, out=c)), 2.0 * m * n * k
    shapes = [(8192, 8192, 8192), (8192, 14336, 4096), (8192, 4096, 14336), (8192, 4096, 4096),
              (8192, 1792, 4096), (4096, 4096, 1024), (2048, 2048, 2048)]
    if os.environ.get("GPU_MICROBENCH_MORE_GEMMS"):  # small models' and TP slices' GEMMs (2nd run)
        shapes += [(8192, 2048, 2048), (8192, 8192, 2048), (8192, 2048, 8192), (8192, 3072, 3072),
                   (4096, 4096, 4096), (16384, 4096, 4096), (8192, 6144, 4096), (2048, 8192, 8192),
                   (8192, 1024, 4096), (8192, 4096, 1024), (8192, 512, 4096), (1024, 1024, 1024)]
    for m, n, k in shapes:
        ops[f"gemm {m}x{n}x{k}"] = gemm(m, n, k)
    x = torch.randn(256 * MiB, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ops["copy 512 MiB"] = (lambda: y.copy_(x)), 0.0
    h = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    ops["layer_norm 8192x4096"] = (lambda: torch.nn.functional.layer_norm(h, (4096,), w, w)), 0.0
    q = torch.randn(1, 8192, 32, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    kv = torch.randn(1, 8192, 32, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def attn():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True)
    ops["flash fwd 1x32x8192x128 causal"] = attn, 0.0
    return ops


def sec_interference(torch, out, ctx):
    if not ctx.get("hog"):
        out.set("interference_skipped", "no --hog library")
        return
    launch, result, info = hog_setup(torch, ctx, ctx["hog"])
    out.set("interference_setup", info)
    B = ctx["bench"]
    # The hog alone: the copy bandwidth N blocks draw.
    for n in [1, 4, 8, 16, 24, 32, 66, 132]:
        launch(n, 0, 20.0)
        moved, secs = result()
        out.add("hog_alone", {"blocks": n, "bytes": moved, "seconds": secs, "gb_s": moved / max(secs, 1e-9) / 1e9})
    log("hog alone:", ", ".join(f"{r['blocks']}: {r['gb_s']:.0f} GB/s" for r in out.data["hog_alone"]))
    ops = interference_ops(torch)
    op_stream = torch.cuda.Stream()
    for name, (fn, flops) in ops.items():
        if ctx["over"]():
            return
        alone, sp, _ = B.time(fn, target_ms=5.0)
        reps = max(3, int(30.0 / alone))
        for n in [8, 16, 24, 32, 66]:
            for mode, mode_name in [(1, "spin"), (0, "copy")]:
                duration = reps * alone * 4 + 10.0
                launch(n, mode, duration)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(op_stream):
                    torch.cuda._sleep(2_000_000)  # the hog's blocks take their SMs before the op launches
                    a.record()
                    for _ in range(reps):
                        fn()
                    b.record()
                b.synchronize()
                ms = a.elapsed_time(b) / reps
                moved, secs = result()
                row = {"op": name, "blocks": n, "mode": mode_name, "alone_ms": alone, "alone_spread": sp,
                       "beside_ms": ms, "slowdown": ms / alone, "reps": reps, "hog_ms": secs * 1e3,
                       "hog_gb_s": moved / max(secs, 1e-9) / 1e9, "inside": ms * reps < 0.9 * duration,
                       "tflops_alone": flops / (alone * 1e-3) / 1e12 if flops else None}
                out.add("interference", row)
        again, _, _ = B.time(fn, target_ms=5.0)
        out.add("interference_drift", {"op": name, "alone_ms": alone, "alone_again_ms": again})
        rows = [r for r in out.data["interference"] if r["op"] == name]
        log(f"{name}: alone {alone:.3f} ms;", " ".join(f"{r['blocks']}{r['mode'][0]} x{r['slowdown']:.2f}"
                                                       for r in rows))


def sec_attention(torch, out, ctx):
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B = ctx["bench"]
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}

    def one(backend, b, h, hkv, s, d, causal, dropout=0.0, note=""):
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
        v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
        do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        gqa = {"enable_gqa": True} if hkv != h else {}

        def fwd():
            with sdpa_kernel([backends[backend]]):
                with torch.no_grad():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout, **gqa)

        def fwd_bwd():
            q.grad = k.grad = v.grad = None  # no accumulation kernels in the figure
            with sdpa_kernel([backends[backend]]):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout, **gqa)
            o.backward(do)
        flops = 4.0 * b * h * s * s * d / (2 if causal else 1)  # FlashAttention's benchmark convention
        row = {"backend": backend, "batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d,
               "causal": causal, "dropout": dropout, "fwd_flops": flops, "note": note}
        try:
            f_ms, f_sp, _ = B.time(fwd)
            fb_ms, fb_sp, _ = B.time(fwd_bwd)
            row.update(fwd_ms=f_ms, fwd_spread=f_sp, fwd_bwd_ms=fb_ms, fwd_bwd_spread=fb_sp,
                       fwd_tflops=flops / (f_ms * 1e-3) / 1e12, fwd_bwd_tflops=3.5 * flops / (fb_ms * 1e-3) / 1e12,
                       bwd_tflops=2.5 * flops / (max(fb_ms - f_ms, 1e-6) * 1e-3) / 1e12)
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)[:300]
        out.add("attention", row)
        return row

    # GPT-2 XL's attention (head dim 64, 25 heads), with and without dropout: dtsim's shortfall there.
    for backend in ["flash", "efficient", "cudnn"]:
        for p in [0.0, 0.1]:
            one(backend, 8, 25, 25, 1024, 64, True, p, "gpt2-xl")
    # How the kernel fills the GPU: heads at 8k, head dim 128, causal (dtsim's grid model).
    for h in [1, 2, 4, 8, 16, 32, 64]:
        one("flash", 1, h, h, 8192, 128, True, note="heads")
    one("flash", 1, 32, 8, 8192, 128, True, note="llama3-8b gqa")
    one("flash", 1, 4, 1, 8192, 128, True, note="llama3-8b tp8 gqa")
    log("attention: gpt2-xl and heads done")
    # FlashAttention's benchmark grid: batch x seq = 16k, heads = 2048 / head dim.
    for backend in ["flash", "cudnn", "efficient"]:
        for d in [64, 128]:
            for causal in [False, True]:
                for s in [512, 1024, 2048, 4096, 8192, 16384]:
                    if ctx["over"]():
                        return
                    one(backend, 16384 // s, 2048 // d, 2048 // d, s, d, causal, note="fa-grid")
        rows = [r for r in out.data["attention"] if r["backend"] == backend and r["note"] == "fa-grid"]
        log(f"attention {backend}:", " ".join(f"{r['head_dim']}{'c' if r['causal'] else 'n'}{r['seq']}:"
                                              f"{r.get('fwd_tflops', 0):.0f}/{r.get('fwd_bwd_tflops', 0):.0f}"
                                              for r in rows))
    torch.cuda.empty_cache()


def kernels_of(torch, fn):
    """The CUDA kernels one call launches: [(name, us)]."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ks = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).split(".")[-1] == "CUDA":
            ks.append((e.name[:120], round(e.time_range.elapsed_us(), 2)))
    return ks


def eager_ops(torch):
    F = torch.nn.functional
    T, H, FF = 8192, 4096, 14336
    bf = dict(device="cuda", dtype=torch.bfloat16)
    ops = []

    def grad_op(name, make, fn, nbytes_fwd, nbytes_bwd, note=""):
        ops.append((name, make, fn, nbytes_fwd, nbytes_bwd, note))

    e = 2
    grad_op("layer_norm", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.ones(H, **bf).requires_grad_(),
                                   torch.zeros(H, **bf).requires_grad_()],
            lambda x, w, b: F.layer_norm(x, (H,), w, b), 2 * T * H * e, 3 * T * H * e, "ATen fused")
    grad_op("rms_norm", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.ones(H, **bf).requires_grad_()],
            lambda x, w: F.rms_norm(x, (H,), w, 1e-5), 2 * T * H * e, 3 * T * H * e, "F.rms_norm")

    def rms_manual(x, w):  # as Llama's reference code and HF write it: fp32 inside
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * w
    grad_op("rms_norm_manual", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.ones(H, **bf).requires_grad_()],
            rms_manual, 2 * T * H * e, 3 * T * H * e, "x.float(), pow, mean, rsqrt, mul, type_as, mul")
    grad_op("gelu_tanh", lambda: [torch.randn(T, FF, **bf).requires_grad_()],
            lambda x: F.gelu(x, approximate="tanh"), 2 * T * FF * e, 3 * T * FF * e)
    grad_op("swiglu", lambda: [torch.randn(T, FF, **bf).requires_grad_(), torch.randn(T, FF, **bf).requires_grad_()],
            lambda a, b: F.silu(a) * b, 3 * T * FF * e, 5 * T * FF * e, "silu(a) * b, two kernels")
    grad_op("dropout", lambda: [torch.randn(T, H, **bf).requires_grad_()],
            lambda x: F.dropout(x, 0.1, True), 2 * T * H * e + T * H, 2 * T * H * e + T * H, "mask as bytes")
    grad_op("residual_add", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.randn(T, H, **bf).requires_grad_()],
            lambda a, b: a + b, 3 * T * H * e, 2 * T * H * e)
    for V in [50257, 128256]:
        Tl = 8192 if V < 100000 else 4096
        grad_op(f"cross_entropy_fp32 V={V}", lambda Tl=Tl, V=V: [torch.randn(Tl, V, **bf).requires_grad_(),
                                                                  torch.randint(0, V, (Tl,), device="cuda")],
                lambda z, y: F.cross_entropy(z.float(), y), Tl * V * (e + 4 + 4), Tl * V * (4 + 12 + 4 + e),
                "torchtitan: cross_entropy(pred.float(), labels)")
    grad_op("cat3", lambda: [torch.randn(T, H, **bf).requires_grad_() for _ in range(3)],
            lambda a, b, c: torch.cat([a, b, c], dim=-1), 6 * T * H * e, 6 * T * H * e, "qkv split's backward")

    def strided_mul(x, c):  # (b, s, h, d) seen as (b, h, s, d), as RoPE on q runs
        return x.view(1, T, 32, 128).transpose(1, 2) * c.view(1, T, 32, 128).transpose(1, 2)
    grad_op("mul_strided", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.randn(T, H, **bf)],
            strided_mul, 3 * T * H * e, 3 * T * H * e, "both operands transposed views")
    grad_op("mul_contiguous", lambda: [torch.randn(T, H, **bf).requires_grad_(), torch.randn(T, H, **bf)],
            lambda x, c: x * c, 3 * T * H * e, 3 * T * H * e)
    cl = dict(memory_format=torch.channels_last)
    for shape in [(256, 64, 112, 112), (256, 256, 56, 56), (256, 2048, 7, 7)]:
        n = shape[0] * shape[1] * shape[2] * shape[3]
        grad_op(f"batch_norm {shape}", lambda shape=shape: [torch.randn(*shape, **bf).to(**cl).requires_grad_(),
                                                           torch.ones(shape[1], **bf).requires_grad_(),
                                                           torch.zeros(shape[1], **bf).requires_grad_()],
                lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), 2 * n * e, 3 * n * e,
                "channels_last, bf16 input and affine, as gpu_train.py's ResNet-50")
        grad_op(f"relu {shape}", lambda shape=shape: [torch.randn(*shape, **bf).to(**cl).requires_grad_()],
                lambda x: F.relu(x), 2 * n * e, 3 * n * e)
    return ops


def sec_eager(torch, out, ctx):
    B = ctx["bench"]
    for name, make, fn, nb_f, nb_b, note in eager_ops(torch):
        if ctx["over"]():
            return
        row = {"op": name, "note": note, "bytes_fwd": nb_f, "bytes_bwd": nb_b}
        try:
            args = make()
            leaf = [a for a in args if a.requires_grad]

            def fwd():
                with torch.no_grad():
                    return fn(*args)
            y = fn(*args)
            g = torch.randn_like(y)

            def fwd_bwd():
                for a in leaf:
                    a.grad = None
                fn(*args).backward(g)
            f_ms, f_sp, _ = B.time(fwd)
            fb_ms, fb_sp, _ = B.time(fwd_bwd)
            row.update(fwd_ms=f_ms, fwd_spread=f_sp, fwd_bwd_ms=fb_ms, fwd_bwd_spread=fb_sp,
                       fwd_gb_s=nb_f / (f_ms * 1e-3) / 1e9, bwd_gb_s=nb_b / (max(fb_ms - f_ms, 1e-6) * 1e-3) / 1e9)
            try:
                row["fwd_kernels"] = kernels_of(torch, fwd)
                row["fwd_bwd_kernels"] = kernels_of(torch, fwd_bwd)
            except Exception as e:  # noqa: BLE001
                row["kernels_error"] = repr(e)[:200]
            del args, leaf, y, g
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)[:300]
        out.add("eager", row)
        log(f"eager {name}: fwd {row.get('fwd_ms', -1):.3f} ms {row.get('fwd_gb_s', 0):.0f} GB/s, "
            f"fwd+bwd {row.get('fwd_bwd_ms', -1):.3f} ms, kernels {len(row.get('fwd_bwd_kernels', []))}")
        torch.cuda.empty_cache()


def sec_gemm(torch, out, ctx):
    B = ctx["bench"]
    bf = dict(device="cuda", dtype=torch.bfloat16)

    def one(m, n, k, layout="nn", note=""):
        row = {"m": m, "n": n, "k": k, "layout": layout, "note": note}
        try:
            a = torch.randn(m, k, **bf) if layout[0] == "n" else torch.randn(k, m, **bf).t()
            b = torch.randn(k, n, **bf) if layout[1] == "n" else torch.randn(n, k, **bf).t()
            c = torch.empty(m, n, **bf)
            ms, sp, inner = B.time(lambda: torch.matmul(a, b, out=c), target_ms=8.0, samples=5, warmup=2)
            row.update(ms=ms, spread=sp, calls=inner, tflops=2.0 * m * n * k / (ms * 1e-3) / 1e12)
            del a, b, c
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)[:300]
        out.add("gemm", row)
        return row
    # Alignment and the training layouts first (few), then the grid (many).
    for n in [50257, 50264, 50304]:
        for layout in ["nt", "nn", "tn"]:
            one(8192, n, 1600, layout, "gpt2 output layer")
    for m, n, k in [(8192, 14336, 4096), (8192, 4096, 14336), (8192, 6144, 4096), (8192, 1792, 4096),
                    (8192, 4096, 512), (8192, 4800, 1600), (8192, 1600, 6400)]:
        for layout in ["nt", "nn", "tn"]:
            one(m, n, k, layout, "training layouts")
    for k in [64, 128]:
        one(8192, 8192, k, "nn", "shallow k")
    log("gemm: layouts done")
    dims = [256, 512, 1024, 2048, 4096, 8192, 16384]
    for m in dims:
        for n in dims:
            for k in dims:
                if 2.0 * m * n * k > 4.5e12:
                    continue
                if ctx["over"]():
                    return
                one(m, n, k)
        rows = [r for r in out.data["gemm"] if r["m"] == m and r["note"] == ""]
        log(f"gemm m={m}: best {max((r.get('tflops', 0) for r in rows), default=0):.0f} TFLOP/s")


def sec_dispatch(torch, out, ctx):
    x = torch.zeros(1, device="cuda")
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5000):
        x.add_(1)
    host = (time.perf_counter() - t0) / 5000 * 1e6
    torch.cuda.synchronize()
    B = ctx["bench"]
    g_ms, _, _ = B.time_graph(lambda: x.add_(1), target_ms=2.0)
    e_ms, _, _ = B.time(lambda: x.add_(1), target_ms=5.0)
    y = torch.zeros(64, 64, device="cuda")
    t0 = time.perf_counter()
    for _ in range(2000):
        torch.relu(y)
    host_alloc = (time.perf_counter() - t0) / 2000 * 1e6
    torch.cuda.synchronize()
    out.set("dispatch", {"torch_op_host_us": host, "graph_kernel_us": g_ms * 1e3, "eager_loop_gpu_us": e_ms * 1e3,
                         "torch_op_with_output_host_us": host_alloc,
                         "note": "host seconds per x.add_(1) on a 1-element tensor, 5,000 back to back; GPU time "
                                 "per tiny kernel from a CUDA graph; per call in an eager loop (launch-bound); "
                                 "host per torch.relu(y) on 64x64 (allocates its output)"})
    log("dispatch:", out.data["dispatch"])


BLOCKS = {  # weight shapes of one transformer block (out, in), norms last
    "llama3-8b": [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096), (14336, 4096), (14336, 4096),
                  (4096, 14336), (4096,), (4096,)],
    "gpt2-xl": [(4800, 1600), (4800,), (1600, 1600), (1600,), (6400, 1600), (6400,), (1600, 6400), (1600,),
                (1600,), (1600,), (1600,), (1600,)],
}


def sec_fsdp(torch, out, ctx):
    """FSDP2's copies around its collectives, on one GPU (no NCCL): the reduce-scatter's copy-in
    (torch._chunk_cat of the unsharded gradients into the reduce dtype), the all-gather's copy-in
    (torch._foreach_copy_ of the shards, cast to the parameter dtype) and copy-out
    (torch.split_with_sizes_copy into the unsharded parameters), and the fused AdamW step of a shard."""
    B = ctx["bench"]
    world = 8
    for name, shapes in BLOCKS.items():
        numels = [math.prod(sh) for sh in shapes]
        total = sum(numels)
        bf = dict(device="cuda", dtype=torch.bfloat16)
        grads = [torch.randn(*sh, **bf) for sh in shapes]

        def row(op, fn, nbytes, note=""):
            r = {"block": name, "op": op, "world": world, "params": total, "bytes": nbytes, "note": note}
            try:
                ms, sp, calls = B.time(fn)
                r.update(ms=ms, spread=sp, calls=calls, gb_s=nbytes / (ms * 1e-3) / 1e9)
            except Exception as e:  # noqa: BLE001
                r["error"] = repr(e)[:300]
            out.add("fsdp", r)
            log(f"fsdp {name} {op}: {r.get('ms', -1):.3f} ms, {r.get('gb_s', 0):.0f} GB/s {r.get('error', '')[:80]}")
        for dt, size in [(torch.float32, 4), (torch.bfloat16, 2)]:
            rs_in = torch.empty(world, total // world, device="cuda", dtype=dt)
            row(f"reduce-scatter copy-in to {str(dt)[6:]}", lambda rs_in=rs_in: torch._chunk_cat(grads, 0, world, out=rs_in),
                total * (2 + size), "torch._chunk_cat(grads, 0, world, out=...)")
        shards32 = [torch.randn(n // world, device="cuda") for n in numels]
        ag_out = torch.empty(world, total // world, **bf)
        dsts = list(torch.split(ag_out[0], [n // world for n in numels]))
        row("all-gather copy-in fp32 to bf16", lambda: torch._foreach_copy_(dsts, shards32), total // world * 6,
            "torch._foreach_copy_(splits of the all-gather input, fp32 shards)")
        unsharded = [torch.empty(n, **bf).view(world, n // world) for n in numels]
        row("all-gather copy-out", lambda: torch.split_with_sizes_copy(ag_out, [n // world for n in numels], dim=1,
                                                                       out=unsharded), total * 4,
            "torch.split_with_sizes_copy(all-gather output, dim=1, out=unsharded params)")
        params = [torch.nn.Parameter(torch.randn(n // world, device="cuda")) for n in numels]
        for p_ in params:
            p_.grad = torch.randn_like(p_)
        for fused in (True, False):
            try:
                opt = torch.optim.AdamW(params, lr=1e-4, fused=fused, foreach=None if fused else True)
                row(f"AdamW {'fused' if fused else 'foreach'} step, fp32 shard", opt.step, total // world * 28,
                    "reads p, g, m, v; writes p, m, v")
            except Exception as e:  # noqa: BLE001
                out.add("fsdp", {"block": name, "op": f"AdamW fused={fused}", "error": repr(e)[:300]})
        del grads, shards32, ag_out, dsts, unsharded, params
        torch.cuda.empty_cache()


SECTIONS = [("env", sec_env, 0.02), ("stream", sec_stream, 0.08), ("interference", sec_interference, 0.22),
            ("attention", sec_attention, 0.22), ("eager", sec_eager, 0.16), ("gemm", sec_gemm, 0.25),
            ("dispatch", sec_dispatch, 0.05), ("fsdp", sec_fsdp, 0.05)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hog", help="libgpu_hog.so built from scripts/gpu_hog.cu")
    ap.add_argument("--budget", type=float, default=180.0, help="seconds for all sections")
    ap.add_argument("--only", default="", help="comma-separated sections")
    a = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    out = Out(a.out)
    only = [s for s in a.only.split(",") if s]
    start = time.time()
    out.set("budget_s", a.budget)
    for name, fn, share in SECTIONS:
        if only and name not in only:
            continue
        s0 = time.time()
        # Each section may use its share plus whatever earlier sections left, never past the budget.
        used_before = s0 - start
        allowed = a.budget * sum(sh for n, _, sh in SECTIONS[:SECTIONS.index((name, fn, share)) + 1]) - used_before
        allowed = min(allowed, a.budget - used_before)
        ctx = {"bench": Bench(torch), "hog": a.hog, "over": (lambda s0=s0, al=allowed: time.time() - s0 > al)}
        log(f"start {name} (allowed {allowed:.0f} s)")
        try:
            fn(torch, out, ctx)
            status = "ok" if not ctx["over"]() else "cut by its time"
        except Exception as e:  # noqa: BLE001
            status = f"failed: {e!r:.300}"
            traceback.print_exc()
        out.add("sections", {"name": name, "status": status, "seconds": time.time() - s0})
        log(f"end {name}: {status} in {time.time() - s0:.1f} s")
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
    out.set("smi_end", smi("clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"))
    out.set("seconds", time.time() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
