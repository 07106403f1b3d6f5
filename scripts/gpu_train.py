#!/usr/bin/env python3
"""Real training steps in PyTorch on one GPU, for comparing with dtsim's prediction of the same step.

Each model is written here (no downloads: random weights and tokens; ResNet-50 from torchvision
with weights=None) with the shapes of a scenario in scenarios/gpu_check/, so that dtsim predicts
exactly the step timed here. Precision as dtsim models "bf16" (a mixed-precision optimizer like
Megatron's Float16Optimizer; dtsim counts 2 + 2 + 12 bytes per parameter): bf16 weights,
activations and gradients; each gradient cast to fp32 for the update; AdamW over fp32 master
weights (with its two fp32 moments), which are then copied back into the bf16 weights.

  gpu_train.py --part NAME --out DIR     one part, its result in DIR/NAME.json (and .log by the caller)
  gpu_train.py --list                    the parts, in the order gpu_check.sh runs them
  gpu_train.py --summary DIR             the table of every DIR/*.json, and DIR/results.json
  gpu_train.py --dry-run --part NAME     tiny shapes on the CPU: exercises the code paths, times nothing real

Parts: micro (plain bf16 GEMMs, SDPA flash attention forward+backward, launch overhead) and
<model>-<eager|compile> for each model. A part writes its JSON as soon as it has something, so a
part killed by its timeout still leaves what it measured.
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import traceback

MODELS = {
    # name: shapes; "scenario" is the dtsim scenario that describes the same step.
    "gpt2-xl": dict(kind="gpt2", layers=48, hidden=1600, heads=25, kv_heads=25, head_dim=64, ffn=6400,
                    vocab=50257, seq=1024, micro_batch=8, dropout=0.1,
                    scenario="scenarios/gpu_check/gpt2-xl-1gpu.json",
                    note="all 48 layers"),
    "llama3-8b-tp1": dict(kind="llama", layers=4, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                          vocab=128256, seq=8192, micro_batch=1, dropout=0.0,
                          scenario="scenarios/gpu_check/llama3-8b-tp1-4layers-1gpu.json",
                          note="4 of 32 layers at full width (vocabulary included): the whole model with AdamW "
                               "needs ~145 GB"),
    "llama3-8b-tp8": dict(kind="llama", layers=32, hidden=4096, heads=4, kv_heads=1, head_dim=128, ffn=1792,
                          vocab=16032, seq=8192, micro_batch=1, dropout=0.0,
                          scenario="scenarios/gpu_check/llama3-8b-tp8-slice-1gpu.json",
                          note="one TP-8 rank's slices (heads/8, kv heads/8, ffn/8, vocab/8), all 32 layers, "
                               "no communication (one GPU)"),
    "resnet50": dict(kind="resnet50", image=224, classes=1000, micro_batch=256,
                     scenario="scenarios/gpu_check/resnet50-1gpu.json", note="torchvision resnet50, NCHW channels_last"),
}
# Dry-run shapes: tiny, CPU.
TINY = {
    "gpt2-xl": dict(layers=2, hidden=64, heads=4, kv_heads=4, head_dim=16, ffn=256, vocab=512, seq=32, micro_batch=2),
    "llama3-8b-tp1": dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=192, vocab=512, seq=32,
                          micro_batch=2),
    "llama3-8b-tp8": dict(layers=2, hidden=64, heads=2, kv_heads=1, head_dim=16, ffn=48, vocab=128, seq=32,
                          micro_batch=1),
    "resnet50": dict(image=32, classes=10, micro_batch=2),
}
MODES = ("eager", "compile")
# The order gpu_check.sh runs them in: the eager runs and the compiled runs of the models that
# matter most first, so that when time runs short it is the other compiled runs that are left out.
PART_ORDER = ["micro"] + [f"{m}-eager" for m in MODELS] + [
    "gpt2-xl-compile", "llama3-8b-tp8-compile", "llama3-8b-tp1-compile", "resnet50-compile"]


class Result:
    """A part's JSON, rewritten after every addition."""

    def __init__(self, path, part):
        self.path = path
        self.data = {"part": part, "status": "started", "started_unix": time.time()}
        self.save()

    def set(self, **kv):
        self.data.update(kv)
        self.save()

    def save(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# ----------------------------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------------------------

def environment(torch, device):
    env = {"python": platform.python_version(), "torch": torch.__version__, "device": device}
    try:
        env["cuda_runtime"] = torch.version.cuda
        if device == "cuda":
            p = torch.cuda.get_device_properties(0)
            env.update(gpu=p.name, sm_count=p.multi_processor_count, memory_bytes=p.total_memory,
                       capability=f"{p.major}.{p.minor}", cudnn=torch.backends.cudnn.version())
    except Exception as e:  # noqa: BLE001
        env["env_error"] = repr(e)
    try:
        import triton  # noqa: F401
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    return env


class Timer:
    """CUDA events on a GPU, the host clock on the CPU (dry runs)."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def time(self, fn, warmup, repeats):
        """Seconds of each of `repeats` calls of fn() after `warmup` untimed ones."""
        for _ in range(warmup):
            fn()
        self.sync()
        out = []
        for _ in range(repeats):
            if self.cuda:
                a = self.torch.cuda.Event(enable_timing=True)
                b = self.torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                out.append(a.elapsed_time(b) * 1e-3)
            else:
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
        return out


def stats(seconds):
    med = statistics.median(seconds)
    mad = statistics.median([abs(s - med) for s in seconds])
    return {"median_s": med, "spread": 1.4826 * mad / med if med > 0 else 0.0, "min_s": min(seconds),
            "max_s": max(seconds), "samples_s": seconds}


# ----------------------------------------------------------------------------------------------
# Attention: SDPA, flash only on a GPU
# ----------------------------------------------------------------------------------------------

ATTN = {"gqa_native": False, "backend": "math (CPU)"}


def sdpa_context(torch):
    """The context that restricts SDPA to flash attention (a no-op where that is not available)."""
    import contextlib
    if ATTN.get("flash"):
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
        except Exception:  # noqa: BLE001
            try:
                return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                      enable_mem_efficient=False)
            except Exception:  # noqa: BLE001
                pass
    return contextlib.nullcontext()


def probe_attention(torch, device, head_dim, heads, kv_heads, dropout):
    """Whether flash attention runs here (with dropout, with grouped K/V): decides the paths once, before
    anything is compiled."""
    F = torch.nn.functional
    if device != "cuda" or not hasattr(F, "scaled_dot_product_attention"):
        ATTN.update(flash=False, gqa_native=False, backend="math (CPU)" if device != "cuda" else "math")
        return dict(ATTN)
    ATTN["flash"] = True
    q = torch.randn(1, heads, 256, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    kv = torch.randn(1, kv_heads, 256, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    try:
        with sdpa_context(torch):
            F.scaled_dot_product_attention(q, q, q, dropout_p=dropout, is_causal=True).sum().backward()
        ATTN["backend"] = "flash"
    except Exception as e:  # noqa: BLE001
        ATTN.update(flash=False, backend=f"default (flash refused: {e!r:.200})")
    ATTN["gqa_native"] = False
    if kv_heads != heads:
        try:
            with sdpa_context(torch):
                F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True).sum().backward()
            ATTN["gqa_native"] = True
        except Exception as e:  # noqa: BLE001
            ATTN["gqa_error"] = f"{e!r:.200}"
    return dict(ATTN)


def attention(torch, q, k, v, dropout, training):
    """Causal attention on [b, h, s, d] tensors; K and V may have fewer heads (GQA)."""
    F = torch.nn.functional
    if k.shape[1] != q.shape[1] and not ATTN["gqa_native"]:
        r = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(r, dim=1)
        v = v.repeat_interleave(r, dim=1)
    p = dropout if training else 0.0
    if hasattr(F, "scaled_dot_product_attention"):
        kw = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, **kw)
    # torch < 2.0 (the CPU dry run on Debian's torch): the same computation, unfused.
    s = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    probs = torch.softmax(scores.float().masked_fill(mask, float("-inf")), dim=-1).to(q.dtype)
    return F.dropout(probs, p) @ v


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

def build_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    if cfg["kind"] == "resnet50":
        import torchvision
        try:
            return torchvision.models.resnet50(weights=None, num_classes=cfg["classes"])
        except TypeError:  # torchvision < 0.13
            return torchvision.models.resnet50(pretrained=False, num_classes=cfg["classes"])

    h, nh, nkv, hd, ffn = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"]
    drop = cfg["dropout"]
    gpt2 = cfg["kind"] == "gpt2"

    class RMSNorm(nn.Module):
        def __init__(self, n, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, x):
            if hasattr(F, "rms_norm"):
                return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight

    def norm():
        return nn.LayerNorm(h) if gpt2 else RMSNorm(h)

    def rotate(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = norm(), norm()
            self.qkv = nn.Linear(h, (nh + 2 * nkv) * hd, bias=gpt2)
            self.proj = nn.Linear(nh * hd, h, bias=gpt2)
            if gpt2:
                self.fc1 = nn.Linear(h, ffn)
            else:
                self.fc1 = nn.Linear(h, 2 * ffn, bias=False)  # gate and up, one GEMM
            self.fc2 = nn.Linear(ffn, h, bias=gpt2)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.view(b, s, nh, hd).transpose(1, 2)
            k = k.view(b, s, nkv, hd).transpose(1, 2)
            v = v.view(b, s, nkv, hd).transpose(1, 2)
            if not gpt2:
                q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            a = attention(torch, q, k, v, drop, self.training).transpose(1, 2).reshape(b, s, nh * hd)
            x = x + F.dropout(self.proj(a), drop, self.training)
            y = self.fc1(self.n2(x))
            if gpt2:
                y = F.gelu(y, approximate="tanh")
            else:
                g, u = y.chunk(2, dim=-1)
                y = F.silu(g) * u
            return x + F.dropout(self.fc2(y), drop, self.training)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(cfg["vocab"], h)
            self.pos = nn.Embedding(cfg["seq"], h) if gpt2 else None
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.norm = norm()
            self.head = None if gpt2 else nn.Linear(h, cfg["vocab"], bias=False)  # GPT-2 ties it to emb
            inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(cfg["seq"]).float(), inv)
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", ang.cos()[None, None], persistent=False)
            self.register_buffer("sin", ang.sin()[None, None], persistent=False)
            for p in self.parameters():  # small random weights (init does not change the timing)
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, tokens, targets):
            x = self.emb(tokens)
            if self.pos is not None:
                x = F.dropout(x + self.pos.weight[: tokens.shape[1]], drop, self.training)
            cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.tail(x, targets)

        def tail(self, x, targets):
            x = self.norm(x)
            logits = x @ self.emb.weight.t() if self.head is None else self.head(x)
            # fp32 logits for the loss, as Megatron-LM computes cross-entropy.
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

        def compile_regions(self):
            """torch.compile per repeated block (compiled once, reused by every layer) and for the
            output layer with the loss: the whole model traced at once takes minutes for 48 layers."""
            for blk in self.blocks:
                blk.compile()
            self.tail = torch.compile(self.tail)

    return LM()


def count_params(model):
    return sum(p.numel() for p in model.parameters())


class MixedPrecisionAdamW:
    """bf16 weights and gradients, fp32 main gradients and master weights, AdamW on the masters."""

    def __init__(self, torch, model, device):
        self.torch = torch
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.masters = [torch.nn.Parameter(p.detach().float().clone()) for p in self.params]
        kw = dict(lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1)
        self.kind = "AdamW"
        try:
            if device == "cuda":
                self.opt = torch.optim.AdamW(self.masters, fused=True, **kw)
                self.kind = "AdamW(fused=True)"
            else:
                self.opt = torch.optim.AdamW(self.masters, **kw)
        except (TypeError, RuntimeError):
            self.opt = torch.optim.AdamW(self.masters, **kw)
        self.foreach = hasattr(torch, "_foreach_copy_")

    def copy(self, dst, src):
        """dst[i] = src[i] across dtypes: one foreach kernel family where this torch has it."""
        with self.torch.no_grad():
            if self.foreach:
                try:
                    self.torch._foreach_copy_(dst, src)
                    return
                except (RuntimeError, TypeError):
                    self.foreach = False
            for d, s in zip(dst, src):
                d.copy_(s)

    def step(self):
        # Each bf16 gradient becomes the fp32 gradient of its master, one at a time, and the fp32
        # ones are dropped after the update: the step holds 2 bytes of gradient per parameter
        # through the backward pass, as dtsim counts them.
        for m, p in zip(self.masters, self.params):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None
        self.opt.step()
        for m in self.masters:
            m.grad = None
        self.copy(self.params, self.masters)


# ----------------------------------------------------------------------------------------------
# Profiler view: kernels by name
# ----------------------------------------------------------------------------------------------

def kernel_category(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "batchnorm", "bn_fw",
                            "bn_bw", "welford", "norm_")):
        return "norm"
    if any(s in n for s in ("conv", "fprop", "dgrad", "wgrad", "implicit_gemm", "winograd", "cudnn")) and \
            "elementwise" not in n and "convert" not in n:
        return "conv"
    if any(s in n for s in ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "sm80_", "cublas", "matmul", "triton_tem",
                            "_mm_", "ampere_", "hopper_")):
        return "gemm"
    if any(s in n for s in ("adam", "multi_tensor", "fused_optim", "_foreach")):
        return "optimizer"
    if any(s in n for s in ("softmax", "cross_entropy", "nll_loss", "log_softmax")):
        return "softmax/loss"
    if any(s in n for s in ("copy", "cast", "convert", "to_copy", "memcpy", "memset", "fill", "zero")):
        return "copy/cast/fill"
    if any(s in n for s in ("embedding", "index", "gather", "scatter")):
        return "embedding/index"
    if any(s in n for s in ("reduce", "triton_red", "triton_per", "sum", "mean")):
        return "reduction"
    if any(s in n for s in ("elementwise", "vectorized", "triton_poi", "pointwise", "gelu", "silu", "dropout",
                            "fused_", "mul", "add", "relu", "cat", "pool")):
        return "elementwise"
    return "other"


def profile_one_step(torch, step_fn, device, top=40):
    """One step under torch.profiler: kernels aggregated by name (count, total us), the top `top`."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    timer = Timer(torch, device)
    with profile(activities=acts) as prof:
        wall = timer.time(step_fn, 0, 1)[0]
    kernels = {}
    for e in prof.events():
        dev = str(getattr(e, "device_type", "")).split(".")[-1]
        if device == "cuda" and dev != "CUDA":
            continue
        # record_function ranges ("Optimizer.step#AdamW.step") show on the GPU timeline too, over
        # kernels that are counted on their own: not kernels, left out.
        if device == "cuda" and (getattr(e, "is_user_annotation", False) or re.match(r"^[A-Za-z_][\w.]*#[\w.]+$", e.name)):
            continue
        if device != "cuda" and (dev != "CPU" or e.cpu_parent is not None):
            continue
        # A kernel's event spans its run on the GPU; a dry run's top-level CPU op, its host time.
        t = e.time_range.elapsed_us() if device == "cuda" else e.cpu_time_total
        k = kernels.setdefault(e.name, {"name": e.name, "count": 0, "total_us": 0.0})
        k["count"] += 1
        k["total_us"] += float(t)
    rows = sorted(kernels.values(), key=lambda r: -r["total_us"])
    for r in rows:
        r["category"] = kernel_category(r["name"])
    by_cat = {}
    for r in rows:
        c = by_cat.setdefault(r["category"], {"count": 0, "total_us": 0.0})
        c["count"] += r["count"]
        c["total_us"] += r["total_us"]
    total = sum(r["total_us"] for r in rows)
    return {
        "step_s_profiled": wall,
        "kernel_sum_us": total,
        "kernel_launches": sum(r["count"] for r in rows),
        "distinct_kernels": len(rows),
        "gap_us": wall * 1e6 - total,  # launch gaps and host time the kernels did not cover
        "by_category": dict(sorted(by_cat.items(), key=lambda kv: -kv[1]["total_us"])),
        "top": rows[:top],
        "note": "device kernels only (memcpy/memset included); sums overlap-free only on one stream" if device == "cuda"
        else "dry run on the CPU: top-level CPU ops, not kernels",
    }


# ----------------------------------------------------------------------------------------------
# Parts
# ----------------------------------------------------------------------------------------------

def run_train(torch, name, mode, device, dry, res, steps, warmup):
    cfg = dict(MODELS[name])
    if dry:
        cfg.update(TINY[name])
    res.set(model=name, mode=mode, config=cfg, note=cfg.get("note", ""), scenario=cfg["scenario"])
    dtype = torch.bfloat16
    if cfg["kind"] != "resnet50":
        res.set(attention=probe_attention(torch, device, cfg["head_dim"], cfg["heads"], cfg["kv_heads"],
                                          cfg["dropout"]))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    import contextlib
    # Built on the GPU: initialising billions of parameters on the host takes tens of seconds.
    where = torch.device(device) if device == "cuda" and hasattr(torch.device, "__enter__") else contextlib.nullcontext()
    with where:
        model = build_model(torch, cfg)
    n_params = count_params(model)
    model = model.to(device=device, dtype=dtype)
    if device == "cuda":
        torch.cuda.empty_cache()  # the fp32 copies the model was built in: not part of the step's memory
    if cfg["kind"] == "resnet50" and device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = MixedPrecisionAdamW(torch, model, device)
    b = cfg["micro_batch"]
    if cfg["kind"] == "resnet50":
        x = torch.randn(b, 3, cfg["image"], cfg["image"], device=device, dtype=dtype)
        if device == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, cfg["classes"], (b,), device=device)
        fwd = lambda m: torch.nn.functional.cross_entropy(m(x).float(), y)  # noqa: E731
        samples_per_step, tokens_per_step = b, 0
    else:
        x = torch.randint(0, cfg["vocab"], (b, cfg["seq"]), device=device)
        y = torch.randint(0, cfg["vocab"], (b, cfg["seq"]), device=device)
        fwd = lambda m: m(x, y)  # noqa: E731
        samples_per_step, tokens_per_step = b, b * cfg["seq"]
    res.set(params=n_params, optimizer=opt.kind,
            precision="bf16 weights/activations/grads; fp32 master weights and AdamW moments; grads cast to fp32 "
                      "one by one for the update and dropped after it",
            build_s=time.perf_counter() - t0, samples_per_step=samples_per_step, tokens_per_step=tokens_per_step)
    log(f"{name} {mode}: {n_params / 1e6:.1f}M parameters, micro-batch {b}")

    runner = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
        try:  # 48 blocks compiled one by one must not run out of recompilations and fall back to eager
            import torch._dynamo
            for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                         "accumulated_recompile_limit"):
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 256))
        except Exception:  # noqa: BLE001
            pass
        if hasattr(model, "compile_regions") and hasattr(torch.nn.Module, "compile"):
            model.compile_regions()
            res.set(compiled="regional: each transformer block, and the output layer with the loss "
                             "(torch.compile defaults)")
        else:
            runner = torch.compile(model)
            res.set(compiled="the whole model (torch.compile defaults)")

    def step():
        with sdpa_context(torch):
            loss = fwd(runner)
            loss.backward()
        opt.step()
        return loss

    timer = Timer(torch, device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    # The first step compiles (torch.compile) and allocates the optimizer's state.
    t0 = time.perf_counter()
    first = timer.time(step, 0, 1)[0]
    res.set(first_step_s=first, first_step_wall_s=time.perf_counter() - t0)
    log(f"{name} {mode}: first step {first:.3f} s (wall {time.perf_counter() - t0:.1f} s)")
    warm = timer.time(step, max(0, warmup - 1), 1)
    if device == "cuda":
        res.set(peak_allocated_bytes_first_steps=torch.cuda.max_memory_allocated(),
                peak_reserved_bytes_first_steps=torch.cuda.max_memory_reserved())
        torch.cuda.reset_peak_memory_stats()
    times = timer.time(step, 0, steps)
    st = stats(times)
    mem = {}
    if device == "cuda":
        mem = dict(peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                   peak_reserved_bytes=torch.cuda.max_memory_reserved(),
                   allocated_after_step_bytes=torch.cuda.memory_allocated())
    res.set(step=st, warmup_steps=warmup, timed_steps=steps, **mem,
            throughput_samples_per_s=samples_per_step / st["median_s"],
            throughput_tokens_per_s=tokens_per_step / st["median_s"] if tokens_per_step else None,
            loss=float(step().item()))
    log(f"{name} {mode}: step median {st['median_s'] * 1e3:.2f} ms (spread {st['spread']:.3f}), "
        f"peak allocated {mem.get('peak_allocated_bytes', 0) / 2**30:.2f} GiB, "
        f"reserved {mem.get('peak_reserved_bytes', 0) / 2**30:.2f} GiB")
    if mode == "compile":
        try:  # how many graphs were compiled, and any graph breaks: eager fallbacks would show here
            from torch._dynamo.utils import counters
            res.set(dynamo_counters={k: {str(a): b for a, b in v.items()} for k, v in counters.items()})
        except Exception:  # noqa: BLE001
            pass
    res.set(profiler=profile_one_step(torch, step, device))
    p = res.data["profiler"]
    log(f"{name} {mode}: profiled step {p['step_s_profiled'] * 1e3:.2f} ms, kernels {p['kernel_sum_us'] / 1e3:.2f} ms "
        f"in {p['kernel_launches']} launches")


def run_micro(torch, device, dry, res):
    timer = Timer(torch, device)
    F = torch.nn.functional
    dt = torch.bfloat16
    reps = 3 if dry else 20
    gemms = [(8192, 8192, 8192), (4096, 4096, 1024), (64, 8192, 8192), (8192, 1792, 4096), (8192, 4096, 14336)]
    if dry:
        gemms = [(128, 128, 128), (64, 64, 32), (8, 128, 128)]
    out = []
    for m, n, k in gemms:
        a = torch.randn(m, k, device=device, dtype=dt)
        b = torch.randn(k, n, device=device, dtype=dt)
        st = stats(timer.time(lambda: torch.matmul(a, b), 5, reps))
        out.append({"m": m, "n": n, "k": k, **st, "tflops": 2 * m * n * k / st["median_s"] / 1e12})
        log(f"GEMM {m}x{n}x{k}: {st['median_s'] * 1e6:.1f} us, {out[-1]['tflops']:.1f} TFLOP/s")
        res.set(gemms=out)
        del a, b
    # Attention: forward FLOPs 4*b*h*s^2*d, halved when causal; backward 2.5x forward (FlashAttention's count).
    shapes = [("gpt2-xl", 8, 25, 25, 1024, 64), ("llama3-8b", 1, 32, 8, 8192, 128), ("llama3-8b-tp8", 1, 4, 1, 8192, 128)]
    if dry:
        shapes = [("tiny", 2, 4, 2, 64, 16)]
    att = []
    probe_attention(torch, device, 128, 32, 8, 0.0)  # flash, and whether it takes grouped K/V
    for label, b, h, hkv, s, d in shapes:
        q = torch.randn(b, h, s, d, device=device, dtype=dt, requires_grad=True)
        # Without native grouped K/V, they are expanded here, outside the timed calls.
        kv = hkv if ATTN["gqa_native"] else h
        k = torch.randn(b, kv, s, d, device=device, dtype=dt, requires_grad=True)
        v = torch.randn(b, kv, s, d, device=device, dtype=dt, requires_grad=True)
        g = torch.randn(b, h, s, d, device=device, dtype=dt)
        fwd_flops = 4 * b * h * s * s * d / 2
        row = {"shape": label, "batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d, "causal": True,
               "gqa_native": ATTN["gqa_native"], "backend": ATTN["backend"], "fwd_flops": fwd_flops}
        try:
            with sdpa_context(torch):
                f = stats(timer.time(lambda: attention(torch, q, k, v, 0.0, False), 3, reps))

                def fb():  # gradients returned, not accumulated into .grad (no extra add kernels)
                    o = attention(torch, q, k, v, 0.0, False)
                    torch.autograd.grad(o, (q, k, v), g)
                fb_st = stats(timer.time(fb, 3, reps))
            row.update(fwd=f, fwd_bwd=fb_st, fwd_tflops=fwd_flops / f["median_s"] / 1e12,
                       bwd_s=fb_st["median_s"] - f["median_s"],
                       fwd_bwd_tflops=3.5 * fwd_flops / fb_st["median_s"] / 1e12)
            row["bwd_tflops"] = 2.5 * fwd_flops / row["bwd_s"] / 1e12 if row["bwd_s"] > 0 else None
            log(f"SDPA {label}: fwd {f['median_s'] * 1e3:.3f} ms {row['fwd_tflops']:.1f} TFLOP/s, fwd+bwd "
                f"{fb_st['median_s'] * 1e3:.3f} ms {row['fwd_bwd_tflops']:.1f} TFLOP/s")
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)[:500]
            log(f"SDPA {label}: {e!r:.300}")
        att.append(row)
        res.set(attention=att)
        del q, k, v, g
    # Launch overhead: a 1-element op launched back to back (PyTorch's dispatch + the CUDA launch),
    # host time per launch; and the same ops' GPU time per kernel when captured in a CUDA graph.
    x = torch.zeros(1, device=device)
    n = 200 if dry else 5000
    launch = {}
    for _ in range(2):
        timer.sync()
        t = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        timer.sync()
    launch["torch_op_host_us"] = (time.perf_counter() - t) / n * 1e6
    if device == "cuda":
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    x.add_(1)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(1000):
                    x.add_(1)
            st = stats(timer.time(graph.replay, 2, 10))
            launch["graph_kernel_us"] = st["median_s"] / 1000 * 1e6
        except Exception as e:  # noqa: BLE001
            launch["graph_error"] = repr(e)[:300]
    launch["note"] = ("torch_op_host_us: host seconds per x.add_(1) on a 1-element tensor, 5,000 back to back "
                      "(dispatcher + cudaLaunchKernel; the GPU keeps up, so this is the launch-bound rate); "
                      "graph_kernel_us: GPU time per tiny kernel replayed from a CUDA graph (no launch cost). "
                      "dtsim's own empty-kernel launch latency is in its kernel tables' provenance.")
    res.set(launch=launch)
    log(f"launch: {launch}")


