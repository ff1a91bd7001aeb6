"""``verify`` and ``train``: run a plan in PyTorch and hold it to the reference runs.

``verify`` runs one step three ways from the same parameters and RNG seed:

* the plan, with the executor (measuring live storages);
* the no-remat run of the same joint graph (every node once, freed after its
  last reader), the reference for bitwise gradients and buffers;
* eager PyTorch (``loss.backward()``), what the plan must train like.

It checks that gradients and buffers equal the no-remat run's (``torch.equal``
on CPU, ``assert_close`` on GPU), that BatchNorm's ``num_batches_tracked``
advanced by exactly one per call of the module (as in eager), that the
gradients, the loss and the buffers equal eager's within ``EAGER_RTOL`` and
``EAGER_ATOL`` (the joint graph may decompose or reorder what eager runs: an
RNN traced per step differs by up to about 1e-7 relative; what the joint graph
leaves out, such as a gradient hook it never saw, differs by far more), and
that the measured peak equals the plan's simulated ``peak_memory`` to the byte.

``train`` runs N SGD steps with the plan and N eager steps from a copy of the
same model, and compares the losses.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

from .capture import capture, capture_factory, fixed_memory_bytes
from .errors import RematInputError
from .executor import Executor, load_plan
from .factory import call_factory
from .graphfile import check_graph, read_graph

# eager PyTorch vs the captured joint graph: same kernels, but AOTAutograd may
# decompose or reorder; we accept this tolerance (observed: bitwise on CPU)
EAGER_RTOL = 1e-5
EAGER_ATOL = 1e-6


@dataclass
class Report:
    ok: bool
    lines: List[str] = field(default_factory=list)
    measured_peak: int = 0
    simulated_peak: int = 0
    grads_bitwise: bool = False
    buffers_bitwise: bool = False
    buffers_once: bool = False
    eager_bitwise: bool = False
    eager_close: bool = False
    losses: Dict[str, float] = field(default_factory=dict)


def batch_from(plan: Dict, graph: Optional[Dict], batch: Optional[int]) -> int:
    """The batch size to call the factory with. Below 1 it is refused here: the factory
    made of it a tensor with a negative dimension, or divided by it, and the error
    blamed the model."""
    if batch is not None:
        if batch < 1:
            raise RematInputError(f"--batch must be at least 1 (got {batch})")
        return batch
    if graph is not None and "batch_size" in graph:
        try:
            n = int(graph["batch_size"])
        except (TypeError, ValueError) as e:
            raise RematInputError(f"the graph file's batch_size is not a number "
                                  f"({graph['batch_size']!r}): pass --batch") from e
        if n < 1:
            raise RematInputError(f"the graph file's batch_size must be at least 1 (got {n}): "
                                  "pass --batch")
        return n
    m = re.search(r"-b(\d+)-[0-9a-f]{12}$", str(plan.get("model", "")))
    if m and int(m.group(1)) >= 1:
        return int(m.group(1))
    raise RematInputError(f"{plan.get('_path', 'plan')}: cannot tell the batch size: pass --batch")


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``torch.equal``, with NaN equal to NaN in the same places: a model that has
    diverged gives NaN gradients in eager too, and ``torch.equal`` blamed the plan for
    them (verify said FAILED for bitwise-identical NaN gradients)."""
    if torch.equal(a, b):
        return True
    if a.shape != b.shape or a.dtype != b.dtype or not (a.is_floating_point() or a.is_complex()):
        return False
    na, nb = torch.isnan(a), torch.isnan(b)
    return bool(torch.equal(na, nb) and torch.equal(a[~na], b[~nb]))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device.type == "cpu":
        return _equal(a, b)
    try:
        torch.testing.assert_close(a, b, equal_nan=True)
        return True
    except AssertionError:
        return False


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Within the eager tolerance (equal, for integer and bool tensors)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    return torch.allclose(a, b, rtol=EAGER_RTOL, atol=EAGER_ATOL, equal_nan=True)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    return (a.double() - b.double()).abs().max().item()


# what torch.manual_seed accepts (a negative seed is taken modulo 2**64)
SEED_MIN, SEED_MAX = -(2 ** 63), 2 ** 64 - 1


