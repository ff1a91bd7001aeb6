#!/usr/bin/env python3
"""Issue #16's 60 s target: every model in models/ at 50% of its
checkpoint-all peak, remat-tiered with --time-limit 60, on the A100 and the
GH200 device files: step time, step bound, gap and wall time.

    python3 results/joint_models50.py target/release/remat [DEVICE ...]

Rows go to results/joint_models50.csv (or to the file named by the OUT
environment variable) as they finish; a re-run skips rows already there.
Run one process per device to use both cores.
"""
import csv, os, re, subprocess, sys, glob, time

binary = sys.argv[1]
devices = sys.argv[2:] or ["a100-40gb-pcie4", "gh200"]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.environ.get("OUT", os.path.join(root, "results", "joint_models50.csv"))
header = ["model", "device", "budget", "time_limit_s", "status", "step_ms", "bound_ms",
          "gap_pct", "wall_s", "detail"]
done = set()
if os.path.exists(out):
    with open(out) as f:
        done = {(r["model"], r["device"]) for r in csv.DictReader(f)}
new = not os.path.exists(out)
with open(out, "a", newline="") as f:
    w = csv.writer(f)
    if new:
        w.writerow(header)
        f.flush()
    for dev in devices:
        for g in sorted(glob.glob(os.path.join(root, "models", "*.yaml"))):
            name = os.path.splitext(os.path.basename(g))[0]
            if (name, dev) in done:
                continue
            cmd = [binary, "solve", g, "-b", "50%", "-s", "remat-tiered", "--time-limit", "60",
                   "--device", os.path.join(root, "devices", dev + ".yaml"), "-q"]
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.time() - t0
            lines = {l.split(None, 1)[0]: l for l in p.stdout.splitlines() if l.strip()}
            status = lines["status"].split()[1] if "status" in lines else f"exit {p.returncode}"
            step = re.search(r"step time\s+([\d.]+) ms", p.stdout)
            bound = re.search(r"step bound\s+([\d.]+) ms", p.stdout)
            detail = lines.get("detail", p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "")
            row = [name, dev, "50%", 60, status,
                   step.group(1) if step else "", bound.group(1) if bound else "", "", f"{wall:.2f}",
                   detail.replace("detail", "", 1).strip()]
            if step and bound:
                row[7] = f"{(float(step.group(1)) - float(bound.group(1))) / float(step.group(1)) * 100:.3f}"
            w.writerow(row)
            f.flush()
            print(name, dev, status, row[5], row[6], row[7], row[8], flush=True)
