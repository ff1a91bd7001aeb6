"""Multi-output kernels as groups: each output storage its own node, freed on its own,
the kernel run once per computation of the group (issue #17)."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import example, inspect_bounds, run_main
from torch.utils._python_dispatch import TorchDispatchMode

from remat_torch import binary
from remat_torch.capture import capture
from remat_torch.errors import RematInputError
from remat_torch.executor import Executor, graph_name, no_remat_statements
from remat_torch.factory import call_factory
from remat_torch.graphfile import export
from remat_torch.verify import verify


def write_graph(workdir, name, batch, groups):
    """The example's graph file, with groups or (``groups=False``) one node per kernel."""
    model, data, loss_fn = call_factory(example(name), batch)
    cap = capture(model, data, loss_fn, groups=groups)
    path = workdir / f"groups-{name}-b{batch}-{'groups' if groups else 'merged'}.yaml"
    path.write_text(export(cap, data, graph_name(name, batch, cap.fingerprint), batch,
                           factory=example(name)))
    return str(path), cap


class KernelCalls(TorchDispatchMode):
    """Counts the aten calls made under it, per overload."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func)] = self.calls.get(str(func), 0) + 1
        return func(*args, **(kwargs or {}))


def test_a_group_runs_its_kernel_once():
    """Three layer-norm members, one layer-norm call: the following members take their
    outputs from the first member's run."""
    model, data, loss_fn = call_factory(example("transformer"), 4)
    cap = capture(model, data, loss_fn)
    plan = {"model": f"x-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    counter = KernelCalls()
    with counter:
        ex(*data)
    for op in ("aten.native_layer_norm.default", "aten.native_dropout.default",
               "aten.native_layer_norm_backward.default", "aten.nll_loss_forward.default"):
        kernels = [g for g in cap.kernels() if g.op == op]
        members = [g for g in cap.nodes if g.op == op]
        assert len(members) > len(kernels) > 0, op
        assert counter.calls[op] == len(kernels), op
        assert all(ex.computations[g.name] == 1 for g in members)


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_groups_lower_the_checkpoint_all_peak(name, remat_bin, workdir):
    """With each output freed on its own, the no-remat (checkpoint-all) peak is strictly
    lower than with one node per kernel, and the executor measures it to the byte."""
    merged, _ = write_graph(workdir, name, 4, groups=False)
    grouped, cap = write_graph(workdir, name, 4, groups=True)
    _, peak_merged = inspect_bounds(remat_bin, merged)
    _, peak_grouped = inspect_bounds(remat_bin, grouped)
    assert peak_grouped < peak_merged
    plans = {}
    for which, graph in (("merged", merged), ("groups", grouped)):
        path = workdir / f"groups-{name}-{which}-checkpoint-all.json"
        data = binary.solve(graph, str(peak_merged), str(path), strategy="checkpoint-all")
        plans[which] = data
        rep = verify(example(name), str(path), graph_path=graph) if which == "groups" else None
        if rep is not None:
            text = "\n".join(rep.lines)
            assert rep.ok and rep.grads_bitwise, text
            assert rep.measured_peak == rep.simulated_peak == peak_grouped, text
    assert plans["merged"]["peak_memory"] == peak_merged
    # the merged graph's plan measured by the executor on a merged capture: the old figure
    model, data, loss_fn = call_factory(example(name), 4)
    old = capture(model, data, loss_fn, groups=False)
    ex = Executor(model, loss_fn, data, plans["merged"], cap=old)
    ex(*data, measure=True)
    assert ex.last_peak == peak_merged


def test_groups_in_checkpoint_all_plan_are_consecutive(remat_bin, workdir):
    """remat's plans compute a group's members back to back (allocate, compute pairs)."""
    graph, cap = write_graph(workdir, "transformer", 4, groups=True)
    _, hi = inspect_bounds(remat_bin, graph)
    plan = binary.solve(graph, str(hi), str(workdir / "groups-consecutive.json"),
                        strategy="checkpoint-all")
    sts = plan["statements"]
    for i, st in enumerate(sts):
        if st["op"] != "compute":
            continue
        g = cap.by_name[st["node"]]
        ms = cap.kernel_members(g)
        if g.member + 1 < len(ms):
            assert sts[i + 1] == {**sts[i + 1], "op": "allocate", "node": ms[g.member + 1].name}
            assert sts[i + 2]["op"] == "compute" and sts[i + 2]["node"] == ms[g.member + 1].name


def _partial_plans(cap):
    """Hand-edited versions of the no-remat plan that break a group: (label, statements,
    the node the refusal must name)."""
    base = no_remat_statements(cap)
    ln = cap.kernel_members(cap.by_name["native_layer_norm"])
    out = []
    # only the first member of the first layer norm (the others never computed)
    drop = {m.name for m in ln[1:]}
    regs = {s["register"] for s in base if s.get("node") in drop}
    only = [s for s in base if s.get("node") not in drop and not (
        s["op"] == "deallocate" and s["register"] in regs)]
    out.append(("only-first", only, ln[1].name))
    # members out of order: rstd's pair before mean's
    swapped = list(base)
    i = next(k for k, s in enumerate(swapped) if s.get("node") == ln[1].name)
    swapped[i:i + 2], swapped[i + 2:i + 4] = swapped[i + 2:i + 4], swapped[i:i + 2]
    out.append(("swapped", swapped, ln[1].name))
    # a deallocation between two members
    gap = list(base)
    i = next(k for k, s in enumerate(gap) if s.get("op") == "compute" and s["node"] == ln[0].name)
    gap.insert(i + 1, {"op": "deallocate", "register": base[0]["register"]})
    out.append(("dealloc-between", gap, ln[1].name))
    # a recomputation of one member alone, after the whole group
    again = list(base)
    i = next(k for k, s in enumerate(again) if s.get("op") == "compute" and s["node"] == ln[2].name)
    r = max(s["register"] for s in base) + 1
    again[i + 1:i + 1] = [
        {"op": "allocate", "register": r, "node": ln[2].name, "bytes": ln[2].memory},
        {"op": "compute", "node": ln[2].name, "register": r, "args": again[i]["args"]},
        {"op": "deallocate", "register": r}]
    out.append(("member-alone", again, ln[2].name))
    return out


def test_executor_refuses_a_broken_group():
    model, data, loss_fn = call_factory(example("transformer"), 4)
    cap = capture(model, data, loss_fn)
    for label, statements, node in _partial_plans(cap):
        plan = {"model": f"x-{cap.fingerprint[:12]}", "statements": statements,
                "_path": f"{label}.json"}
        with pytest.raises(RematInputError) as e:
            Executor(copy.deepcopy(model), loss_fn, data, plan, cap=cap)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{label}.json: node '{node}'"), (label, msg)
        assert "group 'native_layer_norm'" in msg, (label, msg)
    # control: the unedited plan is accepted
    ex = Executor(model, loss_fn, data, {"model": f"x-{cap.fingerprint[:12]}",
                                         "statements": no_remat_statements(cap)}, cap=cap)
    # statements handed to run() directly are not checked up front, but a member computed
    # without its group's kernel having just run is still refused, not given stale outputs
    alone = dict((label, sts) for label, sts, _ in _partial_plans(cap))["member-alone"]
    with pytest.raises(RematInputError, match="node 'native_layer_norm.2': computed without"):
        ex.run(alone, data)


def test_verify_refuses_a_plan_computing_one_member(remat_bin, workdir):
    """A remat plan hand-edited to compute layer norm's output but not its mean and rstd:
    one line naming the plan file and the node, exit code 2."""
    graph, cap = write_graph(workdir, "transformer", 4, groups=True)
    _, hi = inspect_bounds(remat_bin, graph)
    good = workdir / "groups-good.json"
    plan = binary.solve(graph, str(hi), str(good), strategy="checkpoint-all")
    ln = cap.kernel_members(cap.by_name["native_layer_norm_1"])
    drop = {m.name for m in ln[1:]}
    regs = {s["register"] for s in plan["statements"] if s.get("node") in drop}
    plan["statements"] = [s for s in plan["statements"] if s.get("node") not in drop and not (
        s["op"] == "deallocate" and s["register"] in regs)]
    bad = workdir / "groups-one-member.json"
    bad.write_text(json.dumps(plan))
    proc = run_main("verify", example("transformer"), str(bad), "--graph", graph)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(bad) in lines[0] and "node 'native_layer_norm_1.1'" in lines[0], lines[0]
    # control: the plan as remat wrote it verifies
    assert run_main("verify", example("transformer"), str(good), "--graph", graph).returncode == 0


def test_pytorch_partition_plan_frees_each_member_at_its_last_reader(remat_bin, workdir):
    """compare-pytorch's plans: a group's members computed back to back, and each
    member's register freed after its own last reader (no compute in between); PyTorch's
    partition, so planned, measures what remat simulates."""
    from remat_torch import compare as C

    graph, cap = write_graph(workdir, "transformer", 4, groups=True)
    costs = {g.name: 1.0 for g in cap.nodes}
    fw, bw, _ = C.partition(cap, 1.0, costs)
    pp = C.partition_statements(cap, fw, bw)
    sts = pp.statements
    computes = [i for i, s in enumerate(sts) if s["op"] == "compute"]
    node_at = {s["register"]: s["node"] for s in sts if s["op"] == "allocate"}
    frees = {}  # group -> where its members are freed (budget 1.0: each computed once)
    for r, name in node_at.items():
        g = cap.by_name[name]
        ms = cap.kernel_members(g)
        own = next(i for i in computes if sts[i]["register"] == r)
        end = own + 2 * (len(ms) - 1 - g.member)  # the group's last compute
        assert sts[end]["node"] == ms[-1].name
        used = max([end] + [i for i in computes if r in sts[i]["args"]])
        free = next(i for i, s in enumerate(sts) if s["op"] == "deallocate" and s["register"] == r)
        assert free > used and not [i for i in computes if used < i < free], name
        if g.group is not None:
            frees.setdefault(g.group, []).append(free)
    # members of one group freed at different times, kernels computed in between (dropout's
    # output freed long before its mask, say): the point of groups
    apart = [grp for grp, fs in frees.items()
             if any(min(fs) < i < max(fs) for i in computes)]
    assert len(apart) >= len(frees) // 2, (apart, frees)
    path = workdir / "groups-pytorch-1.0.json"
    C.write_plan(str(path), read_name(graph), 0, "pytorch@1", sts)
    cost, peak = C.simulate(graph, str(path))
    C.write_plan(str(path), read_name(graph), 0, "pytorch@1", sts, cost, peak)
    rep = verify(example("transformer"), str(path), graph_path=graph)
    assert rep.ok and rep.measured_peak == rep.simulated_peak == peak, "\n".join(rep.lines)


def read_name(graph):
    from remat_torch.graphfile import read_graph

    return read_graph(graph)["name"]