def check_seed(seed: object, steps: int = 1) -> None:
    """Refuse a seed torch.manual_seed would not take (a ValueError traceback, 'Overflow
    when unpacking long long', after the capture); ``train`` seeds step i with seed + i."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise RematInputError(f"the seed must be a whole number (got {seed!r})")
    last = seed + max(steps, 1) - 1
    if seed < SEED_MIN or last > SEED_MAX:
        raise RematInputError(
            f"--seed {seed} is out of range: torch.manual_seed takes {SEED_MIN} to {SEED_MAX}"
            + (f" (train seeds step i with seed + i: the last step's is {last})"
               if SEED_MIN <= seed <= SEED_MAX else ""))


def _plan_bytes(plan: Dict, key: str, path: str) -> Optional[int]:
    """The plan's ``peak_memory`` or ``fixed_memory``: a whole number of bytes, or None
    when the plan has none. Refused in one line otherwise (``"big"`` and NaN were a
    ValueError traceback from ``int()`` after the whole run, 1.5 was taken as 1)."""
    v = plan.get(key)
    if v is None:
        return None
    ok = (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and v.is_integer())
    if not ok or v < 0:
        raise RematInputError(f"{path}: '{key}' must be a whole number of bytes "
                              f"(got {json.dumps(v)})")
    return int(v)


def _optimizer_bytes(graph: Dict, path: str) -> int:
    """The graph file's ``meta.optimizer_bytes`` (export writes it as a string): a whole
    number of bytes, 0 when absent. An edited value was an ``int()`` traceback."""
    meta = graph.get("meta") or {}
    v = meta.get("optimizer_bytes", 0) if isinstance(meta, dict) else None
    text = str(v).strip() if isinstance(v, (int, str)) and not isinstance(v, bool) else ""
    if not text.isascii() or not text.isdigit():
        raise RematInputError(f"{path}: 'meta.optimizer_bytes' must be a whole number of "
                              f"bytes (got {json.dumps(v)})")
    return int(text)


def _setup(spec: str, plan_path: str, graph_path: Optional[str], batch: Optional[int],
           figures: bool = False):
    plan = load_plan(plan_path)
    if figures:  # before anything runs
        for key in ("peak_memory", "fixed_memory"):
            _plan_bytes(plan, key, plan_path)
    graph = read_graph(graph_path) if graph_path else None
    if figures and graph is not None:
        _optimizer_bytes(graph, graph_path)
    n = batch_from(plan, graph, batch)
    model, data, loss_fn = call_factory(spec, n)
    if torch.cuda.is_available():
        model = model.cuda()
        data = tuple(t.cuda() for t in data)
    cap = capture_factory(spec, model, data, loss_fn)
    if graph is not None:
        check_graph(graph_path, graph, cap)
        if plan.get("model") != graph.get("name"):
            raise RematInputError(f"{plan_path}: the plan is for model '{plan.get('model')}', "
                                  f"the graph file {graph_path} is '{graph.get('name')}'")
        _check_fixed_memory(graph_path, graph, cap, data)
    return plan, graph, model, data, loss_fn, cap


def _check_fixed_memory(path: str, graph: Dict, cap, data) -> None:
    """Refuse a graph file whose ``fixed_memory`` is not what the capture makes resident
    (plus the optimizer state it declares). The fingerprint does not cover it, and
    ``remat simulate`` counts it in the peak: an edited value was the plan's fault,
    'peak memory DIFFER ... verdict FAILED', where an edited node size is refused."""
    opt = _optimizer_bytes(graph, path)
    real = fixed_memory_bytes(cap, data) + opt
    # Left out, it is 0 (the graph format's default).
    v = graph.get("fixed_memory", 0)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v != real:
        got = json.dumps(v)
        raise RematInputError(
            f"{path}: 'fixed_memory' is {got}, but this model's joint graph keeps {real} bytes "
            f"resident (parameters, gradients, buffers, batch, constants"
            + (f", and the {opt} bytes of optimizer state the file declares" if opt else "")
            + "): not what export wrote for this model (edited by hand?); re-export it")


def _named(model: torch.nn.Module, loss_fn, buffers: bool = False) -> Dict[str, torch.Tensor]:
    """The tensors of a step by the capture's names: the model's own, then a loss
    module's as ``loss_fn.*`` (a weighted CrossEntropyLoss, a learnable loss weighting)."""
    def of(m):
        return (m.named_buffers(remove_duplicate=False) if buffers
                else m.named_parameters(remove_duplicate=False))
    out = dict(of(model))
    if isinstance(loss_fn, torch.nn.Module):
        out.update(("loss_fn." + k, t) for k, t in of(loss_fn))
    return out