def run_part(part, out_dir, dry, steps, warmup):
    res = Result(os.path.join(out_dir, f"{part}.json") if out_dir else None, part)
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        res.set(status="error", error=f"import torch: {e!r}")
        return 1
    device = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        res.set(status="error", error="torch.cuda.is_available() is false")
        return 1
    if dry:
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    else:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    res.set(environment=environment(torch, device), dry_run=dry)
    t0 = time.perf_counter()
    try:
        if part == "micro":
            run_micro(torch, device, dry, res)
        else:
            name, mode = part.rsplit("-", 1)
            if name not in MODELS or mode not in MODES:
                raise ValueError(f"unknown part {part} (--list)")
            run_train(torch, name, mode, device, dry, res, steps, warmup)
        res.set(status="ok", seconds=time.perf_counter() - t0)
        return 0
    except Exception as e:  # noqa: BLE001
        oom = "out of memory" in repr(e).lower()
        res.set(status="oom" if oom else "error", error=repr(e)[:2000], traceback=traceback.format_exc()[-4000:],
                seconds=time.perf_counter() - t0)
        if device == "cuda":
            try:
                res.set(peak_allocated_bytes_at_error=torch.cuda.max_memory_allocated(),
                        peak_reserved_bytes_at_error=torch.cuda.max_memory_reserved())
            except Exception:  # noqa: BLE001
                pass
        log(f"{part}: FAILED {e!r:.500}")
        return 1


