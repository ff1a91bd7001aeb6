"""Training semantics the joint graph does not carry by itself, each held to eager
PyTorch with real numbers: parameter gradient hooks, buffers rebound in the forward,
a second capture in the same process, the loss's dtype, the modes and requires_grad
flags a capture depends on, train_step's cache, and what verify holds to eager."""

from __future__ import annotations

import copy
import functools
import json
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import inspect_bounds, run_main

from remat_torch import binary, train_step
from remat_torch import executor as executor_mod
from remat_torch.capture import capture
from remat_torch.errors import RematInputError
from remat_torch.executor import CACHE_SIZE, Executor, no_remat_statements
from remat_torch.verify import verify

FACTORIES = '''
import torch, torch.nn as nn, torch.nn.functional as F

class HookNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.a = nn.Linear(16, 16)
        s.b = nn.Linear(16, 4)
        s.a.weight.register_hook(lambda g: g.clamp(-1e-3, 1e-3))
    def forward(s, x):
        return s.b(torch.tanh(s.a(x)))

def param_hook(b):
    torch.manual_seed(0)
    return HookNet(), (torch.randn(b, 16), torch.randint(0, 4, (b,))), F.cross_entropy

class StepNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.a = nn.Linear(16, 4)
        s.register_buffer("step", torch.zeros(()))
    def forward(s, x):
        s.step = s.step + 1
        return s.a(x)

def buffer_rebind(b):
    torch.manual_seed(0)
    return StepNet(), (torch.randn(b, 16), torch.randint(0, 4, (b,))), F.cross_entropy

class Diverged(nn.Module):
    def __init__(s):
        super().__init__()
        s.l, s.o = nn.Linear(8, 8), nn.Linear(8, 1)
    def forward(s, x):
        return s.o(torch.sqrt(s.l(x))).squeeze(1)

def diverged(b):
    torch.manual_seed(0)
    return Diverged(), (torch.randn(b, 8), torch.randn(b)), F.mse_loss
'''


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
    path = tmp_path_factory.mktemp("semantics") / "semantic_factories.py"
    path.write_text(FACTORIES)
    return path


def plan_for(cap):
    return {"model": f"m-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}


def run_plan(model, data, loss_fn, seed=0):
    cap = capture(model, data, loss_fn)
    torch.manual_seed(seed)
    return Executor(model, loss_fn, data, plan_for(cap), cap=cap)(*data)


def run_eager(model, data, loss_fn, seed=0):
    torch.manual_seed(seed)
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(data[0]), *data[1:])
    loss.backward()
    return loss


def assert_same_grads(a, b):
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    for k in pa:
        assert (pa[k].grad is None) == (pb[k].grad is None), k
        if pa[k].grad is not None:
            assert torch.equal(pa[k].grad, pb[k].grad), k


def xy(b=4, d=8, c=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g), torch.randint(0, c, (b,), generator=g)


# --------------------------------------------------------------------------- defect 1


