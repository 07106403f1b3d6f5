#!/usr/bin/env python3
"""What scripts/gpu_check.sh measured on a GPU against what dtsim predicts (issue 29).

  scripts/gpu_compare.py RETURNED_DIR [RETURNED_DIR2...] [-o report.md] [--dtsim build/dtsim] [--device NAME]
                         [--install]
  scripts/gpu_compare.py --make-fake DIR     a made-up RETURNED_DIR, to test this script without a GPU

RETURNED_DIR holds what gpu_check.sh wrote (gpu_check.tar.gz, results.json, summary.txt); it may be
read-only. For each model, dtsim runs its scenario in scenarios/gpu_check/ twice: with the device's
datasheet profile (--device, default h100-sxm-80gb: roofline curves) and with a copy of that profile
naming the kernel table measured for the scenario (tables are matched by the scenario stem their
file name ends with, whatever GPU prefix they carry). The report (markdown) has: measured step
(eager, compiled) against both predictions; measured peak memory against dtsim's; what the profiler
shows between them (kernels dtsim does not model, the optimizer, launch gaps); the measured GEMMs
against the datasheet curve, by shape; and the plain GEMM, attention and launch numbers. --install
copies the kernel tables into hardware_profiles/kernel_tables/ (real ones only: a fake set is refused).
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_train  # noqa: E402  (MODELS: the shapes and the scenarios)

BASE_DEVICE = "h100-sxm-80gb"
GIB = 2 ** 30
CATEGORIES = ["gemm", "conv", "attention", "optimizer", "norm", "softmax/loss", "elementwise", "reduction",
              "copy/cast/fill", "embedding/index", "other"]


# torch.profiler puts record_function ranges on the GPU timeline too ("gpu_user_annotation"):
# "Optimizer.step#AdamW.step" spans the optimizer's kernels, which are also counted one by one.
ANNOTATION = re.compile(r"^[A-Za-z_][\w.]*#[\w.]+$")


def drop_annotations(part):
    """A part's profiler view without the user-annotation ranges gpu_train.py (before the fix) summed
    with the kernels; what was dropped is kept in profiler["annotations_dropped"]."""
    prof = (part or {}).get("profiler")
    if not prof or prof.get("annotations_dropped") is not None:
        return part
    dropped = [k for k in prof.get("top", []) if ANNOTATION.match(k["name"])]
    prof = dict(prof, by_category={c: dict(v) for c, v in prof.get("by_category", {}).items()})
    for k in dropped:
        prof["kernel_sum_us"] -= k["total_us"]
        prof["kernel_launches"] -= k["count"]
        c = prof["by_category"].get(k["category"])
        if c:
            c["total_us"] -= k["total_us"]
            c["count"] -= k["count"]
    prof["top"] = [k for k in prof.get("top", []) if not ANNOTATION.match(k["name"])]
    prof["annotations_dropped"] = [{"name": k["name"], "total_us": k["total_us"]} for k in dropped]
    return dict(part, profiler=prof)


def nvidia_driver(results):
    """The NVIDIA driver version (nvidia-smi), from gpu_check.sh's env/gpu-query."""
    q = (results.get("env") or {}).get("gpu-query", "")
    lines = [x for x in q.splitlines() if x.strip()]
    if len(lines) >= 2:
        head = [h.strip() for h in lines[0].split(",")]
        row = [v.strip() for v in lines[1].split(",")]
        if "driver_version" in head and len(row) == len(head):
            return row[head.index("driver_version")]
    return None


def clocks_by_part(work):
    """Per part of gpu_check.sh (its log's start/end lines), the SM clock and throttle reasons in
    nvidia-smi's 0.5 s samples (logs/clocks.csv): {part: (samples, min MHz, median MHz, share of samples
    with the SW power cap (0x4) active, share with any other slowdown)}."""
    log, csvf = os.path.join(work, "logs", "gpu_check.log"), os.path.join(work, "logs", "clocks.csv")
    if not (os.path.exists(log) and os.path.exists(csvf)):
        return {}
    spans = {}
    with open(log) as f:
        for line in f:
            m = re.match(r"^\[(\d\d):(\d\d):(\d\d) \+\d+s\] (start|end) (\S+?):?\s", line)
            if m:
                t = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])
                spans.setdefault(m[5], [None, None])[0 if m[4] == "start" else 1] = t
    samples = []
    with open(csvf) as f:
        rows = list(csv.reader(f))
    head = [h.strip() for h in rows[0]] if rows else []
    for row in rows[1:]:
        try:
            hh, mm, ss = row[0].split()[1].split(":")
            t = int(hh) * 3600 + int(mm) * 60 + float(ss)
            sm = float(row[head.index("clocks.current.sm [MHz]")].split()[0])
            why = int(row[head.index("clocks_event_reasons.active")].strip(), 16)
        except (ValueError, IndexError):
            continue
        samples.append((t, sm, why))
    out = {}
    for part, (a, b) in spans.items():
        if a is None or b is None:
            continue
        sel = [x for x in samples if a <= x[0] <= b + 1]
        if sel:
            sms = [x[1] for x in sel]
            out[part] = (len(sel), min(sms), statistics.median(sms),
                         sum(1 for x in sel if x[2] & 0x4) / len(sel),
                         sum(1 for x in sel if x[2] & 0xE8) / len(sel))
    return out