# ----------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------

def summary(out_dir):
    parts = {}
    for fn in sorted(os.listdir(out_dir)):
        if fn.endswith(".json") and fn != "results.json":
            try:
                with open(os.path.join(out_dir, fn)) as f:
                    d = json.load(f)
                parts[d.get("part", fn[:-5])] = d
            except Exception as e:  # noqa: BLE001
                parts[fn[:-5]] = {"status": "unreadable", "error": repr(e)}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"parts": parts}, f, indent=1)
    gib = 2 ** 30
    lines = ["", "part                      status   step ms  spread  peak alloc GiB  reserved GiB  kernels ms  gap ms"]
    for name in PART_ORDER + sorted(set(parts) - set(PART_ORDER)):
        d = parts.get(name)
        if d is None:
            lines.append(f"{name:25s} {'not run':8s}")
            continue
        st = d.get("step") or {}
        p = d.get("profiler") or {}
        def f(v, scale=1.0, fmt="{:.2f}"):
            return fmt.format(v * scale) if isinstance(v, (int, float)) else "-"
        lines.append(f"{name:25s} {d.get('status', '?'):8s} {f(st.get('median_s'), 1e3):>8s} {f(st.get('spread'), 1, '{:.3f}'):>7s} "
                     f"{f(d.get('peak_allocated_bytes'), 1 / gib):>15s} {f(d.get('peak_reserved_bytes'), 1 / gib):>13s} "
                     f"{f(p.get('kernel_sum_us'), 1e-3):>11s} {f(p.get('gap_us'), 1e-3):>7s}")
        if d.get("status") not in ("ok",) and d.get("error"):
            lines.append(f"    {d['error'][:200]}")
    m = parts.get("micro") or {}
    for g in m.get("gemms", []):
        lines.append(f"GEMM {g['m']}x{g['n']}x{g['k']}: {g['tflops']:.1f} TFLOP/s")
    for a in m.get("attention", []):
        if "fwd_tflops" in a:
            lines.append(f"SDPA {a['shape']} ({a['backend']}): fwd {a['fwd_tflops']:.1f}, fwd+bwd {a['fwd_bwd_tflops']:.1f} TFLOP/s")
    if m.get("launch"):
        lines.append("launch: " + ", ".join(f"{k} {v:.2f}" for k, v in m["launch"].items() if isinstance(v, float)))
    print("\n".join(lines))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part")
    ap.add_argument("--out", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--summary")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    ap.add_argument("--steps", type=int, default=6, help="timed steps after warm-up")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps (the first compiles)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(PART_ORDER))
        return 0
    if a.summary:
        return summary(a.summary)
    if not a.part:
        ap.error("give --part, --list or --summary")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    return run_part(a.part, a.out, a.dry_run, a.steps, a.warmup)


if __name__ == "__main__":
    sys.exit(main())