class Hooked(nn.Module):
    """A parameter with two tensor hooks (one returns None) and a post-accumulate-grad
    hook, and a weight tied between two layers with a clamping hook: autograd clamps
    the sum of its two partial gradients, not each."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.b.weight = self.a.weight
        self.c = nn.Linear(8, 3)
        self.seen = []
        self.a.weight.register_hook(lambda g: g.clamp(-2e-3, 2e-3))
        self.c.weight.register_hook(lambda g: self.seen.append("c1"))
        self.c.weight.register_hook(lambda g: g * 3.0)
        self.c.weight.register_post_accumulate_grad_hook(
            lambda p: self.seen.append(("post", p.grad.clone())))

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))


def test_parameter_gradient_hooks_apply_as_in_eager():
    """Before: the hooks were silently dropped (p.grad was the unhooked gradient)."""
    model, eager, data = Hooked(), Hooked(), xy()  # (deepcopy drops tensor hooks)
    loss = run_plan(model, data, F.cross_entropy)
    loss_e = run_eager(eager, data, F.cross_entropy)
    assert torch.equal(loss, loss_e)
    assert_same_grads(model, eager)
    # the hooks did change the gradients: the clamp binds, the factor 3 shows
    assert model.a.weight.grad.abs().max().item() == pytest.approx(2e-3)
    plain = copy.deepcopy(model)  # without the hooks
    run_eager(plain, data, F.cross_entropy)
    assert torch.equal(model.c.weight.grad, plain.c.weight.grad * 3.0)
    # the None-returning hook ran, then the post-accumulate hook saw the final p.grad
    assert model.seen[0] == "c1" and model.seen[1][0] == "post"
    assert torch.equal(model.seen[1][1], eager.c.weight.grad)


def test_a_gradient_hook_returning_another_shape_is_one_line():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 3))
    model[0].bias.register_hook(lambda g: g[:2])
    data = xy()
    with pytest.raises(RematInputError, match=r"^the gradient hook of parameter '0.bias' "
                       r"returned a float32 \[2\] tensor, where its gradient is float32 \[3\]$"):
        run_plan(model, data, F.cross_entropy)


def _solved(factories, fn, workdir, remat_bin):
    graph = workdir / f"{fn}.yaml"
    assert run_main("export", f"{factories}:{fn}", "--batch", "4", "-o", str(graph)).returncode == 0
    _, hi = inspect_bounds(remat_bin, str(graph))
    plan = workdir / f"{fn}.json"
    binary.solve(str(graph), str(hi), str(plan), strategy="checkpoint-all")
    return str(graph), str(plan)


def test_verify_holds_the_plan_to_eager(factories, workdir, remat_bin, monkeypatch):
    """Before: verify printed 'vs eager: max |diff| 0.0599' and then 'verdict OK'."""
    graph, plan = _solved(factories, "param_hook", workdir, remat_bin)
    rep = verify(f"{factories}:param_hook", plan, graph)
    assert rep.ok and rep.eager_bitwise, "\n".join(rep.lines)
    # the executor as it was (hooks dropped): the plan still equals the no-remat run,
    # but not eager, and that fails the verdict, also on the command line (exit code 1)
    monkeypatch.setattr(executor_mod, "_run_grad_hooks", lambda name, p: None)
    rep = verify(f"{factories}:param_hook", plan, graph)
    assert rep.grads_bitwise and not rep.eager_close and not rep.ok
    assert "eager            DIFFER: gradients beyond rtol 1e-05, atol 1e-06" in rep.lines
    assert rep.lines[-1] == "verdict          FAILED"
    proc = run_main("verify", f"{factories}:param_hook", plan, "--graph", graph)
    assert proc.returncode == 1 and "verdict          FAILED" in proc.stdout


# --------------------------------------------------------------------------- defect 2


def test_a_rebound_buffer_is_updated_as_in_eager():
    """Before: the executor never updated it (eager: 1.0 then 2.0; executor: 0.0)."""
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = nn.Linear(8, 3)
            self.register_buffer("step", torch.zeros(()))
            self.register_buffer("ema", torch.zeros(3))

        def forward(self, x):
            self.step = self.step + 1
            out = self.a(x)
            self.ema = 0.9 * self.ema + 0.1 * out.detach().mean(0) * self.step
            return out

    model, data = Counter(), xy()
    eager = copy.deepcopy(model)
    step_buf = model.step
    ex = Executor(model, F.cross_entropy, data, plan_for(capture(model, data, F.cross_entropy)))
    for want in (1.0, 2.0):
        loss = ex(*data)
        loss_e = run_eager(eager, data, F.cross_entropy)
        assert torch.equal(loss, loss_e)
        assert model.step.item() == want == eager.step.item()
        assert torch.equal(model.ema, eager.ema) and model.ema.abs().sum() > 0
        assert_same_grads(model, eager)
    assert model.step is step_buf  # written in place: the executor's registers stay valid


def test_a_rebinding_the_buffer_cannot_hold_is_one_line():
    class Grows(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 3)
            self.register_buffer("hist", torch.zeros(2))

        def forward(self, x):
            self.hist = torch.cat([self.hist, x.new_zeros(1)])
            return self.a(x)

    with pytest.raises(RematInputError, match=r"^the forward rebinds buffer 'hist' to a "
                       r"float32 \[3\] tensor, where it is a float32 \[2\] one"):
        capture(Grows(), xy(), F.cross_entropy)


def test_verify_fails_when_buffers_differ_from_eager(factories, workdir, remat_bin,
                                                     monkeypatch):
    """Before: '0 buffer updates', 'buffers ... vs eager: differ', then 'verdict OK'."""
    graph, plan = _solved(factories, "buffer_rebind", workdir, remat_bin)
    rep = verify(f"{factories}:buffer_rebind", plan, graph)
    assert rep.ok and "1 buffer updates" in rep.lines[0], "\n".join(rep.lines)
    # an executor that updates no buffer (as it was): the plan equals the no-remat run,
    # not eager
    prepare = Executor._prepare

    def no_buffer_updates(self):
        prepare(self)
        self.sinks = {k: [s for s in v if s[0] != "buffer"] for k, v in self.sinks.items()}

    monkeypatch.setattr(Executor, "_prepare", no_buffer_updates)
    rep = verify(f"{factories}:buffer_rebind", plan, graph)
    assert rep.buffers_bitwise and not rep.ok, "\n".join(rep.lines)
    assert any(line.startswith("buffers") and "vs eager: DIFFER (step)" in line
               for line in rep.lines)
    assert "eager            DIFFER: buffers beyond rtol 1e-05, atol 1e-06" in rep.lines


# --------------------------------------------------------------------------- defect 3


class SliceWrite(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(8, 6)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x).clone()
        h[:, 0] = 0.0
        return self.b(h)


def test_a_second_capture_in_the_process_is_the_same_graph():
    """Before: FakeTensorMode's cache rebuilt the second trace's aten.copy at the view's
    extent: another size (48 bytes for 96), another fingerprint, and a plan made from
    a warm process's graph had a node whose real output was larger."""
    import torch._dynamo.config as dynamo_config

    model, data = SliceWrite(), xy()
    was = dynamo_config.fake_tensor_cache_enabled
    first = capture(model, data, F.cross_entropy)
    second = capture(model, data, F.cross_entropy)
    assert dynamo_config.fake_tensor_cache_enabled == was  # restored
    assert [(g.name, g.memory) for g in second.nodes] == [(g.name, g.memory) for g in first.nodes]
    assert first.fingerprint == second.fingerprint
    ex = Executor(model, F.cross_entropy, data, plan_for(second), cap=second)
    ex(*data, measure=True)
    assert ex.size_mismatches == {}
    assert any(g.op == "aten.copy.default" for g in second.nodes)


