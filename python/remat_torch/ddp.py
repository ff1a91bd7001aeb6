"""DistributedDataParallel around a remat step (see docs/pytorch.md).

A plan is for the wrapped ``ddp.module``: its joint graph is captured and run on
the module itself, and DDP's own machinery (the reducer's hooks on the gradient
accumulators, the buffer broadcast in ``forward``) never runs, since the step calls
neither ``ddp.forward`` nor ``backward``. This module does what DDP would have done
around one forward and backward:

* before the step, with ``broadcast_buffers`` (``forward_sync_buffers``) on, rank 0's
  buffers are broadcast over ``ddp.process_group`` (those DDP ignores aside), when DDP's
  own forward would (``require_forward_param_sync``: not in the step right after one
  run inside ``no_sync()``);
* after it (after the parameters' own gradient hooks, as DDP's reducer runs after
  them), unless inside ``ddp.no_sync()``, each gradient the step wrote of a parameter
  DDP reduces is multiplied by ``1 / world_size`` and all-reduced (sum), as DDP's
  default reduction does, in buckets of at most DDP's bucket size;
* the configurations whose gradients or buffers DDP would make otherwise (a comm hook,
  mixed precision, join, ...) are refused in one line, at every step (a hook may be
  registered after the first one).
"""

from __future__ import annotations

import weakref
from typing import Dict, List, Optional, Tuple

import torch

from .errors import RematInputError

# DDP's default bucket cap (25 MiB): the all-reduce goes in buckets of at most this
_BUCKET_BYTES = 25 * 1024 * 1024

# DDP model -> True once a remat step ran inside its no_sync(): the local gradients it
# left in p.grad are what eager DDP would accumulate the next step into
_LOCAL: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()


def ddp_class():
    """DistributedDataParallel, or None where torch.distributed is not built."""
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return None
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # pragma: no cover - a torch without distributed
        return None
    return DistributedDataParallel


def split(model) -> Tuple[torch.nn.Module, Optional[torch.nn.Module]]:
    """(the module a plan is for, the DDP wrapper or None): a DDP model's plan is its
    ``module``'s, whose joint graph and fingerprint are those of the unwrapped model."""
    cls = ddp_class()
    if cls is not None and isinstance(model, cls):
        return model.module, model
    return model, None


def _refusal(ddp) -> str:
    """Why this DDP configuration cannot be run by a remat step ('' if it can)."""
    hooks = getattr(ddp, "_comm_hooks", None)
    try:
        hook_name = ddp._get_ddp_logging_data().get("comm_hook")
    except Exception:  # noqa: BLE001 - logging data is a private API: best effort
        hook_name = None
    if hooks or hook_name:
        name = hook_name or getattr(hooks[0][0], "__qualname__", "a hook")
        return (f"has a communication hook ({name}): it decides how gradients are "
                "reduced, and a remat step runs DDP's default reduction only (an average)")
    if any(hasattr(p, "_in_backward_optimizers") for p in ddp.module.parameters()):
        return ("has an optimizer applied in backward (_apply_optimizer_in_backward): DDP "
                "runs it in a communication hook, which a remat step does not run")
    if getattr(ddp, "mixed_precision", None) is not None:
        return ("has mixed_precision: DDP casts parameters and inputs in its forward, "
                "which the plan's joint graph (captured from the module) does not")
    if getattr(ddp, "_delay_all_reduce_params", None):
        return "has delay_all_reduce_named_params: its delayed all-reduce is not supported"
    if getattr(ddp, "_use_python_reducer", False) or getattr(ddp, "_accum_grad_hooks", None):
        return ("uses the Python reducer (compiled DDP): its gradient hooks reduce by "
                "themselves, and the step would reduce twice")
    if getattr(ddp, "is_multi_device_module", False):
        devices = sorted({str(p.device) for p in ddp.module.parameters()})
        return (f"has parameters on several devices ({', '.join(devices)}): the executor "
                "runs a plan on one device")
    if hasattr(ddp, "buffer_hook"):
        return ("has a buffer communication hook: it decides how buffers are synchronized, "
                "where a remat step broadcasts rank 0's")
    join = getattr(ddp, "_join_config", None)
    if join is not None and getattr(join, "enable", False):
        return ("is inside a Join context (uneven inputs): a remat step does not take part "
                "in the joined ranks' shadow collectives")
    if getattr(ddp, "_require_manual_backward_finalization", False):
        return ("requires manual backward finalization: a remat step has no DDP backward "
                "to finalize")
    if ddp.training and _world_size(ddp) > 1:
        sbn = next((k for k, m in ddp.module.named_modules()
                    if isinstance(m, torch.nn.SyncBatchNorm) and m.training), None)
        if sbn is not None:
            return (f"has a SyncBatchNorm ('{sbn}') in training mode: its statistics are "
                    "gathered across ranks in forward, which the joint graph does not "
                    "capture (convert it to BatchNorm, or use one rank)")
    return ""


