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


def solve_and_run(remat_bin, workdir: Path, name: str, batch: int, fraction: int,
                  strategy: str = "remat-fast"):
    """One capture (cheaper than ``verify``'s three): export, solve at ``fraction``% of the
    way from the smallest budget to the checkpoint-all peak, run the no-remat statements
    then the plan on the same model. Returns (plan JSON, peak, no-remat grads, plan
    grads, the executor after the plan's run, its loss, the no-remat loss)."""
    import torch

    model, data, loss_fn = call_factory(spec(name), batch)
    cap = capture(model, data, loss_fn)
    graph = workdir / f"run-{name}-b{batch}.yaml"
    graph.write_text(export(cap, data, graph_name(name, batch, cap.fingerprint), batch,
                            factory=spec(name)))
    lo, hi = inspect_bounds(remat_bin, str(graph))
    plan_path = workdir / f"run-{name}-{strategy}-{fraction}.json"
    binary.solve(str(graph), str(lo + (hi - lo) * fraction // 100), str(plan_path),
                 strategy=strategy, time_limit=20)
    plan = json.loads(plan_path.read_text())
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    torch.manual_seed(0)
    ref_loss = ex.run_no_remat(*data, measure=True)
    assert ex.size_mismatches == {}, ex.size_mismatches
    ref = {k: p.grad.clone() for k, p in cap.trained_params().items()}
    assert ex.last_peak == hi  # the no-remat run is the checkpoint-all peak
    torch.manual_seed(0)
    loss = ex(*data, measure=True)
    assert ex.size_mismatches == {}, ex.size_mismatches
    got = {k: p.grad.clone() for k, p in cap.trained_params().items()}
    return plan, hi, ref, got, ex, loss, ref_loss


def assert_plan_exact(remat_bin, workdir, name, batch, fraction, strategy="remat-fast"):
    """The plan recomputes something, its gradients and loss are bitwise the no-remat
    run's, and its measured peak is remat's simulated one, below the no-remat peak."""
    import torch

    plan, hi, ref, got, ex, loss, ref_loss = solve_and_run(remat_bin, workdir, name, batch,
                                                           fraction, strategy)
    assert sum(ex.computations.values()) > len(ex.computations), "nothing recomputed"
    assert ref and all(torch.equal(ref[k], got[k]) for k in ref), name
    assert torch.equal(loss, ref_loss)
    assert ex.last_peak == plan["peak_memory"] < hi, (ex.last_peak, plan["peak_memory"], hi)
    return plan, ex


def test_lstm_is_traced_as_plain_ops(remat_bin, workdir):
    """A 2-layer nn.LSTM: torch's decomposition picked ``mkldnn_rnn_layer`` (oneDNN), whose
    real kernel makes its backward's workspace only in grad mode, while the executor runs
    under no_grad: every plan failed with a RuntimeError traceback ('Expected a proper
    Tensor but got None ... workspace'), and the fake kernel sized that workspace at 0
    bytes (real: 28 KB). With oneDNN off while tracing, the LSTM is the per-step ops."""
    plan, ex = assert_plan_exact(remat_bin, workdir, "lstm", 2, 50)
    assert not [g.op for g in ex.cap.nodes if "mkldnn" in g.op]
    assert len(ex.cap.nodes) > 100  # 2 layers x 3 steps of gate ops


def test_fake_tensor_cache_keeps_outputs_sharing_a_storage():
    """FakeTensorMode's dispatch cache rebuilt a cached kernel's outputs one by one, so two
    outputs sharing a storage came back as two storages: the second capture of a model in
    one process (verify re-captures) could then split a kernel into other members, and
    verify refused the plan for a fingerprint mismatch (a 2-layer LSTM did, where
    ``mkldnn_rnn_layer_backward`` returns one tensor as both bias gradients). The
    capture's mode does not use the cache at all (one-output kernels lost their size
    too: test_semantics.py)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from remat_torch.capture import _fake_mode

    def run(mode):
        real = [torch.randn(5, 2, 6), torch.randn(32, 6), torch.randn(32, 8),
                torch.randn(32), torch.randn(32), torch.zeros(1, 2, 8), torch.zeros(1, 2, 8),
                torch.randn(5, 2, 8), torch.randn(1, 2, 8), torch.randn(1, 2, 8),
                torch.randn(5, 2, 8), torch.zeros(100, dtype=torch.uint8)]
        a = [mode.from_tensor(t) for t in real]
        with mode:
            out = torch.ops.aten.mkldnn_rnn_layer_backward.default(
                *a[:10], a[10], None, None, False, 2, 8, 1, True, False, False, [], False,
                a[11])
        return out[3].untyped_storage()._cdata == out[4].untyped_storage()._cdata

    mode = _fake_mode()
    assert run(mode) and run(mode)  # the second call too
    hits = FakeTensorMode.cache_hits
    with mode:  # nor does a one-output kernel hit the cache
        x = mode.from_tensor(torch.randn(3, 5))
        torch.tanh(x)
        torch.tanh(x)
    assert FakeTensorMode.cache_hits == hits
    FakeTensorMode.cache_clear()
    cached = FakeTensorMode()
    cached.cache_enabled = True
    assert run(cached) and not run(cached)  # the control: the cache loses the sharing


def test_transformer_mask_without_is_causal_is_one_line_naming_the_fix(remat_bin, workdir):
    """nn.Transformer given a tgt_mask without tgt_is_causal reads the mask to tell whether
    it is causal (data the graph cannot depend on): before, the refusal said 'an .item(),
    float(t)...', which the model does not do. It now names torch's line and the fix; with
    tgt_is_causal=True the same model's plans are exact."""
    from conftest import run_main

    proc = run_main("export", spec("transformer_mask"), "--batch", "2", "-o",
                    str(workdir / "tm.yaml"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "at torch/nn/modules/transformer.py:" in proc.stderr, proc.stderr
    assert "(_detect_is_causal_mask)" in proc.stderr and "tgt_is_causal=" in proc.stderr
    assert_plan_exact(remat_bin, workdir, "transformer_causal", 2, 50)


def test_a_loss_closing_over_the_model_verifies_and_trains(remat_bin, workdir):
    """A loss_fn with a weight-decay term over ``model.parameters()``: verify and train
    deep-copied the model for their reference runs, but the copy's loss_fn still read the
    first model's parameters (constants of the copy's graph): verify refused every plan
    for a fingerprint mismatch. They now call the factory again for each run."""
    from remat_torch.verify import train

    rep, plan, hi = solve_and_verify(remat_bin, workdir, "weight_decay_loss", 4, 50)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"] < hi, text
    assert "recomputations" in text and " 0 recomputations" not in text, text
    path = workdir / "more-weight_decay_loss-remat-fast-50.json"
    rep = train(spec("weight_decay_loss"), str(path), steps=2)
    assert rep.ok and rep.losses["step1"] == rep.losses["eager1"], rep.lines


def test_a_torchscript_submodule_is_captured(remat_bin, workdir):
    """A torch.jit.script submodule: the capture died with a TypeError traceback from
    restoring its parameters (a ScriptModule's parameter dict takes no int keys). Its
    parameters are trained like any other."""
    plan, ex = assert_plan_exact(remat_bin, workdir, "scripted", 16, 30)
    assert set(ex.cap.grads) == {f"{i}.{w}" for i in (0, 2, 4) for w in ("weight", "bias")}


def test_ops_with_effect_tokens_run_as_plain_kernels(remat_bin, workdir):
    """torch.linalg.solve/inv: AOTAutograd wraps their error check in
    ``with_effects(token, _linalg_check_errors, ...)`` and adds a token input: the export
    was refused ('unsupported joint-graph input ForwardTokenAOTInput(idx=0)'), and the
    aot_module fallback died on an AttributeError. The check is now a plain 0-byte node
    and the token is gone; both capture APIs give the same graph."""
    from conftest import assert_fallback_matches

    plan, ex = assert_plan_exact(remat_bin, workdir, "linalg", 4, 50)
    checks = [g for g in ex.cap.nodes if "_linalg_check_errors" in g.op]
    assert len(checks) == 2 and all(g.memory == 0 for g in checks)
    assert "token" not in {kind for kind, _ in ex.cap.placeholders.values()}
    model, data, loss_fn = call_factory(spec("linalg"), 4)
    assert_fallback_matches(model, data, loss_fn)


REGISTERING_FACTORY = '''
import torch, torch.nn as nn, torch.nn.functional as F

# a namespace defined when the file is executed: executing it again raises
LIB = torch.library.Library("remat_test_once", "DEF")
LIB.define("twice(Tensor x) -> Tensor")
LIB.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")

torch.manual_seed(0)
MODEL = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                      nn.Linear(32, 3))

class Twice(nn.Module):
    def forward(self, x):
        return torch.ops.remat_test_once.twice(x)

def shared(b):
    """The same module-level model on every call."""
    torch.manual_seed(1)
    return nn.Sequential(MODEL, Twice()), (torch.randn(b, 8), torch.randint(0, 3, (b,))), \\
        F.cross_entropy
'''


def test_verify_executes_the_factory_file_once(remat_bin, workdir):
    """verify calls the factory once per run (plan, no-remat, eager): the file was executed
    on each call, and a file that defines a torch.library namespace failed the second
    time ('import failed: RuntimeError: Only a single TORCH_LIBRARY...'). It is executed
    once per process now; a factory returning one module-level model each time gets a
    deep copy for the reference runs (sharing it, the runs would write one p.grad)."""
    from remat_torch.verify import _twin

    path = workdir / "registering.py"
    path.write_text(REGISTERING_FACTORY)
    fn = f"{path}:shared"
    model, data, loss_fn = call_factory(fn, 8)
    cap = capture(model, data, loss_fn)
    graph = workdir / "registering.yaml"
    graph.write_text(export(cap, data, graph_name("shared", 8, cap.fingerprint), 8, factory=fn))
    lo, hi = inspect_bounds(remat_bin, str(graph))
    plan = workdir / "registering.json"
    binary.solve(str(graph), str(lo + (hi - lo) // 2), str(plan), time_limit=20)
    rep = verify(fn, str(plan), graph_path=str(graph))
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.eager_bitwise, text
    assert rep.measured_peak == rep.simulated_peak < hi, text
    twin, _ = _twin(fn, 8, model)
    mine = {id(p) for p in model.parameters()}
    assert twin is not model and not any(id(p) in mine for p in twin.parameters())


def test_dropout_backward_is_traced_with_the_cpu_kernels_strides(remat_bin, workdir):
    """``native_dropout_backward``'s fake kernel lays its output out contiguous (as the
    CUDA kernel), the CPU kernel as its non-contiguous grad_output; a batch-first
    attention's dropout gradient is transposed, and the backward took a ``view`` of it
    that the real tensor does not allow: every run of this model, the no-remat one too,
    failed with a RuntimeError traceback ('view size is not compatible...'). It is now
    traced with the CPU kernel's strides."""
    import torch

    plan, ex = assert_plan_exact(remat_bin, workdir, "causal_encoder", 4, 50)
    drops = [g for g in ex.cap.nodes if g.op == "aten.native_dropout_backward.default"]
    assert drops
    out = ex.cap.gm.graph.find_nodes(op="call_function",
                                     target=torch.ops.aten.native_dropout_backward.default)
    assert any(not n.meta["val"].is_contiguous() for n in out)


def test_a_view_the_real_tensors_do_not_allow_is_one_line(monkeypatch):
    """Should another fake kernel lay its output out otherwise than the real one, the
    view the trace took of it is refused in one line naming the node and both strides
    (shown here with the old dropout-backward fake kernel), not a RuntimeError
    traceback."""
    import contextlib

    import pytest

    from remat_torch import capture as C
    from remat_torch.errors import RematInputError

    monkeypatch.setattr(C, "_cpu_faithful_fakes", contextlib.nullcontext)
    model, data, loss_fn = call_factory(spec("causal_encoder"), 4)
    cap = capture(model, data, loss_fn)
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}
    with pytest.raises(RematInputError, match=r"of the joint graph cannot be taken from the "
                       r"real tensors .*: its input has strides \(8, 32, 1\), traced as "
                       r"\(40, 8, 1\)"):
        Executor(model, loss_fn, data, plan, cap=cap)(*data)


def test_embedding_bag_offset2bag_has_its_real_size(remat_bin, workdir):
    """``_embedding_bag`` allocates ``offset2bag`` with one element more than it keeps:
    the graph said 192 bytes for 24 indices (real: 200), verify named the nodes 'DIFFER'
    and the measured peak was above the simulated one. It is run once for real at
    export."""
    plan, ex = assert_plan_exact(remat_bin, workdir, "embedding_bag", 4, 50)
    off = [g for g in ex.cap.nodes if g.op.startswith("aten._embedding_bag") and g.member == 1]
    # mean and max keep offset2bag (24 indices, 25 int64 allocated); sum has none
    assert [g.memory for g in off] == [(4 * 6 + 1) * 8, (4 * 6 + 1) * 8, 0], [
        (g.name, g.memory) for g in off]


def test_col2im_and_autocast_layer_norm_have_their_real_sizes(remat_bin, workdir):
    """Two kernels whose real CPU output is larger than the fake kernel says: F.unfold's
    backward ``col2im`` (6,144 bytes said, 18,816 held: every plan measured up to a third
    above its simulated peak) and LayerNorm's mean and rstd under bf16 autocast (bf16
    said, float32 returned). Both are run once for real at export; verify said DIFFER."""
    for name in ("unfold", "autocast_norm"):
        assert_plan_exact(remat_bin, workdir, name, 4, 60)
