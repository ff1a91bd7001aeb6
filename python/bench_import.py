"""Time importing a ~100M-parameter transformer (not a test).

Builds a 12-layer, width-768 transformer language model (vocab 8192, sequence
512, batch 8: about 98M parameters), captures its joint graph and writes the
graph file with roofline costs, and appends one row to
results/pytorch_import.csv: wall times, node count, the process's peak RSS
(which shows the activations, several GB at this batch, were never allocated),
and the checkpoint-all peak remat computes from the file.

    python python/bench_import.py [--out results/pytorch_import.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "examples"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE.parent / "results" / "pytorch_import.csv"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    args = ap.parse_args()

    t0 = time.perf_counter()
    import torch
    import torch.nn.functional as F
    from models import TinyTransformer, lm_loss

    from remat_torch.capture import capture
    from remat_torch.executor import graph_name
    from remat_torch.graphfile import export

    t_import = time.perf_counter() - t0
    torch.manual_seed(0)
    t1 = time.perf_counter()
    model = TinyTransformer(vocab=8192, dim=768, heads=12, depth=12, seq=args.seq, dropout=0.1)
    params = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, 8192, (args.batch, args.seq))
    targets = torch.randint(0, 8192, (args.batch, args.seq))
    t_build = time.perf_counter() - t1
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t2 = time.perf_counter()
    cap = capture(model, (tokens, targets), lm_loss)
    t_capture = time.perf_counter() - t2
    t3 = time.perf_counter()
    name = graph_name("transformer100m", args.batch, cap.fingerprint)
    text = export(cap, (tokens, targets), name, args.batch, cost="roofline")
    graph = Path(tempfile.mkdtemp()) / "transformer100m.yaml"
    graph.write_text(text)
    t_export = time.perf_counter() - t3
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del F

    peak = ""
    try:
        from remat_torch.binary import find_remat

        out = subprocess.run([find_remat(), "inspect", str(graph)], capture_output=True,
                             text=True, check=True).stdout
        line = next(x for x in out.splitlines() if x.startswith("checkpoint-all"))
        peak = line.split("(")[1].split()[0]
    except Exception as e:  # noqa: BLE001 - the figure is optional
        print(f"(no checkpoint-all peak: {e})")

    row = {
        "model": "transformer 12x768, vocab 8192",
        "params": params,
        "batch": args.batch,
        "seq": args.seq,
        "nodes": len(cap.nodes),
        "build_model_s": f"{t_build:.2f}",
        "capture_s": f"{t_capture:.2f}",
        "export_s": f"{t_export:.2f}",
        "import_s": f"{t_capture + t_export:.2f}",
        "torch_import_s": f"{t_import:.2f}",
        "rss_before_capture_mb": f"{rss_before:.0f}",
        "peak_rss_mb": f"{rss:.0f}",
        "checkpoint_all_peak_bytes": peak,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    new = not out_path.exists()
    with open(out_path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
    for k, v in row.items():
        print(f"{k:28} {v}")
    os.remove(graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
