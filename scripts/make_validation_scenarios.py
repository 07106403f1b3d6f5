#!/usr/bin/env python3
"""Writes scenarios/validation/*.json from Megatron SC21 Table 1 (../shared/calibration).

Settings the table does not give follow one rule for every row, chosen from the paper's text
rather than fitted: micro-batch 1; interleaved 1F1B with 2 chunks per stage when a stage's layer
count is even, else plain 1F1B; full activation recomputation (Eq. 3 assumes it); fp16; the
gradient all-reduce after backward, as Megatron-LM did in 2021; stage-to-stage sends that hold
the sender (Megatron-LM 2021 synchronised after each batch_isend_irecv); gradients added into
the fp32 main_grad buffer by a separate pass (the fused wgrad GEMM came later).
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
table = json.loads((root.parent / "shared/calibration/megatron_sc21_table1.json").read_text())
out = root / "scenarios/validation"
out.mkdir(parents=True, exist_ok=True)

base = {
    "schema_version": 1,
    "description": "Megatron SC21 Table 1 setting: DGX A100 80GB nodes on Selene (8 x 200 Gb/s HDR InfiniBand per node), GPT with s = 2048, V = 51200, fp16, full recomputation.",
    "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1},
    "parallelism": {"micro_batch_size": 1, "recompute": "full", "overlap_grad_reduce": False,
                    "pipeline_p2p": "blocking"},
    "training": {"precision": "fp16", "optimizer": "adam", "attention": "standard", "grad_accumulation": "separate"},
    "simulation": {"seed": 1},
}
(out / "base.json").write_text(json.dumps(base, indent=2) + "\n")

cite = table["source"]["citation"].split(".")[0] + " et al., SC21, Table 1"
for row in table["rows"]:
    l, h, a = row["num_layers"], row["hidden_size"], row["attention_heads"]
    s, v, gpus = row["seq_len"], row["vocab"], row["num_gpus"]
    tp, pp, gb = row["tensor_parallel"], row["pipeline_parallel"], row["global_batch_size"]
    dp = gpus // (tp * pp)
    # Eq. 3 of the paper: FLOPs per iteration with recomputation.
    flops = 96 * gb * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    name = f"megatron-{row['params_billion']}b"
    par = {"data": dp, "tensor": tp, "pipeline": pp}
    if pp > 1:
        per_stage = l // pp
        par["pipeline_schedule"] = "interleaved-1f1b" if per_stage % 2 == 0 else "1f1b"
        if per_stage % 2 == 0:
            par["virtual_stages"] = 2
    scenario = {
        "extends": "base.json",
        "name": name,
        "description": f"GPT {row['params_billion']} B on {gpus} A100s (TP {tp}, PP {pp}, DP {dp}), {cite}.",
        "model": {"kind": "transformer", "num_layers": l, "hidden_size": h, "num_heads": a,
                  "seq_len": s, "vocab_size": v, "mlp": "gelu"},
        "cluster": {"nodes": gpus // 8},
        "parallelism": par,
        "training": {"global_batch_size": gb},
        "reference": {
            "source": cite,
            "tflops_per_gpu": row["achieved_tflops_per_gpu"],
            "flops_per_step": flops,
            "step_time_s": flops / (gpus * row["achieved_tflops_per_gpu"] * 1e12),
        },
    }
    (out / f"{name}.json").write_text(json.dumps(scenario, indent=2) + "\n")
    print(name, f"{scenario['reference']['step_time_s']:.2f} s", file=sys.stderr)