def load_returned(folder, work):
    """results.json and the unpacked tar: {"train": {part: json}, "tables": {name: json}}."""
    out = {"train": {}, "tables": {}, "results": {}}
    tar = os.path.join(folder, "gpu_check.tar.gz")
    if os.path.exists(tar):
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and not m.name.startswith("/") and ".." not in m.name:
                    t.extract(m, work)
    res = os.path.join(folder, "results.json")
    if not os.path.exists(res):
        res = os.path.join(work, "results.json")
    if os.path.exists(res):
        with open(res) as f:
            out["results"] = json.load(f)
        out["train"].update(out["results"].get("train", {}))
    tdir = os.path.join(work, "train")
    if os.path.isdir(tdir):
        for fn in sorted(os.listdir(tdir)):
            if fn.endswith(".json") and fn != "results.json":
                with open(os.path.join(tdir, fn)) as f:
                    d = json.load(f)
                out["train"][d.get("part", fn[:-5])] = d
    out["clocks"] = clocks_by_part(work)
    kdir = os.path.join(work, "tables")
    if os.path.isdir(kdir):
        for fn in sorted(os.listdir(kdir)):
            if fn.endswith(".json"):
                with open(os.path.join(kdir, fn)) as f:
                    out["tables"][fn] = json.load(f)
    return out


def scenario_stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def table_short(name):
    """A kernel table's file name without its GPU prefix and dtype: the scenario stem it ends with
    (nvidia-h200-gpt2-xl-1gpu-bf16.json: gpt2-xl-1gpu), or the name less .json and -bf16."""
    short = os.path.splitext(name)[0].replace("-bf16", "")
    stems = [scenario_stem(cfg["scenario"]) for cfg in gpu_train.MODELS.values()]
    ends = [st for st in stems if short.endswith("-" + st)]
    return max(ends, key=len) if ends else short


def table_for(tables, stem):
    for name in tables:
        if f"-{stem}-" in name:
            return name
    return None


def compute_only(dev):
    """The profile with memory-bound kernels made nearly free (HBM 10^6 GB/s, no minimum kernel time): what is
    left of dtsim's compute is its GEMMs and attention, so the difference is its memory-bound kernels."""
    d = dict(dev)
    d["hbm_bandwidth_GBps"] = 1e6  # the most a profile may give: ~300x an H100
    d["memory_efficiency"] = {"max": 1.0, "half_bytes": 1.0}
    d["kernel_min_us"] = 0.0
    d["name"] = dev["name"][:110] + "-nomem"
    return d


def make_home(tables, home, device):
    """A DTSIM_HOME: the repository's data, plus each table and a device profile naming it, and of
    each profile a compute-only copy (compute_only)."""
    for d in ("models", "scenarios"):
        os.symlink(os.path.join(ROOT, d), os.path.join(home, d))
    hp = os.path.join(home, "hardware_profiles")
    shutil.copytree(os.path.join(ROOT, "hardware_profiles"), hp)
    os.makedirs(os.path.join(hp, "kernel_tables"), exist_ok=True)
    with open(os.path.join(hp, device + ".json")) as f:
        base = json.load(f)

    def write(dev):
        with open(os.path.join(hp, dev["name"] + ".json"), "w") as f:
            json.dump(dev, f, indent=1)
        return dev["name"]
    devices = {None: (device, write(compute_only(base)))}
    for name, table in tables.items():
        stem = os.path.splitext(name)[0]
        with open(os.path.join(hp, "kernel_tables", name), "w") as f:
            json.dump(table, f)
        with open(os.path.join(hp, "kernel_tables", stem + "-nomem.json"), "w") as f:
            json.dump(dict(table, memory=[], elementwise={}), f)
        dev = dict(base)
        dev["name"] = f"{device}-measured-{stem}"[:110]
        dev["description"] = base["description"] + f", GEMMs and streams from the measured table {name}"
        dev["kernel_table"] = f"kernel_tables/{name}"
        dev["sources"] = dict(base.get("sources", {}), kernel_table=f"dtsim profile --device cuda ({name})")
        nomem = dict(compute_only(dev), kernel_table=f"kernel_tables/{stem}-nomem.json")
        devices[name] = (write(dev), write(nomem))
    return devices


def run_dtsim(dtsim, home, scenario_file, device=None, tmp=None):
    """dtsim run --format json on the scenario (with hardware.device replaced); (json, error)."""
    with open(scenario_file) as f:
        s = json.load(f)
    if device:
        s["hardware"]["device"] = device
    path = os.path.join(tmp, f"{s['name']}-{device or 'roofline'}.json")
    with open(path, "w") as f:
        json.dump(s, f)
    env = dict(os.environ, DTSIM_HOME=home)
    r = subprocess.run([dtsim, "run", path, "--format", "json", "-o", path[:-5] + ".out"], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-500:]
    try:
        return json.loads(r.stdout), None
    except json.JSONDecodeError as e:
        return None, f"unreadable output: {e}"


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def predicted(res):
    """Step seconds and peak bytes from a dtsim result."""
    if res is None:
        return None, None
    step = dig(res, "step_time_s")
    if step is None:
        step = dig(res, "step_time_mean_s") or dig(res, "steps", "step_time_mean_s")
    peak = dig(res, "memory", "peak_bytes")
    return step, peak


