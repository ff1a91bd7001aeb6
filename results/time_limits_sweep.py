#!/usr/bin/env python3
"""Issue #19, item 2: does `--time-limit T` hold (wall <= T + 5% + 1 s) on
every graph of the benchmarks? Every public graph in ../shared/benchmarks
and every model in models/, at 60% of the checkpoint-all peak (75%, then 90%,
where the budget is below the largest node with its inputs, which
`solve` refuses at once), each strategy that runs for a limit; the tiered ones on the A100
device file.

    python3 results/time_limits_sweep.py target/release/remat [LIMIT_S]

Rows go to results/time_limits_all.csv as they finish; a re-run skips
rows already there. Wall time and peak RSS come from /usr/bin/time.
"""
import csv, os, subprocess, sys, glob

binary = sys.argv[1]
limit = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.join(root, "results", "time_limits_all.csv")
graphs = sorted(glob.glob(os.path.join(root, "..", "shared", "benchmarks", "*.yaml")))
graphs += sorted(glob.glob(os.path.join(root, "models", "*.yaml")))
plain = ["remat-exact", "remat-fast", "checkmate-ilp", "checkmate-approx", "lp-bound", "dtr-greedy"]
tiered = ["remat-tiered", "autotm-async"]
device = os.path.join(root, "devices", "a100-40gb-pcie4.yaml")
header = ["graph", "budget", "strategy", "device", "time_limit_s", "allowed_s", "wall_s",
          "holds", "max_rss_kb", "status"]
done = set()
if os.path.exists(out):
    with open(out) as f:
        for r in csv.DictReader(f):
            done.add((r["graph"], r["strategy"], r["device"]))
new = not os.path.exists(out)
with open(out, "a", newline="") as f:
    w = csv.writer(f)
    if new:
        w.writerow(header)
    for g in graphs:
        name = os.path.splitext(os.path.basename(g))[0]
        for st in plain + tiered:
            dev = "a100-40gb-pcie4" if st in tiered else ""
            if (name, st, dev) in done:
                continue
            for budget in ["60%", "75%", "90%"]:
                cmd = ["/usr/bin/time", "-f", "TIME %e %M", binary, "solve", g, "-b", budget,
                       "-s", st, "--time-limit", str(limit), "-q"]
                if dev:
                    cmd += ["--device", device]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 2:
                    break
            wall, rss = next(l.split()[1:3] for l in p.stderr.splitlines() if l.startswith("TIME"))
            status = next((l.split()[1] for l in p.stdout.splitlines() if l.startswith("status")),
                          f"exit {p.returncode}")
            allowed = limit * 1.05 + 1.0
            holds = "yes" if float(wall) <= allowed else "no"
            w.writerow([name, budget, st, dev, limit, allowed, wall, holds, rss, status])
            f.flush()
            print(name, st, dev, wall, holds, status, flush=True)