def _twin(spec: str, n: int, model: torch.nn.Module, loss_fn=None):
    """Another (model, loss_fn) from the factory, with ``model``'s parameter and buffer
    values: for the reference runs. Not a deepcopy: a loss_fn that closes over the
    model (a weight-decay term, ``sum(p.pow(2).sum() for p in model.parameters())``)
    would still read the first model's parameters, which are then not the copy's
    (they became constants of the copy's graph: another fingerprint)."""
    twin, _, twin_loss = call_factory(spec, n)
    mine = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    if twin is model or any(id(t) in mine for t in (*twin.parameters(), *twin.buffers())):
        # the factory returns the same model object (a module-level model, built when
        # the file was executed): a run on it would write the first run's p.grad
        return copy.deepcopy(model), twin_loss
    dev = next((t.device for t in model.parameters()), None)
    if dev is not None and dev.type != "cpu":
        twin = twin.to(dev)
    src = _named(model, loss_fn)
    src.update(_named(model, loss_fn, buffers=True))
    dst = _named(twin, twin_loss)
    dst.update(_named(twin, twin_loss, buffers=True))
    if list(src) != list(dst) or any(src[k].shape != dst[k].shape for k in src):
        bad = next((k for k in src if k not in dst or src[k].shape != dst[k].shape),
                   next(iter(dst.keys() - src.keys()), "?"))
        raise RematInputError(f"{spec.rpartition(':')[0]}: the factory is not deterministic: "
                              f"two calls give models whose '{bad}' differ")
    with torch.no_grad():
        for k, t in src.items():
            dst[k].copy_(t)
    twin.train(model.training)
    return twin, twin_loss


def has_transfers(plan: Dict) -> bool:
    return any(st.get("op") in ("copy_out", "copy_in") for st in plan.get("statements", []))


