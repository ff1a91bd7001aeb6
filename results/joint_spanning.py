#!/usr/bin/env python3
"""Writes results/joint_spanning.csv: remat-tiered on every model in models/
at 50% of its checkpoint-all peak (60 s) and ResNet-50 at 30% (the issue's
certification target, LIMIT_30 s), on the A100 (PCIe 4) and the GH200, with
copies that may span stages (docs/format.md). Per row: the simulated step
time, the step bound the answer carries, its gap, which plan won, whether
that plan spans stages, and the MILP's own bound for copies within their
stage. Rows are appended as they finish and skipped when already present,
so an interrupted run resumes:

    cargo build --release && python3 results/joint_spanning.py [BINARY] [JOBS]
"""
import csv, re, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/remat")
JOBS = int(sys.argv[2]) if len(sys.argv) > 2 else 1
OUT = ROOT / "results/joint_spanning.csv"
DEVICES = ["a100-40gb-pcie4", "gh200"]
LIMIT_50, LIMIT_30 = 60, 300
FIELDS = ["model", "device", "budget_pct", "limit_s", "status", "step_ms", "bound_ms",
          "gap_pct", "from", "spans", "milp_bound_ms", "wall_s"]
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def ms(text):
    m = re.search(r"([\d.]+) (us|ms|s)\b", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def solve(model, dev, pct, limit):
    args = [BIN, "solve", str(ROOT / f"models/{model}.yaml"), "-b", f"{pct}%", "-s",
            "remat-tiered", "--device", str(ROOT / f"devices/{dev}.yaml"),
            "--time-limit", str(limit), "-q", "--plan", "-"]
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    row = {"model": model, "device": dev, "budget_pct": pct, "limit_s": limit,
           "wall_s": f"{time.monotonic() - t:.1f}", "status": "error"}
    # With the plan on standard output, the summary goes to standard error.
    summary, plan = p.stderr, p.stdout
    for line in summary.splitlines():
        key = line[:17].strip()
        val = line[17:].strip()
        if key == "status":
            row["status"] = val.split()[0]
        elif key == "step time":
            row["step_ms"] = f"{ms(val):.4f}"
        elif key == "step bound":
            row["bound_ms"] = f"{ms(val):.4f}"
            g = re.search(r"gap ([\d.]+)%", val)
            row["gap_pct"] = g.group(1) if g else ""
        elif key == "detail":
            f = re.match(r"best plan from (.+?) \(", val)
            row["from"] = f.group(1) if f else ""
            b = re.search(r"its bound for copies within their stage ([\d.]+ (?:us|ms|s))", val)
            row["milp_bound_ms"] = f"{ms(b.group(1)):.4f}" if b else ""
    # A copy spans stages when computations run between its issue and its wait.
    row["spans"] = spans(plan) if plan else ""
    return row


def spans(plan):
    """Copies whose issue and wait have two or more first computations (stage
    frontiers) between them: they run across a stage boundary."""
    issued, count, seen, frontiers = {}, 0, set(), 0
    for line in plan.splitlines():
        line = line.strip()
        m = re.match(r"%(\d+) = copy_(?:in|out) ", line)
        if m:
            issued[m.group(1)] = frontiers
        elif line.startswith("wait %"):
            r = line.split("%")[1].split()[0]
            if r in issued and frontiers - issued.pop(r) > 1:
                count += 1
        elif line.startswith("compute "):
            node = line[len("compute "):].split(",")[0]
            if node not in seen:
                seen.add(node)
                frontiers += 1
    return count


def main():
    done = set()
    if OUT.exists():
        with OUT.open() as f:
            done = {(r["model"], r["device"], r["budget_pct"]) for r in csv.DictReader(f)}
    todo = [(m.stem, d, 50, LIMIT_50) for m in sorted((ROOT / "models").glob("*.yaml"))
            for d in DEVICES]
    todo += [("resnet50", d, 30, LIMIT_30) for d in DEVICES]
    todo = [t for t in todo if (t[0], t[1], str(t[2])) not in done]
    new = not OUT.exists()
    with OUT.open("a", newline="") as f, ThreadPoolExecutor(JOBS) as pool:
        w = csv.DictWriter(f, FIELDS)
        if new:
            w.writeheader()
        for row in pool.map(lambda t: solve(*t), todo):
            w.writerow(row)
            f.flush()
            print(row, flush=True)


if __name__ == "__main__":
    main()