def err(pred, meas):
    if pred is None or meas is None or meas == 0:
        return "-"
    return f"{100 * (pred - meas) / meas:+.0f}%"


def ms(v):
    return "-" if v is None else f"{v * 1e3:.1f}"


def gib(v):
    return "-" if v is None else f"{v / GIB:.1f}"


def step_of(part):
    if not part or part.get("status") != "ok":
        return None
    return dig(part, "step", "median_s")


def curve_eff(dev, flops):
    c = dev.get("gemm_efficiency", {})
    mx, half = c.get("max", 1.0), c.get("half_flops", 0.0)
    pts = c.get("points")
    if pts:
        pts = sorted(pts)
        if flops <= pts[0][0]:
            return mx * flops / (flops + half) if half else pts[0][1]
        for (f0, e0), (f1, e1) in zip(pts, pts[1:]):
            if flops <= f1:
                t = (math.log(flops) - math.log(f0)) / (math.log(f1) - math.log(f0))
                return e0 + t * (e1 - e0)
        return pts[-1][1]
    return mx * flops / (flops + half) if half else mx


def dtsim_attention(cfg, base, table=None):
    """Seconds of dtsim's flash-attention kernels in a step (forward and backward), as
    models/transformer.cpp and sim/cost count them: forward 4·b·h·s²·d FLOPs (no causal halving),
    backward 2.5×; roofline: at the GEMM curve's efficiency for those FLOPs; table: the
    (b·h, s, s, d) GEMM's measured time scaled by FLOPs (kernel_table.cpp). None for a CNN."""
    if "heads" not in cfg:
        return None
    bh, s_, d = cfg["micro_batch"] * cfg["heads"], cfg["seq"], cfg["head_dim"]
    f = 4.0 * bh * s_ * s_ * d
    if table is not None:
        g = next((g for g in table.get("gemm", []) if (g["batch"], g["m"], g["n"], g["k"]) == (bh, s_, s_, d)), None)
        if g is None:
            return None
        return cfg["layers"] * (f + 2.5 * f) / (2.0 * bh * s_ * s_ * d) * g["seconds"]
    peak = base["peak_tflops"]["bf16"] * 1e12
    kmin = base.get("kernel_min_us", 0.0) * 1e-6
    return cfg["layers"] * sum(max(x / (peak * curve_eff(base, x)), kmin) for x in (f, 2.5 * f))


def merge_returned(folders, work):
    """Several returned sets (a first run and a second try of some parts): a part that ran well in a
    later set replaces the earlier one; tables, the later one."""
    tables, train, results, clocks = {}, {}, {}, {}
    for i, folder in enumerate(folders):
        sub = os.path.join(work, str(i))
        os.makedirs(sub)
        d = load_returned(folder, sub)
        tables.update(d["tables"])
        results = d["results"] or results
        clocks.update(d["clocks"])
        for name, part in d["train"].items():
            if name not in train or part.get("status") == "ok" or train[name].get("status") != "ok":
                train[name] = drop_annotations(part)
    return tables, train, results, clocks


