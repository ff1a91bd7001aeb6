"""Per-node compute costs: ``flops``, ``roofline`` (the default) and ``measured``.

* ``flops``: ``torch.utils.flop_counter`` run on the node's fake inputs. It has
  formulas for matmuls, convolutions and attention only; everything else
  (norms, GELU, dropout, adds, softmax, losses) counts 0. Unit ``flop``.
* ``roofline``: ``max(flops / peak_flops, bytes / bandwidth)`` in microseconds,
  where ``bytes`` is what the kernel reads (each distinct input tensor once,
  ``numel * element_size``) plus what it writes (its output storages). The
  figures are those of a named device (``DEVICES``) or given by flags.
* ``measured``: each node run on the current device with real tensors
  (one warm-up, then the median of ``repeats`` timings), in microseconds.

A multi-output kernel split into group members runs once whenever any member is
computed (all members are computed together), so in every mode its whole cost
is on its first member and the other members cost 0: the sum over members is
the kernel's cost, and the solver counts it once per kernel run.
"""

from __future__ import annotations

import statistics
import time
from typing import Dict, List, Tuple

import torch
import torch.fx as fx

from .capture import Capture, GraphNode, _storages, _tensor_leaves

# name -> (peak FLOP/s, memory bandwidth in bytes/s): dense FP32 (non tensor-core) figures
DEVICES: Dict[str, Tuple[float, float]] = {
    "a100": (19.5e12, 1.555e12),  # A100 40GB SXM: FP32 19.5 TFLOP/s, HBM2 1555 GB/s
    "h100": (67.0e12, 3.35e12),  # H100 SXM: FP32 67 TFLOP/s, HBM3 3.35 TB/s
    "v100": (15.7e12, 0.9e12),  # V100 SXM2: FP32 15.7 TFLOP/s, 900 GB/s
    "cpu": (1.0e12, 0.1e12),  # a generic server CPU socket: 1 TFLOP/s, 100 GB/s
}
DEFAULT_DEVICE = "a100"


def _fake_mode(cap: Capture):
    for n in cap.gm.graph.nodes:
        v = n.meta.get("val")
        for t in _tensor_leaves(v):
            fm = getattr(t, "fake_mode", None)
            if fm is not None:
                return fm
    return None


def node_flops(cap: Capture) -> Dict[str, int]:
    """FLOPs of each node from ``torch.utils.flop_counter`` (0 where it has no formula)."""
    from torch.utils.flop_counter import FlopCounterMode

    fm = _fake_mode(cap)
    out: Dict[str, int] = {g.name: 0 for g in cap.nodes}  # members after the first: 0
    for g in cap.kernels():
        n = g.fx_node
        args = fx.node.map_arg(n.args, lambda a: a.meta["val"])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: a.meta["val"])
        counter = FlopCounterMode(display=False)
        if fm is not None:
            with fm, counter:
                n.target(*args, **kwargs)
        else:
            with counter:
                n.target(*args, **kwargs)
        out[g.name] = int(counter.get_total_flops())
    return out


def node_bytes(g: GraphNode) -> int:
    """Bytes a kernel moves: each distinct input tensor read once, plus all its outputs
    (every member's, for a group: this is the kernel's figure, for its first member)."""
    n = g.fx_node
    seen = set()
    read = 0
    for a in n.all_input_nodes:
        for t in _tensor_leaves(a.meta.get("val")):
            if id(t) in seen:
                continue
            seen.add(id(t))
            read += t.numel() * t.element_size()
    return read + sum(_storages(n.meta.get("val")).values())


def roofline(cap: Capture, peak_flops: float, bandwidth: float) -> Dict[str, float]:
    """Microseconds per node: max(FLOPs / peak, bytes / bandwidth); 0 for a group's
    members after the first."""
    flops = node_flops(cap)
    return {g.name: (1e6 * max(flops[g.name] / peak_flops, node_bytes(g) / bandwidth)
                     if g.member == 0 else 0.0) for g in cap.nodes}


def measured(cap: Capture, batch, repeats: int = 5) -> Dict[str, float]:
    """Microseconds per node, each timed on the current device with real tensors."""
    dev = next((p.device for p in cap.params.values()), torch.device("cpu"))
    cuda = dev.type == "cuda"
    env: Dict[fx.Node, torch.Tensor] = {}
    for n, (kind, key) in cap.placeholders.items():
        if kind == "param":
            env[n] = cap.params[key].detach()
        elif kind == "buffer":
            env[n] = cap.buffers[key].detach().clone()
        elif kind == "input":
            env[n] = batch[key]
        elif kind == "constant":
            env[n] = cap.constants[key]
        else:
            env[n] = torch.ones((), dtype=cap.loss.meta["val"].dtype, device=dev)
    values: Dict[fx.Node, object] = {}

    def ev(v: fx.Node):
        if v in env:
            return env[v]
        if v in values:
            return values[v]
        return v.target(*fx.node.map_arg(v.args, ev), **fx.node.map_arg(v.kwargs, ev))

    out: Dict[str, float] = {g.name: 0.0 for g in cap.nodes}  # members after the first: 0
    with torch.no_grad():
        for g in cap.kernels():
            n = g.fx_node
            args = fx.node.map_arg(n.args, ev)
            kwargs = fx.node.map_arg(n.kwargs, ev)
            times: List[float] = []
            for i in range(repeats + 1):
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                res = n.target(*args, **kwargs)
                if cuda:
                    torch.cuda.synchronize()
                if i > 0:
                    times.append(time.perf_counter() - t0)
            values[n] = res
            out[g.name] = 1e6 * statistics.median(times)
    return out