# --------------------------------------------------------------------------- defect 4


def test_the_loss_keeps_its_dtype():
    """Before: a float64 model's loss came back as float32 (torch.tensor(loss.item()))."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 3)).double()
    x, y = xy()
    data = (x.double(), y)
    eager = copy.deepcopy(model)
    loss = run_plan(model, data, F.cross_entropy)
    loss_e = run_eager(eager, data, F.cross_entropy)
    assert loss.dtype == torch.float64 and loss.device == loss_e.device
    assert not loss.requires_grad and loss.dim() == 0
    assert torch.equal(loss, loss_e.detach())
    assert_same_grads(model, eager)


# --------------------------------------------------------------------------- defect 5


def test_the_model_is_captured_in_its_own_modes():
    """A BatchNorm frozen with .eval() in a training model uses its running statistics and
    leaves them alone, as in eager. Before: capture() put the whole model in training
    mode, so the statistics moved (and the module stayed in training mode)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    model[1].running_mean.uniform_(-1, 1)
    model[1].eval()
    eager = copy.deepcopy(model)
    data = xy()
    loss = run_plan(model, data, F.cross_entropy)
    loss_e = run_eager(eager, data, F.cross_entropy)
    assert not model[1].training
    assert torch.equal(loss, loss_e)
    assert_same_grads(model, eager)
    for (k, a), (_, b) in zip(model.named_buffers(), eager.named_buffers()):
        assert torch.equal(a, b), k
    assert model[1].num_batches_tracked.item() == 0


