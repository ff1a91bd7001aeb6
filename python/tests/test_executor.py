"""The executor's semantics on hand-made plans, each with a negative control so the
test can fail: RNG replay on recomputed dropout, BatchNorm statistics updated once,
the peak measured from live storages, training with a plan."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from conftest import example, export_graph, inspect_bounds

import remat_torch
from remat_torch import binary
from remat_torch.capture import capture
from remat_torch.executor import Executor, no_remat_statements
from remat_torch.factory import call_factory
from remat_torch.verify import EAGER_ATOL, EAGER_RTOL, verify


def recompute(statements, names, cap):
    """Compute each node in ``names`` a second time right after its first computation,
    into a new register that replaces the first one for all later readers. A group
    member is recomputed with its whole group, after the group's last member (a plan
    computes a group's members together)."""
    out, rename = [], {}
    nxt = max(s["register"] for s in statements) + 1
    done = set()
    regs = {}  # node -> its register at its first computation
    for s in statements:
        s = dict(s)
        if "register" in s and s["op"] == "deallocate":
            s["register"] = rename.get(s["register"], s["register"])
        if s["op"] == "compute":
            s["args"] = [rename.get(a, a) for a in s["args"]]
        out.append(s)
        if s["op"] != "compute" or s["node"] in done:
            continue
        regs[s["node"]] = s["register"]
        g = cap.by_name[s["node"]]
        ms = cap.kernel_members(g)
        if g.member != len(ms) - 1 or not any(m.name in names for m in ms):
            continue
        for m in ms:
            out.append({"op": "allocate", "register": nxt, "node": m.name, "bytes": m.memory})
            out.append({"op": "compute", "node": m.name, "register": nxt, "args": s["args"]})
            rename[regs[m.name]] = nxt
            done.add(m.name)
            nxt += 1
        for m in ms:
            out.append({"op": "deallocate", "register": regs[m.name]})
    return out


def setup(name, batch=4):
    model, data, loss_fn = call_factory(example(name), batch)
    cap = capture(model, data, loss_fn)
    return model, data, loss_fn, cap


def run(model, data, loss_fn, statements, seed=0, replay=True):
    cap = capture(model, data, loss_fn)
    ex = Executor(model, loss_fn, data, {"model": f"t-{cap.fingerprint[:12]}",
                                         "statements": statements}, cap=cap)
    if not replay:
        ex.replay_rng = set()
    torch.manual_seed(seed)
    loss = ex(*data, measure=True)
    return loss, ex


def grads(model):
    return {k: p.grad.clone() for k, p in model.named_parameters()}


def test_recomputed_dropout_replays_its_rng():
    model, data, loss_fn, cap = setup("transformer")
    base = no_remat_statements(cap)
    drops = {g.name for g in cap.nodes if g.random}
    assert drops
    m0, m1, m2 = model, copy.deepcopy(model), copy.deepcopy(model)
    run(m0, data, loss_fn, base)
    _, ex = run(m1, data, loss_fn, recompute(base, drops, cap))
    assert all(ex.computations[d] == 2 for d in drops)
    g0, g1 = grads(m0), grads(m1)
    assert all(torch.equal(g0[k], g1[k]) for k in g0)
    # negative control: without the replay the recomputed masks differ, and so do gradients
    run(m2, data, loss_fn, recompute(base, drops, cap), replay=False)
    g2 = grads(m2)
    assert not all(torch.equal(g0[k], g2[k]) for k in g0)


def test_batchnorm_statistics_updated_once_under_recomputation():
    model, data, loss_fn, cap = setup("cnn")
    base = no_remat_statements(cap)
    bn = {g.name for g in cap.nodes if g.fx_node in [cap.mutations[k] for k in cap.mutations]
          or "batch_norm" in g.op or g.op == "aten.add.Tensor"}
    m0, m1 = model, copy.deepcopy(model)
    run(m0, data, loss_fn, base)
    _, ex = run(m1, data, loss_fn, recompute(base, bn, cap))
    assert sum(ex.computations.values()) > len(cap.nodes)
    b0, b1 = dict(m0.named_buffers()), dict(m1.named_buffers())
    for k in b0:
        assert torch.equal(b0[k], b1[k]), k
    assert b1["bn1.num_batches_tracked"].item() == 1
    fresh, _, _ = call_factory(example("cnn"), 4)
    assert not torch.equal(b1["bn1.running_mean"], dict(fresh.named_buffers())["bn1.running_mean"])
    g0, g1 = grads(m0), grads(m1)
    assert all(torch.equal(g0[k], g1[k]) for k in g0)


def test_measured_peak_equals_simulated_on_hand_made_plans(remat_bin, workdir):
    graph = export_graph(workdir, "mlp", 4)
    name = next(line for line in open(graph) if line.startswith("name:")).split('"')[1]
    model, data, loss_fn, cap = setup("mlp")
    base = no_remat_statements(cap)
    # recomputing the largest node right after itself holds two copies at once
    largest = max(cap.nodes, key=lambda g: g.memory)
    peaks = []
    for i, statements in enumerate([base, recompute(base, {largest.name}, cap)]):
        _, ex = run(copy.deepcopy(model), data, loss_fn, statements)
        plan = workdir / f"hand-made-{i}.json"
        plan.write_text(json.dumps({"model": name, "strategy": "hand-made",
                                    "fixed_memory": 0, "cost": 0, "peak_memory": 0,
                                    "statements": statements}))
        assert ex.last_peak == binary.simulate_peak(graph, str(plan))
        peaks.append(ex.last_peak)
    assert peaks[1] == peaks[0] + sum(m.memory for m in cap.kernel_members(largest))


