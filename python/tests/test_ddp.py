"""DistributedDataParallel around a remat step: the plan is the wrapped module's, and the
gradients and buffers are those eager DDP makes (CPU, gloo; docs/pytorch.md)."""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import remat_torch
from remat_torch import binary
from remat_torch.capture import capture
from remat_torch.errors import RematInputError
from remat_torch.executor import graph_name
from remat_torch.graphfile import export

dist = pytest.importorskip("torch.distributed")

# Ranks talk over the loopback device: CI machines reach no network, and gloo would
# otherwise pick the interface the host name resolves to (inherited by spawned ranks).
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

DDP = nn.parallel.DistributedDataParallel
BATCH = 64


def make_model() -> nn.Module:
    torch.manual_seed(0)
    # a BatchNorm: buffers that DDP broadcasts and the step updates
    # (a deep narrow chain on a large batch: activations outweigh parameters, so that a
    # 60% budget needs recomputation)
    layers = [nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU()]
    for _ in range(10):
        layers += [nn.Linear(32, 32), nn.Tanh()]
    return nn.Sequential(*layers, nn.Linear(32, 4))


def make_batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, 16, generator=g), torch.randn(BATCH, 4, generator=g)


def loss_fn(out, y):
    return F.mse_loss(out, y)


def solve_plan(remat: str, d) -> str:
    """A remat-fast plan at 60% of the module's joint graph, which recomputes."""
    model, data = make_model(), make_batch(0)
    cap = capture(model, data, loss_fn)
    graph = d / "ddp-mlp.yaml"
    graph.write_text(export(cap, data, graph_name("ddp-mlp", BATCH, cap.fingerprint), BATCH))
    plan = d / "ddp-mlp.json"
    binary.solve(str(graph), "60%", str(plan), strategy="remat-fast", time_limit=5)
    statements = json.loads(plan.read_text())["statements"]
    computes = [st["node"] for st in statements if st["op"] == "compute"]
    assert len(computes) > len(set(computes)), "the plan should recompute"
    return str(plan)


@pytest.fixture(scope="module")
def plan(remat_bin, tmp_path_factory) -> str:
    return solve_plan(remat_bin, tmp_path_factory.mktemp("ddp"))


