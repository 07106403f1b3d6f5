#!/usr/bin/env python3
"""Writes hardware_profiles/stacks/validation_residuals.json: what `run` and `plan` widen their
ranges by (sim/results/ranges.hpp). Usage: scripts/residuals.py DTSIM (rewrites the file in place)

The model error: each validation group's measured / predicted step-time ratios, from
`dtsim validate --suite scenarios/validation`, with the stacks (and frameworks) the group stands
for. The device spread: ml-engineering's "on the same 8-GPU node you can see 5%+ MAMF spread
between GPUs" (calibration microbench clocks.json row clk-017), read as the expected range of 8
normal draws (2.847 sigma), so sigma = 0.05 / 2.847.
"""
import json
import os
import subprocess
import sys
import tempfile

GROUPS = [  # validate's groups pooled into one, stacks it stands for, frameworks and model kinds (none: any)
    (["megatron-sc21"], ["default"], ["megatron-lm"], ["transformer"]),
    # pytorch-eager-2.8 is pytorch-eager with RMSNorm as ops (docs/stacks.md): the nearest rows it has.
    (["h100-pytorch-eager", "h200-pytorch-eager"], ["pytorch-eager", "pytorch-eager-2.8"], [], []),
    (["h100-torch-compile", "h200-torch-compile"], ["torchtitan-compile", "torchtitan-async-tp"], [], []),
]


def main():
    dtsim = sys.argv[1]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([dtsim, "validate", "--suite", "scenarios/validation", "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(out.name))["rows"]
    groups = []
    for names, stacks, frameworks, kinds in GROUPS:
        ratios = [r["published_step_time_s"] / r["predicted_step_time_s"] for r in rows if r["group"] in names]
        entry = {"group": "+".join(names), "stacks": stacks}
        if frameworks:
            entry["frameworks"] = frameworks
        if kinds:
            entry["model_kinds"] = kinds
        entry["ratios"] = [round(x, 6) for x in ratios]
        groups.append(entry)
    doc = {
        "description": "Written by scripts/residuals.py from `dtsim validate --suite scenarios/validation`: "
                       "each group's measured / predicted step-time ratios, and the GPU-to-GPU spread. "
                       "run and plan widen their ranges by these (sim/results/ranges.hpp).",
        "device_spread": {
            "sigma": round(0.05 / 2.847, 5),
            "source": "ml-engineering, compute/accelerator/README.md, 'Not all accelerators are created equal': "
                      "'on the same 8-GPU node you can see 5%+ MAMF spread between GPUs' (stas00/ml-engineering@"
                      "7bc7c3054eb93c277a4755c597ae0864d77a63f1; calibration microbench clocks.json row clk-017), "
                      "taken as the expected range of 8 normal draws, 2.847 sigma.",
        },
        "groups": groups,
    }
    # Written after the suite ran: `run` reads this file, so it must stay whole while the suite runs.
    target = "hardware_profiles/stacks/validation_residuals.json"
    with open(target + ".tmp", "w") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
    os.replace(target + ".tmp", target)


if __name__ == "__main__":
    main()