def test_train_step_follows_requires_grad_and_modes():
    """Before: the cached executor of the first step ran on: a parameter unfrozen later
    silently got no gradient, and after model.eval() the step still ran dropout."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 3))
    model[0].weight.requires_grad_(False)
    data = xy()
    frozen = plan_for(capture(model, data, F.cross_entropy))
    train_step(model, frozen, data, F.cross_entropy)
    assert model[0].weight.grad is None
    model[0].weight.requires_grad_(True)
    # another graph: this plan does not fit it any more, and the step says so
    with pytest.raises(RematInputError, match="fingerprint does not match"):
        train_step(model, frozen, data, F.cross_entropy)
    eager = copy.deepcopy(model)
    unfrozen = plan_for(capture(model, data, F.cross_entropy))
    torch.manual_seed(3)
    loss = train_step(model, unfrozen, data, F.cross_entropy)
    loss_e = run_eager(eager, data, F.cross_entropy, seed=3)
    assert torch.equal(loss, loss_e) and model[0].weight.grad is not None
    assert_same_grads(model, eager)
    # eval mode: no dropout; the training-mode plan is refused, an eval-mode one runs
    model.eval()
    eager.eval()
    with pytest.raises(RematInputError, match="fingerprint does not match"):
        train_step(model, unfrozen, data, F.cross_entropy)
    evaluated = plan_for(capture(model, data, F.cross_entropy))
    loss = train_step(model, evaluated, data, F.cross_entropy)
    assert torch.equal(loss, run_eager(eager, data, F.cross_entropy))
    assert_same_grads(model, eager)


def test_an_executor_refuses_a_changed_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    data = xy()
    cap = capture(model, data, F.cross_entropy)
    ex = Executor(model, F.cross_entropy, data, dict(plan_for(cap), _path="p.json"), cap=cap)
    ex(*data)
    model[2].bias.requires_grad_(False)
    with pytest.raises(RematInputError, match=r"^p.json: parameter '2.bias' has "
                       r"requires_grad=False \(it was True\) since the model was captured"):
        ex(*data)
    model[2].bias.requires_grad_(True)
    model[1].eval()
    with pytest.raises(RematInputError, match=r"^p.json: module '1' is in eval mode"):
        ex(*data)


def test_train_step_reads_a_rewritten_plan_file(tmp_path):
    """Before: the executor of the file's first version ran on after it was rewritten."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))
    data = xy()
    cap = capture(model, data, F.cross_entropy)
    base = plan_for(cap)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(base))
    train_step(model, str(path), data, F.cross_entropy)
    # the same plan, with the first node computed a second time right after itself
    sts = list(base["statements"])
    first = next(i for i, s in enumerate(sts) if s["op"] == "compute")
    node, reg = sts[first]["node"], max(s["register"] for s in sts) + 1
    sts[first + 1:first + 1] = [
        {"op": "allocate", "register": reg, "node": node, "bytes": cap.by_name[node].memory},
        {"op": "compute", "node": node, "register": reg, "args": sts[first]["args"]},
        {"op": "deallocate", "register": reg}]
    path.write_text(json.dumps(dict(base, statements=sts)))
    train_step(model, str(path), data, F.cross_entropy)
    ex = next(reversed(executor_mod._EXECUTORS[model].values()))
    assert ex.computations[node] == 2


