"""Tied (shared) parameters: a parameter held by several modules.

AOTAutograd lifts each name of a tied parameter as its own input and gives each
its own partial gradient; the parameter's gradient is their sum. The capture
binds every name to the one tensor, the executor sums the partials into the
one ``p.grad``, and ``fixed_memory`` counts the parameter, its gradient and
its optimizer state once.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import HERE, assert_fallback_matches, inspect_bounds, run_main

from remat_torch import binary
from remat_torch.capture import capture
from remat_torch.errors import RematInputError
from remat_torch.executor import Executor
from remat_torch.factory import call_factory
from remat_torch.verify import EAGER_ATOL, EAGER_RTOL, verify

MODELS = HERE / "tied_models.py"
EMB = ["emb.weight", "head.weight", "aux.weight"]  # one tensor, three names


def spec(name: str) -> str:
    return f"{MODELS}:{name}"


def _export(workdir: Path, name: str, *extra: str) -> str:
    path = workdir / f"{name}{''.join(extra)}.yaml"
    res = run_main("export", spec(name), "--batch", "4", "-o", str(path), *extra)
    assert res.returncode == 0, res.stderr
    return str(path)


def test_capture_binds_every_name_of_a_tied_parameter():
    model, data, loss_fn = call_factory(spec("tied_net"), 4)
    cap = capture(model, data, loss_fn)
    # a partial gradient per name the embedding is used under, all bound to one tensor
    assert set(EMB) <= set(cap.grads)
    assert all(cap.params[k] is model.emb.weight for k in EMB)
    assert EMB in cap.tied_names()
    trained = cap.trained_params()
    assert len(trained) == len({id(p) for p in model.parameters()})
    assert sum(p is model.emb.weight for p in trained.values()) == 1
    # the reused proj layer: its parameters are shared too, and capturing left them alone
    assert model.blocks[0].weight is model.proj.weight is model.blocks[2].weight
    assert all(type(p) is torch.nn.Parameter and p.is_leaf for p in model.parameters())
    copy.deepcopy(model)


def test_export_counts_a_tied_parameter_once(workdir):
    graph = yaml.safe_load(open(_export(workdir, "tied_net", "--optimizer", "adam")))
    model, data, _ = call_factory(spec("tied_net"), 4)
    params = sum(p.numel() * p.element_size() for p in model.parameters())  # each once
    batch = sum(t.numel() * t.element_size() for t in data)
    # parameters + gradients + 2 Adam moments (each once) + the batch + the loss tangent
    assert graph["fixed_memory"] == 4 * params + batch + 4
    assert int(graph["meta"]["optimizer_bytes"]) == 2 * params


def test_tied_graph_is_not_the_untied_one(workdir):
    tied = yaml.safe_load(open(_export(workdir, "tied_net")))
    untied = yaml.safe_load(open(_export(workdir, "untied_net")))
    # the same kernels, but not the same graph: fewer resident bytes, summed gradients
    assert tied["nodes"] == untied["nodes"]
    assert tied["fixed_memory"] < untied["fixed_memory"]
    assert tied["meta"]["fingerprint"] != untied["meta"]["fingerprint"]


@pytest.fixture(scope="module")
def tied_plan(remat_bin, workdir):
    graph = _export(workdir, "tied_net")
    lo, hi = inspect_bounds(remat_bin, graph)
    budget = lo + (hi - lo) // 4
    plan = workdir / "tied_net-plan.json"
    binary.solve(graph, str(budget), str(plan), strategy="remat-fast", time_limit=20)
    return graph, str(plan), budget, hi


def test_tied_plan_verifies(tied_plan):
    graph, plan, budget, hi = tied_plan
    data = json.load(open(plan))
    assert data["peak_memory"] <= budget < hi
    computes = [s["node"] for s in data["statements"] if s["op"] == "compute"]
    assert len(computes) > len(set(computes))  # it recomputes
    rep = verify(spec("tied_net"), plan, graph_path=graph)
    text = "\n".join(rep.lines)
    assert rep.grads_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == data["peak_memory"], text
    assert rep.losses["plan"] == rep.losses["no-remat"], text
    assert rep.eager_close, text
    assert rep.ok, text


def test_tied_gradient_is_the_sum_of_its_partials(tied_plan):
    """The tied embedding's gradient from the plan, the no-remat run and eager autograd
    agree; each partial gradient alone (what overwriting p.grad would leave) does not."""
    _, plan, _, _ = tied_plan
    model, data, loss_fn = call_factory(spec("tied_net"), 4)
    ref_model, eager = copy.deepcopy(model), copy.deepcopy(model)
    ex = Executor(model, loss_fn, data, plan)
    ref = Executor(ref_model, loss_fn, data, plan)
    torch.manual_seed(0)
    ex(*data)
    torch.manual_seed(0)
    ref.run_no_remat(*data)
    torch.manual_seed(0)
    loss_fn(eager(data[0]), *data[1:]).backward()
    for get in (lambda m: m.emb.weight, lambda m: m.proj.weight, lambda m: m.proj.bias):
        g, g_ref, g_eager = get(model).grad, get(ref_model).grad, get(eager).grad
        assert torch.equal(g, g_ref)
        torch.testing.assert_close(g, g_eager, rtol=EAGER_RTOL, atol=EAGER_ATOL)
    # the partials: the joint graph's own outputs for the three names, run as one function
    cap = ex.cap
    env = {"param": cap.params, "buffer": cap.buffers}
    args = [env[kind][key] if kind in env else data[key] if kind == "input" else torch.ones(())
            for kind, key in cap.placeholders.values()]
    run = torch.fx.Interpreter(cap.gm, garbage_collect_values=False)
    with torch.no_grad():
        torch.manual_seed(0)
        run.run(*args)
    partial = {k: run.env[cap.grads[k]] for k in EMB}
    assert all(p.abs().sum() > 0 for p in partial.values())
    total = sum(partial[k] for k in EMB)
    torch.testing.assert_close(total, eager.emb.weight.grad, rtol=EAGER_RTOL, atol=EAGER_ATOL)
    for k in EMB:
        assert not torch.allclose(partial[k], eager.emb.weight.grad), k


def test_shared_module_with_batchnorm_verifies(remat_bin, workdir):
    """A BatchNorm module applied twice: its statistics advance twice per step, as in
    eager, and the plan's run matches the no-remat run bitwise."""
    graph = _export(workdir, "shared_bn")
    lo, hi = inspect_bounds(remat_bin, graph)
    plan = workdir / "shared_bn-plan.json"
    binary.solve(graph, str(lo + (hi - lo) // 4), str(plan), strategy="remat-fast",
                 time_limit=20)
    rep = verify(spec("shared_bn"), str(plan), graph_path=graph)
    text = "\n".join(rep.lines)
    assert rep.grads_bitwise and rep.buffers_bitwise and rep.buffers_once, text
    assert "num_batches_tracked +2 (as eager): yes" in text, text
    assert rep.measured_peak == rep.simulated_peak, text
    assert rep.ok, text


def test_aot_module_fallback_with_shared_parameters():
    # aot_module cannot trace weights tied by attribute (torch.func.functional_call
    # refuses them): one line that says so
    model, data, loss_fn = call_factory(spec("tied_net"), 4)
    with pytest.raises(RematInputError, match="tied parameters .*emb.weight = head.weight"):
        capture(model, data, loss_fn, api="aot_module")
    # a module reused under two names: the same graph as the descriptor API's
    model, data, loss_fn = call_factory(spec("shared_bn"), 4)
    assert_fallback_matches(model, data, loss_fn)