def report(folders, dtsim, out_md, install, device=BASE_DEVICE):
    lines = []
    w = lines.append
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as home, \
            tempfile.TemporaryDirectory() as tmp:
        tables, train, results, clocks = merge_returned(folders, work)
        fake = any(dig(t, "provenance", "fake") for t in tables.values()) or \
            any(p.get("fake") for p in train.values() if isinstance(p, dict))
        devices = make_home(tables, home, device)
        with open(os.path.join(ROOT, "hardware_profiles", device + ".json")) as f:
            base = json.load(f)
        peak_bf16 = base["peak_tflops"]["bf16"] * 1e12
        env = next((p.get("environment") for p in train.values() if isinstance(p, dict) and p.get("environment")), {})
        tprov = next((t.get("provenance", {}) for t in tables.values()), {})
        w(f"## Measured on {env.get('gpu') or tprov.get('gpu', '?')} against dtsim's prediction"
          + (" — FAKE DATA (gpu_compare.py --make-fake), not a measurement" if fake else ""))
        w("")
        drv = nvidia_driver(results)
        w(f"GPU: {env.get('gpu', tprov.get('gpu', '?'))}, {env.get('sm_count', tprov.get('sm_count', '?'))} SMs, "
          f"driver {drv or '?'} (CUDA driver API {tprov.get('cuda_driver', '?')}), "
          f"CUDA runtime {tprov.get('cuda_runtime', env.get('cuda_runtime', '?'))}, "
          f"cuBLAS {tprov.get('cublas', '?')}, SM clock {tprov.get('sm_clock_mhz', '?')} MHz; "
          f"PyTorch {env.get('torch', '?')}, Triton {env.get('triton', '?')}, cuDNN {env.get('cudnn', '?')}; "
          f"tables timed {tprov.get('date', '?')}. "
          f"dtsim's device profile: {device} (datasheet peaks, fitted efficiency curves), \"roofline\"; "
          "\"table\": the same profile naming the kernel table `dtsim profile --device cuda` measured for the scenario.")
        w("")
        w("Step time (median of the timed steps; error = (dtsim − measured) / measured):")
        w("")
        w("| model (scenario) | measured eager ms | measured compiled ms | dtsim roofline ms | error (eager) "
          "| error (compiled) | dtsim table ms | error (eager) | error (compiled) | table share |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for name, cfg in gpu_train.MODELS.items():
            scen = os.path.join(ROOT, cfg["scenario"])
            stem = scenario_stem(scen)
            eager, comp = train.get(f"{name}-eager"), train.get(f"{name}-compile")
            m_e, m_c = step_of(eager), step_of(comp)
            roof, e1 = run_dtsim(dtsim, home, scen, devices[None][0], tmp)
            roof0, _ = run_dtsim(dtsim, home, scen, devices[None][1], tmp)
            tname = table_for(tables, stem)
            tab, e2 = (run_dtsim(dtsim, home, scen, devices[tname][0], tmp) if tname else (None, "no table returned"))
            tab0, _ = (run_dtsim(dtsim, home, scen, devices[tname][1], tmp) if tname else (None, None))
            p_r, mem_r = predicted(roof)
            p_t, mem_t = predicted(tab)
            share = dig(tab, "compute_source", "measured_share")
            w(f"| {name} ({stem}) | {ms(m_e)} | {ms(m_c)} | {ms(p_r)} | {err(p_r, m_e)} | {err(p_r, m_c)} | {ms(p_t)} "
              f"| {err(p_t, m_e)} | {err(p_t, m_c)} | {'-' if share is None else f'{share:.2f}'} |")
            rows.append(dict(name=name, cfg=cfg, eager=eager, comp=comp, roof=roof, tab=tab, roof0=roof0, tab0=tab0,
                             errors=[e for e in (e1, e2) if e], table=tname, mem=mem_r))
        w("")
        w("Peak memory (torch.cuda.max_memory_allocated / max_memory_reserved over the timed steps; dtsim's peak "
          "is the same with either profile):")
        w("")
        w("| model | eager allocated GiB | eager reserved GiB | compiled allocated GiB | compiled reserved GiB "
          "| dtsim peak GiB | error (eager allocated) | error (compiled allocated) | error (eager reserved) |")
        w("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            ea, er = (r["eager"] or {}).get("peak_allocated_bytes"), (r["eager"] or {}).get("peak_reserved_bytes")
            ca, cr = (r["comp"] or {}).get("peak_allocated_bytes"), (r["comp"] or {}).get("peak_reserved_bytes")
            w(f"| {r['name']} | {gib(ea)} | {gib(er)} | {gib(ca)} | {gib(cr)} | {gib(r['mem'])} | {err(r['mem'], ea)} "
              f"| {err(r['mem'], ca)} | {err(r['mem'], er)} |")
        w("")
        for r in rows:
            for e in r["errors"]:
                w(f"- {r['name']}: dtsim: {e}")
            for mode in ("eager", "comp"):
                p = r[mode]
                if p and p.get("status") != "ok":
                    w(f"- {r['name']} {'eager' if mode == 'eager' else 'compiled'}: {p.get('status')}: "
                      f"{str(p.get('error', ''))[:300]}")
                elif p is None:
                    w(f"- {r['name']} {'eager' if mode == 'eager' else 'compiled'}: not run (budget or failure)")
        w("")
        for name, cfg in gpu_train.MODELS.items():
            w(f"- {name}: {cfg['note']}; micro-batch {cfg['micro_batch']}"
              + (f", sequence {cfg['seq']}" if "seq" in cfg else ""))
        w("")

        w("### What is left between them: the profiler's view of one step")
        w("")
        w("Per-kernel GPU time from torch.profiler (one step, after the timed ones), by kind. dtsim models the "
          "GEMMs, convolutions and attention from its curves or table, and the optimizer, norms, softmax and "
          "element-wise kernels as memory-bound streams; the launch gaps (step − sum of kernel times) it "
          "prices only through kernel_min_us / launch_overhead_us.")
        w("")
        w("| model | mode | step ms | kernels ms | launches | " + " | ".join(CATEGORIES) + " | gaps ms |")
        w("|---|---|---|---|---|" + "---|" * len(CATEGORIES) + "---|")
        for r in rows:
            for mode, p in (("eager", r["eager"]), ("compiled", r["comp"])):
                prof = (p or {}).get("profiler")
                if not prof:
                    continue
                st = step_of(p) or prof.get("step_s_profiled")
                cats = prof.get("by_category", {})
                cells = [ms(cats[c]["total_us"] * 1e-6) if c in cats else "-" for c in CATEGORIES]
                gap = st - prof["kernel_sum_us"] * 1e-6 if st else None
                w(f"| {r['name']} | {mode} | {ms(st)} | {ms(prof['kernel_sum_us'] * 1e-6)} | {prof['kernel_launches']} "
                  f"| {' | '.join(cells)} | {ms(gap)} |")
        w("")
        w("Side by side with dtsim's own split of the step, table profile first and roofline in brackets. dtsim's "
          "attention is its flash-attention kernels (forward 4·b·h·s²·d FLOPs, no causal halving; backward 2.5×), "
          "its GEMMs the rest of its compute once memory-bound kernels are made free (a copy of the profile with "
          f"~{round(1e6 / base['hbm_bandwidth_GBps'], -2):.0f}× the HBM bandwidth and no minimum kernel time), its memory-bound kernels (norms, softmax, element-wise, casts) the "
          "difference. Measured: the profiler's kernels by kind; \"other\" is every kernel that is not a GEMM, "
          "convolution, attention or optimizer kernel; gaps = step − sum of kernel times.")
        w("")
        w("| model | mode | GEMM+conv ms | dtsim GEMM+conv ms | attention ms | dtsim attention ms | other kernels ms "
          "| dtsim memory-bound ms | optimizer ms | dtsim optimizer ms | gaps ms |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            r["split"] = {}
            for label, res, res0 in (("table", r["tab"], r["tab0"]), ("roofline", r["roof"], r["roof0"])):
                comp_s = dig(res, "breakdown_s", "compute")
                comp0 = dig(res0, "breakdown_s", "compute")
                att = dtsim_attention(r["cfg"], base, tables.get(r["table"]) if label == "table" else None)
                if comp_s is None or comp0 is None:
                    r["split"][label] = (None, att, None, dig(res, "breakdown_s", "optimizer"))
                    continue
                r["split"][label] = (comp0 - (att or 0.0), att, comp_s - comp0, dig(res, "breakdown_s", "optimizer"))
            for mode, p in (("eager", r["eager"]), ("compiled", r["comp"])):
                prof = (p or {}).get("profiler")
                if not prof:
                    continue
                cats = prof.get("by_category", {})
                tot = lambda names: sum(cats[c]["total_us"] for c in names if c in cats) * 1e-6  # noqa: E731
                gem, att, optk = tot(("gemm", "conv")), tot(("attention",)), tot(("optimizer",))
                rest = prof["kernel_sum_us"] * 1e-6 - gem - att - optk
                st = step_of(p) or prof.get("step_s_profiled")
                gap = st - prof["kernel_sum_us"] * 1e-6 if st else None

                def both(i):
                    t, f = r["split"]["table"][i], r["split"]["roofline"][i]
                    return f"{ms(t)} ({ms(f)})"
                w(f"| {r['name']} | {mode} | {ms(gem)} | {both(0)} | {ms(att) if att else '-'} | "
                  f"{both(1) if r['split']['roofline'][1] else '-'} | {ms(rest)} | {both(2)} | {ms(optk)} | {both(3)} "
                  f"| {ms(gap)} |")
        w("")
        dropped = sorted({k["name"] for p in train.values() if isinstance(p, dict)
                          for k in (p.get("profiler") or {}).get("annotations_dropped", [])})
        if dropped:
            w(f"The profiler's user-annotation ranges ({', '.join(f'`{d}`' for d in dropped)}) are not kernels: they "
              "span kernels counted on their own, and were taken out of the kernel sums (where they are among the "
              "top 40 names; a smaller one stays in, under a millisecond).")
            w("")
        for r in rows:
            p = r["eager"]
            prof = (p or {}).get("profiler")
            if not prof:
                continue
            top = [k for k in prof.get("top", []) if k["category"] not in ("gemm", "conv", "attention")][:5]
            if top:
                w(f"- {r['name']}, the largest kernels outside GEMMs and attention (eager): " + "; ".join(
                    f"`{k['name'][:70]}` {k['total_us'] / 1e3:.2f} ms ×{k['count']}" for k in top))
        w("")

        w("### Measured GEMMs against the datasheet curve, by shape")
        w("")
        c = base.get("gemm_efficiency", {})
        w(f"dtsim's {device} curve: efficiency = {c.get('max')} · F / (F + {c.get('half_flops'):.3g}) of "
          f"{peak_bf16 / 1e12:.1f} TFLOP/s (F = 2·b·m·n·k FLOPs). Ratio > 1: the curve is too slow for that shape.")
        w("")
        w("| table | b×m×n×k | GFLOP | measured µs | spread | measured TFLOP/s | measured eff | curve eff | curve time / measured |")
        w("|---|---|---|---|---|---|---|---|---|")
        ratios = []
        first = True
        for name, t in tables.items():
            for kind in ("gemm", "conv"):
                for g in sorted(t.get(kind, []), key=lambda g: 2 * g["batch"] * g["m"] * g["n"] * g["k"]):
                    square = kind == "gemm" and g["batch"] == 1 and g["m"] == g["n"] == g["k"]
                    if square and not first:
                        continue  # the square sweep every table has: shown for the first only
                    f = 2.0 * g["batch"] * g["m"] * g["n"] * g["k"]
                    rate = f / g["seconds"]
                    ce = curve_eff(base, f)
                    ratio = (f / (peak_bf16 * ce)) / g["seconds"]
                    ratios.append((name, kind, f, ratio))
                    w(f"| {os.path.splitext(name)[0].replace('-bf16', '')}{' (conv)' if kind == 'conv' else ''} | "
                      f"{g['batch']}×{g['m']}×{g['n']}×{g['k']} | {f / 1e9:.1f} | {g['seconds'] * 1e6:.1f} | "
                      f"{g.get('spread', 0):.3f} | {rate / 1e12:.0f} | {rate / peak_bf16:.3f} | {ce:.3f} | {ratio:.2f} |")
            first = False
        if ratios:
            w("")
            for lo, hi, label in ((0, 1e10, "< 10 GFLOP"), (1e10, 1e11, "10–100 GFLOP"), (1e11, 1e30, "> 100 GFLOP")):
                rs = [r[3] for r in ratios if lo <= r[2] < hi]
                if rs:
                    w(f"- {label}: curve/measured median {statistics.median(rs):.2f} "
                      f"(range {min(rs):.2f}–{max(rs):.2f}, {len(rs)} shapes)")
        w("")

        if clocks:
            w("### Clocks during each part")
            w("")
            w("nvidia-smi's samples (every 0.5 s) between each part's start and end: the SM clock, and the share of "
              "samples with the SW power cap (clock event reason 0x4) or another slowdown (HW, thermal) active. A "
              "table's provenance holds the clock read once, when it starts.")
            w("")
            w("| part | samples | SM MHz min | SM MHz median | SW power cap | other slowdown |")
            w("|---|---|---|---|---|---|")
            for part, (n, lo, med, cap, other) in clocks.items():
                w(f"| {part} | {n} | {lo:.0f} | {med:.0f} | {100 * cap:.0f}% | {100 * other:.0f}% |")
            w("")
        w("### Noisy timings in the kernel tables")
        w("")
        w("Entries whose spread (1.4826 MAD / median over the runs) is over 5 %, by table; the table's own "
          "\"noisy\" flag and reasons are in its provenance.")
        w("")
        w("| table | noisy flag | kind | entry | median µs | spread |")
        w("|---|---|---|---|---|---|")
        for name, t in tables.items():
            short = table_short(name)
            for kind in ("gemm", "conv", "memory"):
                for g in t.get(kind, []):
                    if g.get("spread", 0) <= 0.05:
                        continue
                    entry = (f"{g['batch']}×{g['m']}×{g['n']}×{g['k']}" if kind != "memory"
                             else f"{g['bytes'] / 2 ** 20:.3g} MiB" if g["bytes"] >= 2 ** 20 else f"{g['bytes'] / 1024:.3g} KiB")
                    w(f"| {short} | {t.get('noisy')} | {kind} | {entry} | {g['seconds'] * 1e6:.1f} | {g['spread']:.3f} |")
        w("")

        micro = train.get("micro") or {}
        w("### Plain kernels (PyTorch, bf16)")
        w("")
        if micro.get("gemms"):
            w("| GEMM m×n×k (torch.matmul) | µs | spread | measured TFLOP/s | of peak | dtsim curve eff | dtsim curve TFLOP/s "
              "| measured / curve |")
            w("|---|---|---|---|---|---|---|---|")
            for g in micro["gemms"]:
                f = 2.0 * g["m"] * g["n"] * g["k"]
                ce = curve_eff(base, f)
                w(f"| {g['m']}×{g['n']}×{g['k']} | {g['median_s'] * 1e6:.1f} | {g.get('spread', 0):.3f} | {g['tflops']:.1f} | "
                  f"{g['tflops'] * 1e12 / peak_bf16:.3f} | {ce:.3f} | {ce * peak_bf16 / 1e12:.1f} | "
                  f"{g['tflops'] * 1e12 / (ce * peak_bf16):.2f} |")
            w("")
        if micro.get("attention"):
            w("| SDPA (causal) b×h(kv)×s×d | backend | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s | bwd TFLOP/s |")
            w("|---|---|---|---|---|---|---|")
            for a in micro["attention"]:
                if "fwd" not in a:
                    w(f"| {a['shape']} | error | {a.get('error', '')[:80]} | | | | |")
                    continue
                bt = a.get("bwd_tflops")
                w(f"| {a['shape']} {a['batch']}×{a['heads']}({a['kv_heads']})×{a['seq']}×{a['head_dim']} | {a['backend']}"
                  f"{' gqa' if a.get('gqa_native') else ''} | {a['fwd']['median_s'] * 1e3:.3f} | {a['fwd_tflops']:.0f} | "
                  f"{a['fwd_bwd']['median_s'] * 1e3:.3f} | {a['fwd_bwd_tflops']:.0f} | {'-' if bt is None else f'{bt:.0f}'} |")
            w("")
            w("FLOPs: forward 4·b·h·s²·d halved for causal; backward 2.5× forward (FlashAttention's count).")
            w("")
            w("The same kernels against dtsim. dtsim counts attention's FLOPs without the causal halving (twice "
              f"the above) and prices them at the GEMM curve's efficiency (roofline: the {device.split('-')[0]} profile has no "
              "attention efficiency of its own) or at the measured rate of the cuBLAS GEMM of shape (b·h, s, s, d) "
              "(table). TFLOP/s below are all in the measured (causal-halved) convention: FLOPs the kernel does "
              "over dtsim's time. Ratio: dtsim time / measured time.")
            w("")
            w("| SDPA | measured fwd+bwd ms | measured TFLOP/s | dtsim roofline ms | TFLOP/s | ratio | dtsim table ms "
              "| TFLOP/s | ratio |")
            w("|---|---|---|---|---|---|---|---|---|")
            for a in micro["attention"]:
                if "fwd" not in a:
                    continue
                cfg = dict(layers=1, micro_batch=a["batch"], heads=a["heads"], seq=a["seq"], head_dim=a["head_dim"])
                meas = a["fwd_bwd"]["median_s"]
                flops = 3.5 * a.get("fwd_flops", 4.0 * a["batch"] * a["heads"] * a["seq"] ** 2 * a["head_dim"] *
                                    (0.5 if a.get("causal", True) else 1.0))
                roof = dtsim_attention(cfg, base)
                stem = {"gpt2-xl": "gpt2-xl-1gpu", "llama3-8b": "llama3-8b-tp1-4layers-1gpu",
                        "llama3-8b-tp8": "llama3-8b-tp8-slice-1gpu"}.get(a["shape"], a["shape"])
                tn = table_for(tables, stem)
                tab = dtsim_attention(cfg, base, tables[tn]) if tn else None

                def cells(t):
                    return "- | - | -" if t is None else f"{t * 1e3:.3f} | {flops / t / 1e12:.0f} | {t / meas:.2f}"
                w(f"| {a['shape']} {a['batch']}×{a['heads']}({a['kv_heads']})×{a['seq']}×{a['head_dim']} | "
                  f"{meas * 1e3:.3f} | {a['fwd_bwd_tflops']:.1f} | {cells(roof)} | {cells(tab)} |")
            w("")
        la = micro.get("launch") or {}
        lat = [t.get("provenance", {}).get("launch_latency_us") for t in tables.values()]
        lat = [x for x in lat if isinstance(x, (int, float))]
        w(f"Launch overhead: PyTorch op back to back {la.get('torch_op_host_us', float('nan')):.2f} µs per launch; "
          f"tiny kernel in a CUDA graph {la.get('graph_kernel_us', float('nan')):.2f} µs; dtsim's plugin, empty kernel "
          f"{statistics.median(lat) if lat else float('nan'):.2f} µs (median of the tables); "
          f"{device} assumes kernel_min_us {base.get('kernel_min_us')}.")
        w("")
        text = "\n".join(lines) + "\n"
        if install:
            if fake:
                raise SystemExit("gpu_compare.py: refusing to install fake tables")
            dst = os.path.join(ROOT, "hardware_profiles", "kernel_tables")
            for name, t in tables.items():
                t = dict(t, provenance=dict(t.get("provenance", {})))
                t["provenance"].setdefault("nvidia_driver", drv)
                t["provenance"].setdefault("torch", env.get("torch"))
                t["provenance"].setdefault(
                    "returned_files", ", ".join(os.path.relpath(os.path.abspath(x), ROOT) for x in folders))
                with open(os.path.join(dst, name), "w") as f:
                    json.dump(t, f, indent=2)
                    f.write("\n")
                print(f"installed hardware_profiles/kernel_tables/{name}", file=sys.stderr)
    if out_md:
        with open(out_md, "w") as f:
            f.write(text)
    print(text)
    return 0


def make_fake(folder):
    """Made-up returned files with the shapes and layout gpu_check.sh writes; every number is invented."""
    import random
    rnd = random.Random(29)
    work = tempfile.mkdtemp()
    for d in ("train", "tables", "logs", "env"):
        os.makedirs(os.path.join(work, d))
    prov = {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3 (FAKE)", "compute_capability": "9.0", "sm_count": 132,
            "sm_clock_mhz": 1980, "memory_clock_mhz": 2619, "cuda_driver": 13000, "cuda_runtime": 13000,
            "cublas": 130000, "dtype": "bf16", "date": "2026-11-26T00:00:00Z", "launch_latency_us": 2.5,
            "fake": True}
    for name, cfg in gpu_train.MODELS.items():
        stem = scenario_stem(cfg["scenario"])
        gemms = []
        for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
            f = 2.0 * s ** 3
            gemms.append({"batch": 1, "m": s, "n": s, "k": s, "seconds": f / (700e12 * f / (f + 3e9)),
                          "spread": 0.01, "runs": 10})
        if "seq" in cfg:
            t = cfg["micro_batch"] * cfg["seq"]
            for n in (cfg["hidden"], cfg["ffn"], cfg["vocab"]):
                f = 2.0 * t * n * cfg["hidden"]
                gemms.append({"batch": 1, "m": t, "n": n, "k": cfg["hidden"],
                              "seconds": f / (650e12 * f / (f + 3e9)), "spread": 0.02, "runs": 10})
        mem = [{"bytes": 4.0 * 1024 * 4 ** i, "seconds": 3e-6 + 4.0 * 1024 * 4 ** i / 2.9e12, "spread": 0.01,
                "runs": 10} for i in range(12)]
        table = {"provenance": dict(prov, model=name, micro_batch=cfg["micro_batch"]), "dtype": "bf16",
                 "gemm": gemms, "memory": mem, "elementwise": {}, "launch_overhead_us": 0.0,
                 "launch_overhead_spread": 0.0, "noisy": False}
        with open(os.path.join(work, "tables", f"nvidia-h100-80gb-hbm3-{stem}-bf16.json"), "w") as f:
            json.dump(table, f)
        for mode in gpu_train.MODES:
            if name == "resnet50" and mode == "compile":
                continue  # as when the budget runs out: "not run"
            step = {"gpt2-xl": 0.30, "llama3-8b-tp1": 0.25, "llama3-8b-tp8": 0.12, "resnet50": 0.09}[name]
            step *= 0.85 if mode == "compile" else 1.0
            samples = [step * (1 + 0.01 * rnd.random()) for _ in range(6)]
            cats = {"gemm": 0.55, "attention": 0.12, "optimizer": 0.05, "norm": 0.04, "elementwise": 0.08,
                    "copy/cast/fill": 0.03, "softmax/loss": 0.02}
            if name == "resnet50":
                cats = {"conv": 0.6, "norm": 0.15, "elementwise": 0.1, "optimizer": 0.04}
            by_cat = {c: {"count": rnd.randint(10, 500), "total_us": step * 1e6 * v} for c, v in cats.items()}
            part = {"part": f"{name}-{mode}", "status": "ok", "fake": True, "model": name, "mode": mode,
                    "environment": {"gpu": "NVIDIA H100 80GB HBM3 (FAKE)", "torch": "0.0-fake", "sm_count": 132},
                    "step": {"median_s": statistics.median(samples), "spread": 0.01, "samples_s": samples},
                    "peak_allocated_bytes": int(rnd.uniform(30, 60) * GIB),
                    "peak_reserved_bytes": int(rnd.uniform(60, 70) * GIB),
                    "profiler": {"step_s_profiled": step * 1.05,
                                 "kernel_sum_us": sum(v["total_us"] for v in by_cat.values()),
                                 "kernel_launches": sum(v["count"] for v in by_cat.values()), "by_category": by_cat,
                                 "top": [{"name": f"fake_{c}_kernel", "count": v["count"], "total_us": v["total_us"],
                                          "category": c} for c, v in by_cat.items()]}}
            if name == "llama3-8b-tp1" and mode == "compile":
                part.update(status="error", error="RuntimeError('fake failure, to show how one is reported')")
            with open(os.path.join(work, "train", f"{name}-{mode}.json"), "w") as f:
                json.dump(part, f)
    micro = {"part": "micro", "status": "ok", "fake": True,
             "gemms": [{"m": m, "n": n, "k": k, "median_s": 2 * m * n * k / 600e12, "tflops": 600.0}
                       for m, n, k in ((8192, 8192, 8192), (4096, 4096, 1024), (64, 8192, 8192))],
             "attention": [{"shape": "gpt2-xl", "batch": 8, "heads": 25, "kv_heads": 25, "seq": 1024, "head_dim": 64,
                            "backend": "flash", "fwd": {"median_s": 1e-3}, "fwd_tflops": 300.0,
                            "fwd_bwd": {"median_s": 4e-3}, "fwd_bwd_tflops": 250.0, "bwd_tflops": 220.0}],
             "launch": {"torch_op_host_us": 5.0, "graph_kernel_us": 1.5}}
    with open(os.path.join(work, "train", "micro.json"), "w") as f:
        json.dump(micro, f)
    with open(os.path.join(work, "logs", "gpu_check.log"), "w") as f:
        f.write("fake\n")
    os.makedirs(folder, exist_ok=True)
    with tarfile.open(os.path.join(folder, "gpu_check.tar.gz"), "w:gz") as t:
        for d in ("train", "tables", "logs", "env"):
            t.add(os.path.join(work, d), arcname=d)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump({"schema": "dtsim gpu_check 1", "fake": True, "steps": [], "train": {}, "tables": {}}, f)
    with open(os.path.join(folder, "summary.txt"), "w") as f:
        f.write("FAKE: made by gpu_compare.py --make-fake\n")
    shutil.rmtree(work)
    print(f"wrote a fake returned set into {folder}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("returned", nargs="*",
                    help="the folder gpu_check.sh's files came back in (several: later ones' good parts win)")
    ap.add_argument("-o", "--out", help="write the markdown report here too")
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build", "dtsim"))
    ap.add_argument("--device", default=BASE_DEVICE, metavar="NAME",
                    help=f"dtsim's device profile in hardware_profiles/ to compare against (default {BASE_DEVICE})")
    ap.add_argument("--install", action="store_true", help="copy the tables into hardware_profiles/kernel_tables/")
    ap.add_argument("--make-fake", metavar="DIR")
    a = ap.parse_args()
    if a.make_fake:
        return make_fake(a.make_fake)
    if not a.returned:
        ap.error("give the returned folder (or --make-fake DIR)")
    if not os.access(a.dtsim, os.X_OK):
        ap.error(f"no dtsim at {a.dtsim} (build it, or give --dtsim)")
    if not os.path.exists(os.path.join(ROOT, "hardware_profiles", a.device + ".json")):
        ap.error(f"no device profile hardware_profiles/{a.device}.json")
    return report(a.returned, a.dtsim, a.out, a.install, a.device)


if __name__ == "__main__":
    sys.exit(main())