def test_train_step_keeps_a_bounded_cache():
    """Before: a loss function made anew every step (functools.partial) added an executor
    per step, without bound."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 3))
    data = xy()
    plan = plan_for(capture(model, data, F.cross_entropy))
    eager = copy.deepcopy(model)
    for _ in range(CACHE_SIZE + 2):
        loss = train_step(model, plan, data, functools.partial(F.cross_entropy, reduction="mean"))
        assert len(executor_mod._EXECUTORS[model]) <= CACHE_SIZE
    assert torch.equal(loss, run_eager(eager, data, F.cross_entropy))
    assert_same_grads(model, eager)


# --------------------------------------------------------------------------- defect 7


def test_a_batch_that_requires_grad_is_one_line():
    """Before: eager set x.grad, the executor left it None, silently."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 3))
    x, y = xy()
    plan = plan_for(capture(model, (x, y), F.cross_entropy))
    needle = r"^batch\[0\] requires grad: a plan computes the parameters' gradients only"
    for call in (lambda: capture(model, (x.requires_grad_(True), y), F.cross_entropy),
                 lambda: train_step(model, plan, (x, y), F.cross_entropy)):
        with pytest.raises(RematInputError, match=needle):
            call()
    x.requires_grad_(False)
    ex = Executor(model, F.cross_entropy, (x, y), plan)
    with pytest.raises(RematInputError, match=needle):
        ex(x.requires_grad_(True), y)


# --------------------------------------------------------------------------- defect 8


def test_a_raising_backward_hook_prints_no_anomaly_warning():
    """Before: torch's anomaly-mode 'Error detected in BackwardHookFunctionBackward'
    warning, with the forward's traceback, came with the one-line error."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))

    def bad(mod, grad_in, grad_out):
        raise ValueError("hook says no")

    model[2].register_full_backward_hook(bad)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RematInputError, match="ValueError: hook says no"):
            capture(model, xy(), F.cross_entropy)
    assert not [str(w.message) for w in seen if "Error detected in" in str(w.message)]


def test_train_step_lets_its_models_go():
    """Before: train_step's cache is keyed weakly by the model, but its executors held the
    model strongly, so every model ever given to train_step (a model per trial of a
    hyperparameter search) stayed in memory with its capture."""
    import gc
    import weakref

    data = xy()
    plan = None
    alive = []
    for _ in range(3):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
        plan = plan or plan_for(capture(model, data, F.cross_entropy))
        train_step(model, plan, data, F.cross_entropy)
        alive.append(weakref.ref(model))
        del model
        gc.collect()
    assert [r() for r in alive] == [None, None, None]
    # an executor built directly keeps its model: the caller may hold only the executor
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    eager = copy.deepcopy(model)
    ex = Executor(model, F.cross_entropy, data, plan)
    params = list(model.parameters())
    del model
    gc.collect()
    loss = ex(*data)
    assert torch.equal(loss, run_eager(eager, data, F.cross_entropy))
    for p, q in zip(params, eager.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_autocast_around_the_step_is_part_of_what_was_captured():
    """torch.autocast around train_step was not in its cache key: a step outside autocast
    reused the executor captured under it (bf16 training where eager was float32, loss
    and gradients off by 3e-3, silently), and a float32 plan run under autocast failed
    with a dtype traceback from inside a kernel. The autocast state is part of what a
    capture depends on, and the executor runs its kernels with autocast off (their casts
    are in the graph)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))
    data = xy()
    loss_fn = F.cross_entropy
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cap = capture(model, data, loss_fn)
        plan = plan_for(cap)
        eager = copy.deepcopy(model)
        loss = train_step(model, plan, data, loss_fn)
        loss_e = run_eager(eager, data, loss_fn)
    assert torch.equal(loss, loss_e)
    assert_same_grads(model, eager)
    # outside autocast: another graph, so this plan is refused in one line
    with pytest.raises(RematInputError, match="fingerprint does not match"):
        train_step(model, plan, data, loss_fn)
    # an executor made under autocast names the change
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ex = Executor(model, loss_fn, data, dict(plan, _path="p.json"), cap=cap)
    with pytest.raises(RematInputError, match=r"^p.json: torch.autocast\('cpu'\) is off "
                       r"\(it was on \(bfloat16\)"):
        ex(*data)
    # a float32 plan run under autocast: refused, not a traceback
    plain = plan_for(capture(model, data, loss_fn))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RematInputError, match="fingerprint does not match"):
            train_step(model, plain, data, loss_fn)


