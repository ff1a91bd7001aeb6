"""Models with patterns the examples lack, end to end: capture, solve below the
checkpoint-all peak, run the plan; bitwise gradients and the simulator's peak."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import inspect_bounds

from remat_torch import binary
from remat_torch.capture import capture
from remat_torch.executor import Executor, graph_name, no_remat_statements
from remat_torch.factory import call_factory
from remat_torch.graphfile import export
from remat_torch.verify import verify

MODELS = Path(__file__).resolve().parent / "more_models.py"


def spec(name: str) -> str:
    return f"{MODELS}:{name}"


def export_model(workdir: Path, name: str, batch: int) -> str:
    model, data, loss_fn = call_factory(spec(name), batch)
    cap = capture(model, data, loss_fn)
    path = workdir / f"more-{name}-b{batch}.yaml"
    path.write_text(export(cap, data, graph_name(name, batch, cap.fingerprint), batch,
                           factory=spec(name)))
    return str(path)


def solve_and_verify(remat_bin, workdir: Path, name: str, batch: int, fraction: int,
                     strategy: str = "remat-fast"):
    """Solve at ``fraction``% of the way from the smallest budget to the checkpoint-all
    peak, verify the plan, and return (report, plan JSON, peak)."""
    graph = export_model(workdir, name, batch)
    lo, hi = inspect_bounds(remat_bin, graph)
    budget = lo + (hi - lo) * fraction // 100
    plan = workdir / f"more-{name}-{strategy}-{fraction}.json"
    binary.solve(graph, str(budget), str(plan), strategy=strategy, time_limit=20)
    rep = verify(spec(name), str(plan), graph_path=graph)
    return rep, json.loads(plan.read_text()), hi


def test_scatter_into_a_view_is_sized_as_the_real_kernel(remat_bin, workdir):
    """``slice_scatter(view, src)`` really allocates the whole storage under the view
    (ATen's clone_preserve_strides), where its fake kernel allocates the view's extent:
    before, the graph said 288 bytes for a write into half of a 12x12 float mask (real:
    576), verify named the node 'DIFFER' and the measured peak was not the simulated one."""
    model, data, loss_fn = call_factory(spec("shift_mask"), 2)
    cap = capture(model, data, loss_fn)
    scatters = [g for g in cap.nodes if g.op.startswith(("aten.slice_scatter",
                                                          "aten.select_scatter"))]
    assert len(scatters) >= 5
    whole = 12 * 12 * 4
    assert all(g.memory == whole for g in scatters), [(g.name, g.memory) for g in scatters]
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    ex(*data, measure=True)
    assert ex.size_mismatches == {}
    rep, plan, hi = solve_and_verify(remat_bin, workdir, "shift_mask", 2, 30)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"] < hi, text


def test_plain_tensor_attributes_and_globals_are_constants(remat_bin, workdir):
    """A tensor that is neither a parameter nor a buffer (``self.scale = torch...``, a
    global) is a constant of the joint graph: before, the capture failed ('Please convert
    all Tensors to FakeTensors first'). It is resident (fixed memory), not a node."""
    model, data, loss_fn = call_factory(spec("constant_tensors"), 4)
    cap = capture(model, data, loss_fn)
    assert sorted(t.numel() for t in cap.constants.values()) == [8, 16]
    kinds = [kind for kind, _ in cap.placeholders.values()]
    assert kinds.count("constant") >= 2
    from remat_torch.capture import fixed_memory_bytes
    params = sum(p.numel() * 4 for p in model.parameters())
    assert fixed_memory_bytes(cap, data) == 2 * params + 4 * 8 * 4 + 4 * 8 + 4 + (8 + 16) * 4
    rep, plan, hi = solve_and_verify(remat_bin, workdir, "constant_tensors", 4, 0)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"], text


def test_recomputing_a_reader_of_an_updated_buffer_reads_its_old_value(remat_bin, workdir):
    """spectral_norm's weight reads the buffers ``_u``/``_v`` that the same step updates.
    Before, the executor copied the new value into the buffer at its node's first
    computation, so a plan that recomputes a reader later (in the backward) read the
    new value: the gradient of the spectral-normed weight differed from the no-remat
    run's (and eager's by 1e-6)."""
    rep, plan, hi = solve_and_verify(remat_bin, workdir, "spectral_norms", 4, 30)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.buffers_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"], text
    model, data, loss_fn = call_factory(spec("spectral_norms"), 4)
    cap = capture(model, data, loss_fn)
    from remat_torch.executor import _last_buffer_reads
    sts = plan["statements"]
    last = _last_buffer_reads(cap, sts)
    first_sink = min(i for i, st in enumerate(sts) if st["op"] == "compute" and any(
        cap.by_name[st["node"]].fx_node is v for v in cap.mutations.values()))
    assert max(last.values()) > first_sink  # the plan does read a buffer after an update


def test_capture_leaves_hook_assigned_attributes_alone(remat_bin, workdir):
    """The old spectral_norm's pre-hook assigns ``module.weight`` on each call: after the
    capture that was a tracing tensor, and verify's deepcopy of the model failed with a
    RuntimeError traceback ('Only Tensors created explicitly by the user ...')."""
    import copy

    import torch

    model, data, loss_fn = call_factory(spec("hooked_spectral_norm"), 2)
    before = model[0].weight
    capture(model, data, loss_fn)
    assert model[0].weight is before and type(before) is torch.Tensor
    copy.deepcopy(model)
    rep, plan, hi = solve_and_verify(remat_bin, workdir, "hooked_spectral_norm", 2, 30)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.buffers_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"], text
