"""remat-fast on the public random DAGs, in the file's node order and with
--search-orders, at the same byte budgets: results/orders.csv.

    python3 results/orders_bench.py REMAT_BINARY SECONDS

Two solves run at a time (one per core). Each row is one solve; `order`
says which order the answer computes in (from the summary's detail):
`file`, `other`, or `sequence` (a plan outside the schedule form).
"""
import csv
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

remat, secs = sys.argv[1], sys.argv[2]
bench = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks"
graphs = ["random-layered-n100", "random-layered-n250", "random-layered-n500", "random-layered-n1000"]
budgets = ["60%", "70%", "80%", "90%"]


def solve(job):
    graph, budget, search = job
    cmd = [remat, "solve", str(bench / f"{graph}.yaml"), "-b", budget, "-s", "remat-fast",
           "--time-limit", secs, "-q"] + (["--search-orders"] if search else [])
    p = subprocess.run(cmd, check=False, capture_output=True, text=True)
    field = lambda name: (re.search(rf"^{name}\s+(.*)$", p.stdout, re.MULTILINE) or [None, ""])[1]
    cost = re.match(r"([0-9.e+]+)", field("cost"))
    bound = re.match(r"([0-9.e+]+)", field("lower bound"))
    status = field("status") or (p.stderr.strip().splitlines() or [""])[-1][:60]
    return {
        "graph": graph, "budget": budget, "search_orders": int(search),
        "status": status.split()[0] if status else "",
        "cost": cost[1] if cost else "", "bound": bound[1] if bound else "",
        "order": "sequence" if "no schedule expresses" in field("detail")
        else "other" if "another node order" in field("detail") else "file",
        "seconds": (re.match(r"([0-9.]+)", field("solve time")) or [None, ""])[1],
    }


jobs = [(g, b, s) for g in graphs for b in budgets for s in (False, True)]
with ThreadPoolExecutor(2) as pool:
    rows = list(pool.map(solve, jobs))
out = Path(__file__).resolve().parent / "orders.csv"
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print(out)