def test_verify_reports_a_wrong_peak(remat_bin, workdir):
    graph = export_graph(workdir, "mlp", 4)
    lo, hi = inspect_bounds(remat_bin, graph)
    plan = workdir / "mlp-wrong-peak.json"
    binary.solve(graph, str(hi), str(plan), strategy="checkpoint-all")
    data = json.load(open(plan))
    data["peak_memory"] += 4
    plan.write_text(json.dumps(data))
    rep = verify(example("mlp"), str(plan))
    assert rep.grads_bitwise and not rep.ok
    assert rep.measured_peak == hi and rep.simulated_peak == hi + 4


def test_train_three_steps_same_losses_as_eager(remat_bin, workdir):
    graph = export_graph(workdir, "transformer", 4)
    lo, hi = inspect_bounds(remat_bin, graph)
    plan = workdir / "transformer-train.json"
    binary.solve(graph, str(lo + (hi - lo) // 5), str(plan), strategy="remat-fast",
                 time_limit=3)
    model, data, loss_fn = call_factory(example("transformer"), 4)
    eager = copy.deepcopy(model)
    ref = copy.deepcopy(model)
    ref_cap = capture(ref, data, loss_fn)
    ref_ex = Executor(ref, loss_fn, data, {"model": f"r-{ref_cap.fingerprint[:12]}",
                                          "statements": no_remat_statements(ref_cap)},
                      cap=ref_cap)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager, ref)]
    losses = {"plan": [], "eager": [], "ref": []}
    for step in range(3):
        torch.manual_seed(step)
        losses["plan"].append(remat_torch.train_step(model, str(plan), data, loss_fn).item())
        torch.manual_seed(step)
        eager.zero_grad()
        le = loss_fn(eager(data[0]), *data[1:])
        le.backward()
        losses["eager"].append(le.item())
        torch.manual_seed(step)
        losses["ref"].append(ref_ex(*data).item())
        for o in opts:
            o.step()
    # the plan's losses are the no-remat joint graph's, bitwise; eager within tolerance
    assert losses["plan"] == losses["ref"]
    assert losses["plan"] == pytest.approx(losses["eager"], rel=EAGER_RTOL, abs=EAGER_ATOL)
    assert len(set(losses["plan"])) == 3  # the model does train


def test_a_batch_with_other_strides_is_named():
    """Before: a channels-last batch of the captured shape and dtype passed the batch
    check, and failed in the graph's 'view' node, blamed on 'a fake kernel that lays its
    output out otherwise than the real one'. Strides of size-1 dimensions do not count."""
    import torch.nn as nn
    import torch.nn.functional as F

    from remat_torch.errors import RematInputError

    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(48, 5)

        def forward(self, x):
            return self.fc(x.reshape(x.shape[0], -1))

    torch.manual_seed(0)
    model = Flat()
    eager = copy.deepcopy(model)
    x, y = torch.randn(4, 3, 4, 4), torch.randint(0, 5, (4,))
    cap = capture(model, (x, y), F.cross_entropy)
    plan = {"model": f"x-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap),
            "_path": "p.json"}
    ex = Executor(model, F.cross_entropy, (x, y), plan, cap=cap)
    cl = torch.randn(4, 4, 4, 3).permute(0, 3, 1, 2)  # same shape, channels-last
    with pytest.raises(RematInputError) as e:
        ex(cl, y)
    assert str(e.value) == (
        "p.json: batch[0]'s strides (48, 1, 12, 3) differ from the captured ones "
        "(48, 16, 4, 1) (same shape [4, 3, 4, 4]): the joint graph was traced for the "
        "captured memory layout; pass the batch laid out as at capture (.contiguous() for "
        "a contiguous one), or capture again")
    assert all(p.grad is None for p in model.parameters())  # refused before running
    # laid out as captured, it runs and trains as eager does on the channels-last batch
    loss = ex(cl.contiguous(), y)
    ref = F.cross_entropy(eager(cl), y)
    ref.backward()
    assert loss.item() == ref.item()
    for p, q in zip(model.parameters(), eager.parameters()):
        assert torch.equal(p.grad, q.grad)
    # other strides on a size-1 dimension only: the same layout, accepted
    x1 = torch.randn(4, 1, 48)
    cap1 = capture(model, (x1, y), F.cross_entropy)
    plan1 = {"model": f"x-{cap1.fingerprint[:12]}", "statements": no_remat_statements(cap1)}
    ex1 = Executor(model, F.cross_entropy, (x1, y), plan1, cap=cap1)
    odd = torch.randn(1, 4, 48).transpose(0, 1)  # strides (48, 192, 1), not (48, 48, 1)
    assert odd.stride() != x1.stride()
    model.zero_grad(set_to_none=True)
    eager.zero_grad(set_to_none=True)
    assert ex1(odd, y).item() == F.cross_entropy(eager(odd), y).item()
