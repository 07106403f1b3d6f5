#!/usr/bin/env python3
"""Writes scenarios/validation/*.json from Megatron SC21 Table 1 (../shared/calibration).

The table leaves out the micro-batch size, the interleaving and the data-parallel implementation.
The authors' own launch script for Table 1 gives them per row (NVIDIA/Megatron-LM,
examples/sc21/run_table_1.sh, with CONFIG.sh: --fp16, static loss scale, full recomputation
with --recompute-method uniform), and they are copied from it below. The rest follows one rule
for every row: fp16 with Adam; stage-to-stage sends that hold the sender (Megatron-LM 2021
synchronised after each batch_isend_irecv); gradients added into the main_grad buffer by a
separate pass (the fused wgrad GEMM came later). PyTorch DDP (DDP=torch) overlaps the gradient
all-reduce with backward in 25 MB buckets; Megatron's own (DDP=local) all-reduces after backward.
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
    "parallelism": {"recompute": "full", "pipeline_p2p": "blocking"},
    "training": {"precision": "fp16", "optimizer": "adam", "attention": "standard", "grad_accumulation": "separate"},
    "simulation": {"seed": 1},
}
(out / "base.json").write_text(json.dumps(base, indent=2) + "\n")

cite = table["source"]["citation"].split(".")[0] + " et al., SC21, Table 1"
script = "NVIDIA/Megatron-LM examples/sc21/run_table_1.sh"
# Per row, from that script: micro-batch size, layers per virtual pipeline stage (None: plain
# 1F1B or no pipeline), and whether PyTorch DDP overlaps the all-reduce (DDP=torch).
launch = {
    1.7: (16, None, True), 3.6: (16, None, True), 7.5: (16, None, True), 18.4: (8, None, True),
    39.1: (4, None, False), 76.1: (2, 5, False), 145.6: (2, 5, False), 310.1: (1, 3, False),
    529.6: (1, 1, False), 1008.0: (1, None, False),
}
for row in table["rows"]:
    l, h, a = row["num_layers"], row["hidden_size"], row["attention_heads"]
    s, v, gpus = row["seq_len"], row["vocab"], row["num_gpus"]
    tp, pp, gb = row["tensor_parallel"], row["pipeline_parallel"], row["global_batch_size"]
    dp = gpus // (tp * pp)
    # Eq. 3 of the paper: FLOPs per iteration with recomputation.
    flops = 96 * gb * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    name = f"megatron-{row['params_billion']}b"
    mbs, per_virtual, torch_ddp = launch[row["params_billion"]]
    par = {"data": dp, "tensor": tp, "pipeline": pp, "micro_batch_size": mbs, "overlap_grad_reduce": torch_ddp}
    if pp > 1:
        par["pipeline_schedule"] = "interleaved-1f1b" if per_virtual else "1f1b"
        if per_virtual:
            par["virtual_stages"] = l // pp // per_virtual
    scenario = {
        "extends": "base.json",
        "name": name,
        "description": f"GPT {row['params_billion']} B on {gpus} A100s (TP {tp}, PP {pp}, DP {dp}), {cite}; "
                       f"micro-batch, interleaving and DDP from {script}.",
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
            "group": "megatron-sc21",
            "tolerance_percent": 10,
        },
    }
    (out / f"{name}.json").write_text(json.dumps(scenario, indent=2) + "\n")
    print(name, f"{scenario['reference']['step_time_s']:.2f} s", file=sys.stderr)
