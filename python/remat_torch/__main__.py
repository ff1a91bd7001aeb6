"""Command line: ``python -m remat_torch export|verify|train|compare-pytorch|from-onnx``.

Bad input (a missing factory, a plan for another model, an unknown node) is
one line naming the file and the node, with exit code 2 and no traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import List, Optional

from .errors import RematInputError
from .files import write_text


def _export(a) -> int:
    import torch

    from .capture import capture_factory
    from .costs import DEVICES
    from .executor import graph_name
    from .factory import call_factory
    from .graphfile import export

    if a.device not in DEVICES:
        raise RematInputError(f"unknown --device '{a.device}' ({', '.join(DEVICES)})")
    _check_batch_flag(a)
    # 0 was silently the device's figure (a falsy override), -1, nan and inf were taken
    peak_flops = _positive_figure("--peak-tflops", a.peak_tflops, 1e12)
    bandwidth = _positive_figure("--bandwidth-gbs", a.bandwidth_gbs, 1e9)
    model, batch, loss_fn = call_factory(a.factory, a.batch)
    if torch.cuda.is_available() and not a.cpu:
        model = model.cuda()
        batch = tuple(t.cuda() for t in batch)
    t0 = time.perf_counter()
    cap = capture_factory(a.factory, model, batch, loss_fn)
    base = a.factory.rpartition(":")[2]
    name = graph_name(base, a.batch, cap.fingerprint)
    text = export(cap, batch, name, a.batch, cost=a.cost, device=a.device,
                  peak_flops=peak_flops, bandwidth=bandwidth,
                  optimizer=a.optimizer, factory=a.factory)
    try:
        write_text(a.output, text)
    except OSError as e:
        raise RematInputError(f"{a.output}: cannot be written ({e.strerror or e})") from e
    print(f"{a.output}: {name}, {len(cap.nodes)} nodes ({len(cap.kernels())} kernels), "
          f"cost {a.cost}, "
          f"captured and written in {time.perf_counter() - t0:.2f} s")
    return 0


def _positive_figure(flag: str, value: Optional[float], scale: float) -> Optional[float]:
    """A roofline override in the flag's unit, scaled to per second; None if not given."""
    if value is None:
        return None
    if not (math.isfinite(value) and value > 0 and math.isfinite(value * scale)):
        raise RematInputError(f"{flag} must be a positive finite number (got {value:g})")
    return value * scale


def _check_batch_flag(a) -> None:
    """--batch, where given, as export checks it: before the factory is called with it."""
    if a.batch is not None and a.batch < 1:
        raise RematInputError(f"--batch must be at least 1 (got {a.batch})")


def _verify(a) -> int:
    from .verify import verify

    _check_batch_flag(a)
    rep = verify(a.factory, a.plan, graph_path=a.graph, batch=a.batch, seed=a.seed,
                 device_file=a.device_file)
    print("\n".join(rep.lines))
    return 0 if rep.ok else 1


def _train(a) -> int:
    from .verify import train

    _check_batch_flag(a)
    if a.steps < 1:
        raise RematInputError(f"--steps must be at least 1 (got {a.steps})")
    rep = train(a.factory, a.plan, graph_path=a.graph, batch=a.batch, steps=a.steps,
                lr=a.lr, seed=a.seed)
    print("\n".join(rep.lines))
    return 0 if rep.ok else 1