@pytest.fixture
def group(tmp_path):
    """A one-rank gloo process group, destroyed after the test."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        yield
    finally:
        dist.destroy_process_group()


def grads(m: nn.Module) -> dict:
    return {k: p.grad.clone() for k, p in m.named_parameters()}


def assert_same(a: nn.Module, b: nn.Module, what: str) -> None:
    for (k, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert p.grad is not None and torch.equal(p.grad, q.grad), f"{what}: grad {k}"
    for (k, p), (_, q) in zip(a.named_buffers(), b.named_buffers()):
        assert torch.equal(p, q), f"{what}: buffer {k}"


def eager_step(ddp, batch) -> torch.Tensor:
    ddp.zero_grad(set_to_none=True)
    loss = loss_fn(ddp(batch[0]), batch[1])
    loss.backward()
    return loss.detach()


def remat_step(ddp, plan, batch) -> torch.Tensor:
    ddp.zero_grad(set_to_none=True)
    return remat_torch.train_step(ddp, plan, batch, loss_fn)


# ------------------------------------------------------------------ one rank, in process


@pytest.mark.parametrize("static_graph", [False, True])
def test_ddp_one_rank_bitwise_eager(plan, group, static_graph):
    model = make_model()
    eager, mine = (DDP(copy.deepcopy(model), static_graph=static_graph) for _ in range(2))
    # the plan is the module's: the same fingerprint as the unwrapped model's graph
    data = make_batch(1)
    assert capture(mine, data, loss_fn).fingerprint == capture(model, data, loss_fn).fingerprint
    for step in range(2):
        batch = make_batch(10 + step)
        le = eager_step(eager, batch)
        lr = remat_step(mine, plan, batch)
        assert torch.equal(le, lr)
        assert_same(mine.module, eager.module, f"step {step}")
    # the Executor takes the DDP model too
    ex = remat_torch.Executor(mine, loss_fn, data, plan)
    assert ex.model is mine.module and ex.ddp is mine
    ex(*data)
    eager_step(eager, data)
    assert_same(mine.module, eager.module, "Executor")


def test_ddp_no_sync_overwrites_and_refuses_accumulation(plan, group):
    mine = DDP(make_model())
    ref = copy.deepcopy(mine.module)
    batch = make_batch(3)
    with mine.no_sync():
        remat_step(mine, plan, batch)
    loss_fn(ref(batch[0]), batch[1]).backward()
    assert_same(mine.module, ref, "no_sync")
    # eager DDP would add the next step's gradient to these: refused, not overwritten
    before = grads(mine.module)
    for ctx in (mine.no_sync, contextlib.nullcontext):
        with ctx():
            with pytest.raises(RematInputError, match=r"no_sync\(\).*overwrites p.grad"):
                remat_torch.train_step(mine, plan, batch, loss_fn)
    assert all(torch.equal(p.grad, before[k]) for k, p in mine.module.named_parameters())
    mine.zero_grad(set_to_none=True)
    remat_torch.train_step(mine, plan, batch, loss_fn)  # zeroed: runs


def _allreduce_noop(state, bucket):
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(
        lambda fut: fut.value()[0])


@pytest.mark.parametrize("setup, words", [
    (lambda d: d.register_comm_hook(None, _allreduce_noop), "communication hook"),
    (lambda d: d._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS),
     "communication hook"),
    (lambda d: d._register_buffer_comm_hook(None, lambda s, b: None),
     "buffer communication hook"),
], ids=["comm_hook", "builtin_comm_hook", "buffer_comm_hook"])
def test_ddp_refused_configurations(plan, group, setup, words):
    mine = DDP(make_model())
    setup(mine)
    with pytest.raises(RematInputError) as e:
        remat_torch.train_step(mine, plan, make_batch(4), loss_fn)
    msg = str(e.value)
    assert "\n" not in msg and "DistributedDataParallel" in msg and words in msg, msg
    assert all(p.grad is None for p in mine.parameters())


def test_ddp_join_refused(plan, group):
    from torch.distributed.algorithms.join import Join

    mine = DDP(make_model())
    with Join([mine]):
        with pytest.raises(RematInputError, match="Join context"):
            remat_torch.train_step(mine, plan, make_batch(4), loss_fn)


# ------------------------------------------------------------------ two ranks, spawned


def _worker(rank: int, world: int, init: str, plan: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        model = make_model()
        eager, mine = DDP(copy.deepcopy(model)), DDP(copy.deepcopy(model))
        local = copy.deepcopy(model)
        for m in (eager.module, mine.module):
            # ranks' buffers differ: each step's broadcast (rank 0's) decides them
            m[1].running_mean.fill_(float(rank))
        # synced, no_sync (local gradients), then synced again: that step broadcasts no
        # buffers (DDP's require_forward_param_sync, cleared by the no_sync forward)
        for step, sync in enumerate((True, False, True)):
            batch = make_batch(100 * (rank + 1) + step)
            if sync:
                le, lr = eager_step(eager, batch), remat_step(mine, plan, batch)
            else:
                with eager.no_sync(), mine.no_sync():
                    le, lr = eager_step(eager, batch), remat_step(mine, plan, batch)
            assert torch.equal(le, lr), (rank, step)
            assert_same(mine.module, eager.module, f"rank {rank} step {step}")
            local.load_state_dict(mine.module.state_dict())
            local.zero_grad(set_to_none=True)
            loss_fn(local(batch[0]), batch[1]).backward()
            same = [torch.equal(p.grad, q.grad) for p, q in
                    zip(mine.module.parameters(), local.parameters())]
            # averaged gradients differ from the rank's own; no_sync's are its own
            assert all(same) if not sync else not any(same), (rank, step, same)
        # Both ranks done with their collectives before either tears gloo
        # down: without it, rank 0 sometimes aborted at exit ("terminate
        # called without an active exception") after every assertion passed.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_ddp_two_ranks_bitwise_eager(plan, tmp_path):
    import torch.multiprocessing as mp

    init = f"file://{tmp_path / 'init'}"
    mp.spawn(_worker, args=(2, init, plan), nprocs=2, join=True)
    assert os.path.exists(plan)