def test_a_private_generator_is_refused_by_name():
    """It said 'unsupported FX node _opaque_obj0 (get_attr of Generator)'."""

    class GenDrop(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 3)
            self.g = torch.Generator().manual_seed(123)

        def forward(self, x):
            h = torch.relu(self.l1(x))
            return self.l2(h * (torch.rand(h.shape, generator=self.g) > 0.5))

    with pytest.raises(RematInputError, match="a torch.Generator of the model's own"):
        capture(GenDrop(), xy(), F.cross_entropy)


def test_verify_does_not_blame_a_plan_for_nan(factories, workdir, remat_bin):
    """A model that has diverged (sqrt of negatives) has NaN loss and gradients in eager
    too: torch.equal never holds for NaN, so verify said FAILED for gradients whose bits
    were eager's."""
    graph, plan = _solved(factories, "diverged", workdir, remat_bin)
    rep = verify(f"{factories}:diverged", plan, graph)
    assert rep.ok and rep.grads_bitwise and rep.eager_bitwise, "\n".join(rep.lines)


def test_train_step_follows_replaced_parameters_and_changed_settings():
    """train_step's cache key held parameter names, modes and autocast only: after
    ``load_state_dict(assign=True)`` or a replaced layer it trained the tensors it had
    captured (the loss was the old weights', the new ones kept ``grad None``), and a
    changed ``Dropout.p`` or BatchNorm momentum ran the value baked into the first
    capture. Each is now part of what a capture depends on: train_step captures again
    and matches eager, and an Executor built directly refuses in one line."""
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Dropout(0.25),
                             nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    data = xy()
    model = make()
    plan = plan_for(capture(model, data, F.cross_entropy))
    eager = copy.deepcopy(model)

    def step_both():
        torch.manual_seed(5)
        model.zero_grad(set_to_none=True)
        got = train_step(model, plan, data, F.cross_entropy)
        want = run_eager(eager, data, F.cross_entropy, seed=5)
        assert torch.equal(got, want)
        assert_same_grads(model, eager)
        for (k, b), (_, c) in zip(model.named_buffers(), eager.named_buffers()):
            assert torch.equal(b, c), k

    step_both()
    # new parameter objects with other values, in both
    torch.manual_seed(1)
    fresh = make().state_dict()
    fresh = {k: v + 0.5 if v.is_floating_point() else v for k, v in fresh.items()}
    model.load_state_dict(copy.deepcopy(fresh), assign=True)
    eager.load_state_dict(copy.deepcopy(fresh), assign=True)
    step_both()
    # a replaced layer
    torch.manual_seed(2)
    head = nn.Linear(8, 3)
    model[5] = head
    eager[5] = copy.deepcopy(head)
    step_both()
    # plain settings the trace bakes in
    for m in (model, eager):
        m[2].p = 0.6
        m[4].momentum = 0.9
    step_both()

    ex = Executor(model, F.cross_entropy, data, plan)
    model[2].p = 0.1
    with pytest.raises(RematInputError, match=r"module '2' has p=0.1 \(it was 0.6\)"):
        ex(*data)
    model[2].p = 0.6
    model[0].weight = nn.Parameter(model[0].weight.detach().clone())
    with pytest.raises(RematInputError, match="parameter '0.weight' is another tensor"):
        ex(*data)
    # the same objects in another dtype are another graph too
    ex = Executor(model, F.cross_entropy, data, plan)
    model[3].double()
    with pytest.raises(RematInputError,
                       match=r"parameter '3.weight' is float64 on cpu, shape \[8, 8\] "
                             r"\(it was float32"):
        ex(*data)