def _compare_pytorch(a) -> int:
    from .compare import run_compare

    return run_compare(a)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remat_torch",
                                description="PyTorch bridge of remat (docs/pytorch.md)")
    sub = p.add_subparsers(dest="cmd", required=True)

    e = sub.add_parser("export", help="write a model's joint training graph for remat")
    e.add_argument("factory", help="MODULE.py:FACTORY; FACTORY(batch) -> (model, batch, loss_fn)")
    e.add_argument("--batch", "-b", type=int, required=True, help="batch size")
    e.add_argument("-o", "--output", required=True, help="graph file to write (YAML)")
    e.add_argument("--cost", choices=["roofline", "flops", "measured"], default="roofline")
    e.add_argument("--device", default="a100",
                   help="roofline device figures: a100 (default), h100, v100, cpu")
    e.add_argument("--peak-tflops", type=float, help="roofline: override the peak TFLOP/s")
    e.add_argument("--bandwidth-gbs", type=float, help="roofline: override the GB/s")
    e.add_argument("--optimizer", choices=["none", "sgd", "adam"], default="none",
                   help="optimizer state to add to fixed_memory (sgd: momentum, adam: 2 moments)")
    e.add_argument("--cpu", action="store_true", help="capture on CPU even if CUDA is present")
    e.set_defaults(fn=_export)

    for name, fn, helptext in [("verify", _verify, "run a plan once and check it"),
                               ("train", _train, "train N steps with a plan vs eager")]:
        v = sub.add_parser(name, help=helptext)
        v.add_argument("factory", help="MODULE.py:FACTORY")
        v.add_argument("plan", help="plan JSON written by 'remat solve ... --plan'")
        v.add_argument("--graph", "-g", help="the exported graph file (its fingerprint is checked)")
        v.add_argument("--batch", "-b", type=int,
                       help="batch size (default: from the graph file or the plan's model name)")
        v.add_argument("--seed", type=int, default=0)
        if name == "verify":
            v.add_argument("--device-file",
                           help="the device file a plan with transfers was solved for "
                                "(devices/*.yaml): its peak is then replayed in 'remat simulate'")
        if name == "train":
            v.add_argument("--steps", type=int, default=3)
            v.add_argument("--lr", type=float, default=0.01)
        v.set_defaults(fn=fn)

    c = sub.add_parser("compare-pytorch", help="PyTorch's memory-budget partitioner vs remat "
                       "on the same joint graph (docs/compare-pytorch.md)")
    c.add_argument("factory", help="MODULE.py:FACTORY")
    c.add_argument("--batch", "-b", type=int, default=8, help="batch size (default 8)")
    c.add_argument("--name", help="model label in file names (default: the factory's name)")
    c.add_argument("--out-dir", "-o", default="results",
                   help="where pytorch_compare_NAME.{csv,png,yaml} go (default results/)")
    c.add_argument("--fractions", default="0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1",
                   help="activation_memory_budget values, comma-separated")
    c.add_argument("--time-limit", type=float, default=60.0,
                   help="remat solve --time-limit per budget, seconds (default 60)")
    c.add_argument("--below", type=int, default=4,
                   help="remat budgets below PyTorch's smallest peak, down to the smallest "
                        "feasible one (default 4; 0: none)")
    c.add_argument("--strategy", default="remat-exact", help="remat strategy (default remat-exact)")
    c.add_argument("--cost", choices=["roofline", "flops", "measured"], default="roofline")
    c.add_argument("--device", default="a100", help="roofline device figures (as for export)")
    c.add_argument("--plans", help="keep every plan (PyTorch's and remat's) in this directory")
    c.add_argument("--no-plot", action="store_true", help="write the CSV only")
    c.add_argument("--verify", action="store_true",
                   help="also run every plan (PyTorch's and remat's) with the executor, as "
                        "'verify' does (column 'verified')")
    c.add_argument("--plot-only", action="store_true",
                   help="redraw the plot and table from a previous run's CSV and graph file")
    c.add_argument("--cpu", action="store_true", help="capture on CPU even if CUDA is present")
    c.set_defaults(fn=_compare_pytorch)

    o = sub.add_parser("from-onnx", help="write a graph: forward file from an ONNX model",
                       add_help=False)
    o.add_argument("rest", nargs=argparse.REMAINDER)
    o.set_defaults(fn=None)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "from-onnx":
        try:
            from .onnx_import import main as onnx_main
        except ImportError as e:
            print(f"error: from-onnx is not available: {e}", file=sys.stderr)
            return 2
        return onnx_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except RematInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file the command was given cannot be read or written
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
