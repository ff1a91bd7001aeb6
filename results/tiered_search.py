#!/usr/bin/env python3
"""Writes results/tiered_search.csv: for every model in models/ at 70, 50 and
30% of its checkpoint-all peak, on the A100 (PCIe 4) and the GH200, the step
time of the best seed policy (docs/tiers.md), of remat-fast without a device
(recompute-only: cost / throughput, the simulator's step time for a plan
without transfers), and of remat-fast with the device (offload moves), with
wall times. Runs the release binary one solve at a time:

    cargo build --release && python3 results/tiered_search.py [BINARY]
"""
import csv, re, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/remat")
DEVICES = {"a100-40gb-pcie4": 6.05e13, "gh200": 1.92e14}  # throughput, flop/s
POLICIES = ["offload-all", "mc-dla", "tiertrain", "autotm-static", "autotm-sync", "autotm-async"]
FAST_LIMIT, POLICY_LIMIT = 20, 5


def solve(model, pct, strategy, device, limit):
    args = [BIN, "solve", str(model), "-b", f"{pct}%", "-s", strategy, "--time-limit", str(limit), "-q"]
    if device:
        args += ["--device", str(ROOT / f"devices/{device}.yaml")]
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    wall = time.monotonic() - t
    out = {"wall": wall, "status": None, "step": None, "cost": None, "detail": ""}
    for line in p.stdout.splitlines():
        key, _, val = line.partition(" ")
        val = val.strip()
        if line.startswith("status"):
            out["status"] = val
        elif line.startswith("step time"):
            m = re.match(r"time\s+([\d.]+) (us|ms|s)\b", val)
            out["step"] = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
        elif line.startswith("cost"):
            out["cost"] = float(val.split()[0])
        elif line.startswith("detail"):
            out["detail"] = val
    if out["status"] not in ("optimal", "feasible"):
        out["step"] = out["cost"] = None
    return out


def fmt(x):
    return "" if x is None else f"{x:.6f}"


rows = []
models = sorted((ROOT / "models").glob("*.yaml"))
for pct in (70, 50, 30):
    for model in models:
        rec = solve(model, pct, "remat-fast", None, FAST_LIMIT)
        for dev, thr in DEVICES.items():
            pol = []
            for p in POLICIES:
                r = solve(model, pct, p, dev, POLICY_LIMIT)
                if r["step"] is not None:
                    pol.append((r["step"], p))
            best = min(pol) if pol else (None, "")
            fast = solve(model, pct, "remat-fast", dev, FAST_LIMIT)
            seed = re.match(r"offload search from (.*?)(?: \(|:)", fast["detail"])
            census = re.search(r"(\d+) copies out, (\d+) copies in, (\d+) recomputations", fast["detail"])
            allfast = None
            row = {
                "model": model.stem, "device": dev, "budget": f"{pct}%",
                "best_policy": best[1], "best_policy_step_s": fmt(best[0]),
                "recompute_only_step_s": fmt(rec["cost"] / thr if rec["cost"] is not None else None),
                "recompute_only_wall_s": f"{rec['wall']:.2f}",
                "remat_fast_device_step_s": fmt(fast["step"]),
                "remat_fast_device_wall_s": f"{fast['wall']:.2f}",
                "winning_seed": seed.group(1) if seed else "",
                "copies_out": census.group(1) if census else "",
                "recomputations": census.group(3) if census else "",
            }
            rows.append(row)
            print(row, flush=True)
            with open(ROOT / "results/tiered_search.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
                w.writeheader()
                w.writerows(rows)