LOSS_MODULES = '''
import torch, torch.nn as nn, torch.nn.functional as F

def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 5))

def data(b):
    g = torch.Generator().manual_seed(3)
    return torch.randn(b, 12, generator=g), torch.randint(0, 5, (b,), generator=g)

def weighted(b):
    return net(), data(b), nn.CrossEntropyLoss(weight=torch.tensor([1., 2., 3., 1., .5]))

class Uncertainty(nn.Module):
    def __init__(s):
        super().__init__()
        s.log_var = nn.Parameter(torch.tensor(0.3))
        s.proj = nn.Linear(5, 5)
        s.proj.requires_grad_(False)
    def forward(s, out, y):
        return F.cross_entropy(s.proj(out), y) * torch.exp(-s.log_var) + s.log_var

def learnable(b):
    return net(), data(b), Uncertainty()

def bad_target(b):
    x, _ = data(b)
    return net(), (x, torch.full((b,), 7)), F.cross_entropy
'''


def test_a_loss_module_brings_its_own_tensors(tmp_path, workdir, remat_bin):
    """A loss that is an nn.Module is a child of the capture's wrapper, so AOTAutograd
    lifts its weights as ``loss_fn.*`` inputs: the executor looked them up among the
    model's and failed with a KeyError (a weighted CrossEntropyLoss), and export itself
    failed on a loss with a learnable parameter. Both now run, its learnable parameter
    gets eager's gradient, and `train` updates it as eager's optimizer would."""
    f = tmp_path / "lossmods.py"
    f.write_text(LOSS_MODULES)
    for fn in ("weighted", "learnable"):
        g = workdir / f"{fn}.yaml"
        p = workdir / f"{fn}.json"
        assert run_main("export", f"{f}:{fn}", "--batch", "3", "-o", str(g)).returncode == 0
        binary.run(["solve", str(g), "-b", "100%", "-s", "checkpoint-all", "--plan", str(p),
                    "-q"])
        rep = verify(f"{f}:{fn}", str(p), graph_path=str(g))
        assert rep.ok, rep.lines
        assert any("vs eager: bitwise" in line for line in rep.lines), rep.lines
    from remat_torch.verify import train
    rep = train(f"{f}:learnable", str(p), graph_path=str(g), steps=2)
    assert rep.ok and rep.losses["step1"] == rep.losses["eager1"], rep.lines
    # the learnable weight's gradient is eager's
    import importlib.util
    spec = importlib.util.spec_from_file_location("lossmods", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, batch, loss_fn = mod.learnable(3)
    e_model, _, e_loss = mod.learnable(3)
    train_step(model, str(p), batch, loss_fn)
    run_eager(e_model, batch, e_loss)
    assert loss_fn.log_var.grad is not None
    assert torch.equal(loss_fn.log_var.grad, e_loss.log_var.grad)
    assert loss_fn.proj.weight.grad is None

    # a kernel that fails on the real batch (a class index past the logits) is one
    # line naming the node, exit 2, not a traceback from the executor
    g = workdir / "bad.yaml"
    p = workdir / "bad.json"
    assert run_main("export", f"{f}:bad_target", "--batch", "2", "-o", str(g)).returncode == 0
    binary.run(["solve", str(g), "-b", "100%", "-s", "checkpoint-all", "--plan", str(p), "-q"])
    with pytest.raises(RematInputError,
                       match=r"node 'nll_loss_forward' .* failed on the real batch: "
                             r"IndexError: Target 7 is out of bounds"):
        verify(f"{f}:bad_target", str(p), graph_path=str(g))
    r = run_main("train", f"{f}:bad_target", str(p), "--graph", str(g), "--steps", "0")
    assert r.returncode == 2 and r.stderr == "error: --steps must be at least 1 (got 0)\n"


def test_a_multi_line_message_is_one_line():
    e = RematInputError("model.py: factory failed: ValueError: line one\nline two\n")
    assert str(e) == "model.py: factory failed: ValueError: line one line two"
