"""Writing (and reading back) ``graph: training`` files from a capture.

The file follows docs/format.md. Per-node details that the format has no key
for (module path, shapes, dtypes, randomness) go into the top-level ``meta``
map as ``node.<name>`` entries; the solver ignores ``meta``.

The members of a multi-output kernel (see ``capture``) are written
consecutively, in output order, each with ``group: <the kernel's FX name>``;
the kernel's cost is on the first member and the others cost 0. A plain node
has no ``group`` key, as before groups.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional

import torch

from . import __version__
from .capture import Capture, fixed_memory_bytes
from .errors import RematInputError

OPTIMIZER_STATES = {"none": 0, "sgd": 1, "adam": 2}  # state tensors per parameter


def optimizer_bytes(cap: Capture, optimizer: str) -> int:
    """Optimizer state: SGD with momentum keeps one buffer per trained parameter, Adam two
    (a tied parameter is one parameter: its state counts once)."""
    per = OPTIMIZER_STATES[optimizer]
    return per * sum(p.numel() * p.element_size() for p in cap.trained_params().values())


def _q(s: str) -> str:
    return json.dumps(s)


def _num(x: float) -> str:
    if float(x).is_integer():
        return str(int(x))
    return repr(float(x))


def render(cap: Capture, name: str, batch_size: int, costs: Dict[str, float], cost_unit: str,
           fixed_memory: int, meta: Dict[str, str]) -> str:
    lines = [
        f"name: {_q(name)}",
        "graph: training",
        f"batch_size: {batch_size}",
        f"cost_unit: {_q(cost_unit)}",
        f"fixed_memory: {fixed_memory}",
        "meta:",
    ]
    for k in sorted(meta):
        lines.append(f"  {_q(k)}: {_q(meta[k])}")
    lines.append("nodes:")
    for g in cap.nodes:
        deps = ", ".join(_q(d) for d in g.deps)
        parts = [f"name: {_q(g.name)}", f"cost: {_num(costs[g.name])}", f"memory: {g.memory}",
                 f"deps: [{deps}]"]
        if g.backward:
            parts.append("backward: true")
        if g.group is not None:
            parts.append(f"group: {_q(g.group)}")
        parts.append(f"op: {_q(g.op)}")
        lines.append("  - {" + ", ".join(parts) + "}")
    return "\n".join(lines) + "\n"


def node_meta(cap: Capture) -> Dict[str, str]:
    out = {}
    for g in cap.nodes:
        shapes = ";".join("x".join(map(str, s)) or "scalar" for s in g.shapes)
        out[f"node.{g.name}"] = (f"module={g.module or '-'} shape={shapes} "
                                 f"dtype={';'.join(g.dtypes)} random={str(g.random).lower()}"
                                 + (f" outputs={','.join(map(str, g.outputs))}"
                                    if g.group is not None else ""))
    return out


def _positive_finite(x: Any) -> bool:
    try:
        return not isinstance(x, bool) and math.isfinite(float(x)) and float(x) > 0
    except (TypeError, ValueError):
        return False


def export(cap: Capture, batch, name: str, batch_size: int, cost: str = "roofline",
           device: str = "a100", peak_flops: Optional[float] = None,
           bandwidth: Optional[float] = None, optimizer: str = "none",
           factory: str = "") -> str:
    """The graph file's text for a capture."""
    from . import costs as C

    if cost == "flops":
        costs = {k: float(v) for k, v in C.node_flops(cap).items()}
        unit = "flop (torch.utils.flop_counter)"
        dev_desc = "-"
    elif cost == "roofline":
        for what, x, per in (("peak_flops", peak_flops, "FLOP/s"),
                             ("bandwidth", bandwidth, "bytes/s")):
            # a negative bandwidth made every memory-bound node cost 0 (max with a
            # negative figure), NaN made costs NaN, 0 divided by zero
            if x is not None and not _positive_finite(x):
                raise RematInputError(f"{what} must be a positive finite number of {per} "
                                      f"(got {x!r})")
        pf, bw = C.DEVICES[device]
        pf = float(peak_flops) if peak_flops is not None else pf
        bw = float(bandwidth) if bandwidth is not None else bw
        costs = C.roofline(cap, pf, bw)
        inf = next((k for k, v in costs.items() if not math.isfinite(v)), None)
        if inf is not None:  # a figure so small that a node's time overflows
            raise RematInputError(f"roofline figures {pf:g} FLOP/s, {bw:g} bytes/s: node "
                                  f"'{inf}' would cost {costs[inf]} us")
        dev_desc = f"{device}: {pf / 1e12:g} TFLOP/s, {bw / 1e9:g} GB/s"
        unit = f"us (roofline, {dev_desc})"
    elif cost == "measured":
        costs = C.measured(cap, batch)
        dev = next((p.device for p in cap.params.values()), torch.device("cpu"))
        dev_desc = (torch.cuda.get_device_name(dev) if dev.type == "cuda" else
                    f"cpu ({torch.get_num_threads()} threads)")
        unit = f"us (measured on {dev_desc})"
    else:
        raise RematInputError(f"unknown cost model '{cost}' (roofline, flops or measured)")
    opt = optimizer_bytes(cap, optimizer)
    fixed = fixed_memory_bytes(cap, batch) + opt
    meta = {
        "importer": f"remat_torch {__version__}",
        "torch": torch.__version__,
        "fingerprint": cap.fingerprint,
        "capture": cap.api,
        "factory": factory,
        "cost": cost,
        "device": dev_desc,
        "optimizer": optimizer,
        "optimizer_bytes": str(opt),
        "nodes": str(len(cap.nodes)),
        "kernels": str(len(cap.kernels())),
    }
    meta.update(node_meta(cap))
    return render(cap, name, batch_size, costs, unit, fixed, meta)


def read_graph(path: str) -> Dict[str, Any]:
    import yaml

    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError as e:
        raise RematInputError(f"{path}: no such file") from e
    except (OSError, UnicodeDecodeError) as e:  # a directory, no permission, binary data
        raise RematInputError(f"{path}: cannot be read as a graph file "
                              f"({getattr(e, 'strerror', None) or e})") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RematInputError(f"{path}: not a YAML/JSON graph file") from e
    if not isinstance(data, dict) or "nodes" not in data:
        raise RematInputError(f"{path}: not a graph file (no 'nodes')")
    return data


def check_graph(path: str, data: Dict[str, Any], cap: Capture) -> None:
    """Refuse a graph file that was not exported from this model's joint graph."""
    meta = data.get("meta") or {}
    fp = meta.get("fingerprint")
    if fp is None:
        raise RematInputError(f"{path}: no fingerprint in meta: not exported by remat_torch")
    if meta.get("torch") != torch.__version__:
        raise RematInputError(f"{path}: exported with torch {meta.get('torch')}, "
                              f"this is torch {torch.__version__}: re-export")
    if fp != cap.fingerprint:
        raise RematInputError(f"{path}: fingerprint {fp[:12]} does not match this model's "
                              f"joint graph ({cap.fingerprint[:12]}): a different model or batch")