def verify(spec: str, plan_path: str, graph_path: Optional[str] = None,
           batch: Optional[int] = None, seed: int = 0,
           device_file: Optional[str] = None) -> Report:
    check_seed(seed)
    plan, graph, model, data, loss_fn, cap = _setup(spec, plan_path, graph_path, batch,
                                                    figures=True)
    n = batch_from(plan, graph, batch)
    ref_model, ref_loss_fn = _twin(spec, n, model, loss_fn)
    eager_model, eager_loss_fn = _twin(spec, n, model, loss_fn)
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    ref = Executor(ref_model, ref_loss_fn, data, plan,
                   cap=capture(ref_model, data, ref_loss_fn))
    nbt0 = {k: b.clone() for k, b in model.named_buffers() if k.endswith("num_batches_tracked")}

    torch.manual_seed(seed)
    loss_plan = ex(*data, measure=True)
    torch.manual_seed(seed)
    loss_ref = ref.run_no_remat(*data, measure=True)
    torch.manual_seed(seed)
    eager_model.zero_grad(set_to_none=True)
    loss_eager = eager_loss_fn(eager_model(data[0]), *data[1:])
    loss_eager.backward()

    rep = Report(ok=True)
    # every name of a tied parameter (cap.grads has them all; they share one p.grad)
    params = _named(model, loss_fn)
    refp = _named(ref_model, ref_loss_fn)
    eagp = _named(eager_model, eager_loss_fn)
    g_bad = [k for k in cap.grads if not _same(params[k].grad, refp[k].grad)]
    e_bad = [k for k in cap.grads if eagp[k].grad is None
             or not _equal(params[k].grad, eagp[k].grad)]
    e_diff = max([_max_diff(params[k].grad, eagp[k].grad) for k in cap.grads
                  if eagp[k].grad is not None] or [0.0])
    # eager gives a gradient to a parameter the joint graph does not: the plan leaves it out
    trained = {id(p) for p in cap.trained_params().values()}
    e_far = [k for k in eagp if eagp[k].grad is not None and id(params[k]) not in trained]
    e_far += [k for k in cap.grads if eagp[k].grad is None
              or not _close(params[k].grad, eagp[k].grad)]
    bufs, refb, eagb = (dict(m.named_buffers()) for m in (model, ref_model, eager_model))
    b_bad = [k for k in bufs if not _same(bufs[k], refb[k])]
    b_eager = [k for k in bufs if not _equal(bufs[k], eagb[k])]
    b_far = [k for k in bufs if not _close(bufs[k], eagb[k])]
    l_far = not _close(loss_plan.detach().cpu().double(), loss_eager.detach().cpu().double())
    # once per step: +1 per call of the module, as eager (a BatchNorm module the forward
    # calls twice, e.g. one shared by two paths, advances by 2 in eager too)
    calls = {k: eagb[k] - nbt0[k] for k in nbt0}
    once = all(torch.equal(bufs[k], nbt0[k] + calls[k]) for k in nbt0)
    advance = sorted({int(c.item()) for c in calls.values()})
    rep.grads_bitwise = not g_bad
    rep.buffers_bitwise = not b_bad
    rep.buffers_once = once
    rep.eager_bitwise = not e_bad and not b_eager
    rep.eager_close = not e_far and not b_far and not l_far
    opt_bytes = _optimizer_bytes(graph, graph_path) if graph is not None else 0
    if graph is None:
        opt_bytes = (_plan_bytes(plan, "fixed_memory", plan_path) or 0) - (ex.last_fixed or 0)
        opt_bytes = max(opt_bytes, 0)
    rep.measured_peak = (ex.last_peak or 0) + opt_bytes
    peak = _plan_bytes(plan, "peak_memory", plan_path)
    rep.simulated_peak = -1 if peak is None else peak
    if graph_path is not None and has_transfers(plan) and device_file is None:
        rep.lines.append("note             the plan moves tensors to the slow tier: pass "
                         "--device-file (the device it was solved for) to replay it in remat "
                         "simulate too; compared with the plan file's peak")
    elif graph_path is not None:
        # replay the plan in remat's own simulator too: the figure must agree with the file's
        from .binary import simulate_peak

        sim = simulate_peak(graph_path, plan_path, device_file)
        if sim != rep.simulated_peak:
            rep.lines.append(f"note             remat simulate says {sim} bytes, the plan file "
                             f"{rep.simulated_peak}")
            rep.simulated_peak = sim
    rep.losses = {"plan": loss_plan.item(), "no-remat": loss_ref.item(),
                  "eager": loss_eager.item()}
    recomputed = sum(c - 1 for c in ex.computations.values())
    peak_ok = rep.measured_peak == rep.simulated_peak
    sizes_ok = not ex.size_mismatches
    rep.ok = sizes_ok and rep.grads_bitwise and rep.buffers_bitwise and once and peak_ok and (
        _equal(loss_plan.detach().cpu(), loss_ref.detach().cpu())) and rep.eager_close
    cmp = "bitwise" if data[0].device.type == "cpu" else "assert_close"
    L = rep.lines = [] + rep.lines
    L.append(f"model            {plan.get('model')} ({len(cap.nodes)} nodes, "
             f"{len(cap.kernels())} kernels, "
             f"{len(cap.trained_params())} gradients"
             + (f" ({len(cap.grads)} partial: tied parameters)"
                if len(cap.grads) > len(cap.trained_params()) else "")
             + f", {len(cap.mutations)} buffer updates)")
    L.append(f"plan             {plan_path} (strategy {plan.get('strategy')}, "
             f"{recomputed} recomputations)")
    L.append(f"{'':16} {'plan':>18} {'no-remat':>18} {'eager':>18}")
    L.append(f"{'loss':16} {rep.losses['plan']:>18.10g} {rep.losses['no-remat']:>18.10g} "
             f"{rep.losses['eager']:>18.10g}")
    ref_peak = (ref.last_peak or 0) + opt_bytes
    L.append(f"{'peak (measured)':16} {rep.measured_peak:>18} {ref_peak:>18} {'-':>18}")
    L.append(f"{'peak (simulated)':16} {rep.simulated_peak:>18} {'':>18} {'':>18}")
    if ex.last_cuda_peak is not None:
        L.append(f"{'cuda max alloc':16} {ex.last_cuda_peak:>18} {ref.last_cuda_peak:>18}")
    L.append(f"gradients        {_verdict(not g_bad, cmp)} vs no-remat"
             + (f" (differ: {', '.join(g_bad[:3])})" if g_bad else "")
             + f"; vs eager: {'bitwise' if not e_bad else f'max |diff| {e_diff:.3g}'}"
             + (f" (beyond the tolerance: {', '.join(e_far[:3])})" if e_far else ""))
    if not bufs:
        L.append("buffers          none")
    else:
        L.append(f"buffers          {_verdict(not b_bad, cmp)} vs no-remat"
                 + (f" (differ: {', '.join(b_bad[:3])})" if b_bad else "")
                 + (f"; num_batches_tracked +{','.join(map(str, advance))}"
                    + (" (as eager)" if advance != [1] else "")
                    + f": {'yes' if once else 'NO'}" if nbt0 else "")
                 + "; vs eager: " + ("bitwise" if not b_eager else "within the tolerance"
                                     if not b_far else f"DIFFER ({', '.join(b_far[:3])})"))
    L.append(f"peak memory      {'equal' if peak_ok else 'DIFFER'}: measured "
             f"{rep.measured_peak} bytes, simulated {rep.simulated_peak} bytes"
             + ("" if peak_ok else f" ({rep.measured_peak - rep.simulated_peak:+d})"))
    for node, (graph_bytes, real_bytes) in list(ex.size_mismatches.items())[:5]:
        L.append(f"node size        DIFFER: node '{node}' outputs {real_bytes} bytes of storage "
                 f"on this device, the graph says {graph_bytes}")
    if not rep.eager_close:
        what = [w for w, bad in (("gradients", e_far), ("loss", l_far), ("buffers", b_far))
                if bad]
        L.append(f"eager            DIFFER: {', '.join(what)} beyond rtol {EAGER_RTOL:g}, "
                 f"atol {EAGER_ATOL:g}")
    L.append(f"verdict          {'OK' if rep.ok else 'FAILED'}")
    return rep


