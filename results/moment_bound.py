"""The moment bound (solver/moment_bound.rs) on every instance of
results/joint.csv: `python3 results/moment_bound.py EXAMPLE_BINARY SECS`
(EXAMPLE_BINARY: target/release/examples/moment_bound). Writes
results/moment_bound.csv: each instance's fastest recorded plan, the bound
the joint benchmark printed, the moment bound, and whether it stays at or
below every recorded plan (it must)."""

import csv
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def graph_path(name):
    p = os.path.join(ROOT, "models", name + ".yaml")
    if os.path.exists(p):
        return p
    return os.path.join(ROOT, "..", "shared", "benchmarks", name + ".yaml")


def fastest(row):
    steps = [
        row[k]
        for k in ("recompute_step_s", "policy_step_s", "offload_only_step_s", "joint_step_s")
        if row[k]
    ]
    return min(map(float, steps)) if steps else None


def run(binary, secs, row):
    out = subprocess.run(
        [binary, graph_path(row["graph"]), os.path.join(ROOT, "devices", row["device"] + ".yaml"),
         row["budget_pct"], str(secs)],
        capture_output=True, text=True, check=True,
    ).stdout
    bound = None
    for line in out.splitlines():
        if line.startswith("moment bound"):
            bound = float(line.split("(")[1].split()[0])
    return bound


def main():
    binary, secs = sys.argv[1], float(sys.argv[2])
    rows = [r for r in csv.DictReader(open(os.path.join(HERE, "joint.csv"))) if fastest(r)]
    with ThreadPoolExecutor(2) as pool:
        bounds = list(pool.map(lambda r: run(binary, secs, r), rows))
    with open(os.path.join(HERE, "moment_bound.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["graph", "device", "budget_pct", "fastest_plan_s", "joint_step_s",
                    "joint_bound_s", "moment_bound_s", "joint_gap_before", "joint_gap_now",
                    "below_every_plan"])
        for r, b in zip(rows, bounds):
            best = fastest(r)
            old = float(r["joint_bound_s"]) if r["joint_bound_s"] else None
            new = max(x for x in (old, b) if x is not None) if (old or b) else None
            joint = float(r["joint_step_s"]) if r["joint_step_s"] else None
            gap = lambda lb: f"{(joint - lb) / joint:.5f}" if joint and lb else ""
            w.writerow([r["graph"], r["device"], r["budget_pct"], f"{best:.6e}",
                        r["joint_step_s"], r["joint_bound_s"], f"{b:.6e}" if b else "",
                        gap(old), gap(new), "" if b is None else str(b <= best * (1 + 1e-6)).lower()])


if __name__ == "__main__":
    main()