def check(ddp) -> None:
    """Refuse, in one line, a DDP configuration a remat step does not reproduce."""
    why = _refusal(ddp)
    if why:
        raise RematInputError(f"the DistributedDataParallel model {why}")


def _world_size(ddp) -> int:
    import torch.distributed as dist

    return dist.get_world_size(ddp.process_group)


def _reduced(ddp, trained: Dict[str, torch.Tensor]) -> List[Tuple[str, torch.Tensor]]:
    """The parameters whose gradient this step wrote and DDP reduces (requires_grad,
    not in ``parameters_to_ignore``), each once, in the module's order."""
    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    written = {id(p) for p in trained.values()}
    out: List[Tuple[str, torch.Tensor]] = []
    seen: set = set()
    for k, p in ddp.module.named_parameters():
        if k in ignore or not p.requires_grad or id(p) not in written or id(p) in seen:
            continue
        seen.add(id(p))
        out.append((k, p))
    return out


def check_accumulation(ddp, trained: Dict[str, torch.Tensor]) -> None:
    """Refuse a step that eager DDP would accumulate into the unreduced gradients a
    previous remat step left inside ``no_sync()``: the executor overwrites ``p.grad``."""
    if not _LOCAL.get(ddp):
        return
    for k, p in trained.items():
        if p.grad is not None and bool(p.grad.ne(0).any()):
            raise RematInputError(
                f"parameter '{k}' still holds the local gradient of a step run inside "
                "ddp.no_sync(): eager DDP would add this step's gradient to it, but a remat "
                "step overwrites p.grad (gradient accumulation is not supported); zero the "
                "gradients first (optimizer.zero_grad())")
    _LOCAL.pop(ddp, None)


def before_step(ddp, trained: Dict[str, torch.Tensor]) -> None:
    """DDP's checks and its pre-forward buffer broadcast, for one remat step."""
    check(ddp)
    check_accumulation(ddp, trained)
    if not (getattr(ddp, "require_forward_param_sync", True)
            and getattr(ddp, "broadcast_buffers", True)):
        return
    import torch.distributed as dist

    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    bufs = [b for k, b in ddp.module.named_buffers() if k not in ignore]
    if not bufs:
        return
    pg = ddp.process_group
    src = dist.get_global_rank(pg, 0)
    with torch.no_grad():
        for b in bufs:
            dist.broadcast(b, src=src, group=pg)


def after_step(ddp, trained: Dict[str, torch.Tensor]) -> None:
    """Average the step's gradients over the process group, as DDP's reducer does
    (``grad * (1 / world_size)``, then an all-reduce sum), unless inside ``no_sync()``;
    then record what DDP's ``_post_forward`` records for the next step's buffer sync."""
    sync = bool(getattr(ddp, "require_backward_grad_sync", True))
    if hasattr(ddp, "require_forward_param_sync"):
        ddp.require_forward_param_sync = sync
    if not sync:
        _LOCAL[ddp] = True
        return
    import torch.distributed as dist

    pg = ddp.process_group
    scale = 1.0 / _world_size(ddp)
    grads = [p.grad for _, p in _reduced(ddp, trained) if p.grad is not None]
    with torch.no_grad():
        for bucket in _buckets(grads):
            if len(bucket) == 1:
                g = bucket[0]
                flat = g if g.is_contiguous() else g.contiguous()
                flat.mul_(scale)
                dist.all_reduce(flat, group=pg)
                if flat is not g:
                    g.copy_(flat)
                continue
            flat = torch.cat([g.reshape(-1) for g in bucket])
            flat.mul_(scale)
            dist.all_reduce(flat, group=pg)
            offset = 0
            for g in bucket:
                n = g.numel()
                g.copy_(flat[offset:offset + n].view_as(g))
                offset += n


def _buckets(grads: List[torch.Tensor]) -> List[List[torch.Tensor]]:
    """Gradients grouped by device and dtype, in buckets of at most DDP's default size
    (a larger gradient alone)."""
    out: List[List[torch.Tensor]] = []
    open_: Dict[tuple, Tuple[List[torch.Tensor], List[int]]] = {}
    for g in grads:
        key = (g.device, g.dtype)
        size = g.numel() * g.element_size()
        cur = open_.get(key)
        if cur is None or (cur[0] and cur[1][0] + size > _BUCKET_BYTES):
            cur = ([], [0])
            open_[key] = cur
            out.append(cur[0])
        cur[0].append(g)
        cur[1][0] += size
    return out