def _verdict(ok: bool, cmp: str) -> str:
    return f"{cmp} equal" if ok else "DIFFER"


def train(spec: str, plan_path: str, graph_path: Optional[str] = None,
          batch: Optional[int] = None, steps: int = 3, lr: float = 0.01,
          seed: int = 0) -> Report:
    """``steps`` SGD steps with the plan vs eager from the same start; same batch each step."""
    check_seed(seed, steps)
    plan, graph, model, data, loss_fn, cap = _setup(spec, plan_path, graph_path, batch)
    eager_model, eager_loss_fn = _twin(spec, batch_from(plan, graph, batch), model, loss_fn)
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    # a loss module's own parameters (a learnable loss weighting) train too
    def trainable(m, lf):
        return list({id(p): p for p in _named(m, lf).values()}.values())
    opt = torch.optim.SGD(trainable(model, loss_fn), lr=lr)
    opt_e = torch.optim.SGD(trainable(eager_model, eager_loss_fn), lr=lr)
    rep = Report(ok=True)
    rep.lines.append(f"{'step':>4} {'loss (plan)':>18} {'loss (eager)':>18}  same")
    for step in range(steps):
        torch.manual_seed(seed + step)
        lp = ex(*data)
        opt.step()
        torch.manual_seed(seed + step)
        opt_e.zero_grad(set_to_none=True)
        le = eager_loss_fn(eager_model(data[0]), *data[1:])
        le.backward()
        opt_e.step()
        a, b = lp.item(), le.item()
        both_nan = math.isnan(a) and math.isnan(b)
        same = a == b or both_nan
        close = same or abs(a - b) <= EAGER_ATOL + EAGER_RTOL * abs(b)
        rep.ok = rep.ok and close
        rep.losses[f"step{step}"] = a
        rep.losses[f"eager{step}"] = b
        rep.lines.append(f"{step:>4} {a:>18.10g} {b:>18.10g}  "
                         f"{'bitwise' if same else ('close' if close else 'DIFFER')}")
    rep.lines.append(f"verdict {'OK' if rep.ok else 'FAILED'} (tolerance vs eager: "
                     f"rtol {EAGER_RTOL:g}, atol {EAGER_ATOL:g})")
    return rep
