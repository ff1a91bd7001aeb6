"""Verify every strategy's plans on the examples (not a test; writes a CSV).

For each example, each strategy and each budget (a fraction of the way from
the smallest feasible budget to the checkpoint-all peak), solve with the
remat binary and verify the plan in PyTorch; one CSV row per pair:
status, cost, recomputations, the simulated and measured peaks, and whether
gradients and buffers are bitwise those of the no-remat joint-graph run.

    REMAT_BIN=target/release/remat python python/verify_sweep.py [--out results/pytorch_verify.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

STRATEGIES = ["checkpoint-all", "remat-fast", "checkmate-ilp", "remat-exact", "checkmate-approx",
              "dtr-greedy", "ap-sqrtn", "ap-greedy", "lin-greedy", "griewank-logn"]
MODELS = {"mlp": 4, "cnn": 4, "transformer": 4, "block": 2, "resnet18": 2}
FRACTIONS = [10, 50, 100]


def outcome(error: str) -> str:
    """The answer's status (as `remat solve` prints it) from its one-line error."""
    if "found no plan that fits" in error:
        return "no-fit"
    if "no plan found within the time limit" in error:
        return "no-solution"
    if "infeasible" in error:
        return "infeasible"
    return error.rsplit(": ", 1)[-1][:60]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE.parent / "results" / "pytorch_verify.csv"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--time-limit", type=float, default=5)
    args = ap.parse_args()

    import subprocess

    from remat_torch import binary
    from remat_torch.capture import capture
    from remat_torch.errors import RematInputError
    from remat_torch.executor import graph_name
    from remat_torch.factory import call_factory
    from remat_torch.graphfile import export
    from remat_torch.verify import verify

    examples = HERE / "examples" / "models.py"
    tmp = Path(tempfile.mkdtemp())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["model", "batch", "nodes", "strategy", "budget_fraction", "budget", "status", "cost",
              "recomputations", "simulated_peak", "measured_peak", "peak_equal", "grads_bitwise",
              "buffers_bitwise_once", "eager_bitwise", "verify_s"]
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for name in args.models.split(","):
            batch = MODELS[name]
            spec = f"{examples}:{name}"
            model, data, loss_fn = call_factory(spec, batch)
            cap = capture(model, data, loss_fn)
            graph = tmp / f"{name}.yaml"
            graph.write_text(export(cap, data, graph_name(name, batch, cap.fingerprint), batch))
            text = subprocess.run([binary.find_remat(), "inspect", str(graph)],
                                  capture_output=True, text=True, check=True).stdout
            lo = int(text.split("smallest budget")[1].split("(")[1].split()[0])
            hi = int(text.split("checkpoint-all")[1].split("(")[1].split()[0])
            for strategy in args.strategies.split(","):
                for frac in FRACTIONS:
                    budget = lo + (hi - lo) * frac // 100
                    plan = tmp / f"{name}-{strategy}-{frac}.json"
                    row = {"model": name, "batch": batch, "nodes": len(cap.nodes),
                           "strategy": strategy, "budget_fraction": frac, "budget": budget}
                    try:
                        binary.solve(str(graph), str(budget), str(plan), strategy=strategy,
                                     time_limit=args.time_limit)
                    except RematInputError as e:
                        row["status"] = outcome(str(e))
                        w.writerow(row)
                        f.flush()
                        print(row, flush=True)
                        continue
                    p = json.load(open(plan))
                    t0 = time.perf_counter()
                    rep = verify(spec, str(plan), graph_path=str(graph))
                    n_comp = sum(s["op"] == "compute" for s in p["statements"])
                    row.update(status="plan", cost=p["cost"],
                               recomputations=n_comp - len(cap.nodes),
                               simulated_peak=rep.simulated_peak,
                               measured_peak=rep.measured_peak,
                               peak_equal=rep.measured_peak == rep.simulated_peak,
                               grads_bitwise=rep.grads_bitwise,
                               buffers_bitwise_once=rep.buffers_bitwise and rep.buffers_once,
                               eager_bitwise=rep.eager_bitwise,
                               verify_s=f"{time.perf_counter() - t0:.1f}")
                    w.writerow(row)
                    f.flush()
                    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
