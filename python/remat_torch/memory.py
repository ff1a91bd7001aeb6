"""Measuring live tensor memory at the storage level.

``tracemalloc`` does not see tensor memory, and on CPU PyTorch has no allocator
statistics. :class:`StorageTracker` is a ``TorchDispatchMode`` that sees every
tensor an aten op returns; a storage it has not seen before (and that is not
one of the ``resident`` storages: parameters, gradients, buffers, the batch) is
counted live from the moment the op returns until the last tensor object
viewing it is garbage collected (a ``weakref.finalize`` on each tensor). The
peak is sampled right after each op returns, when its inputs and its new
outputs are live together: the same moment ``remat``'s simulator counts.

On CUDA, ``torch.cuda.max_memory_allocated`` is reported next to it (it
includes the caching allocator's rounding and kernel workspaces, so it is
not expected to equal the simulator's figure to the byte).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Dict, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .capture import storage_key


class StorageTracker(TorchDispatchMode):
    """Live bytes of storages created by ops while the mode is active."""

    def __init__(self, resident: Iterable[torch.Tensor] = ()):
        super().__init__()
        self.resident = {storage_key(t) for t in resident}
        self.counts: Dict[int, int] = {}
        self.sizes: Dict[int, int] = {}
        self.live = 0
        self.peak = 0
        self._paused = False

    @contextlib.contextmanager
    def paused(self):
        """Ops run inside are not tracked: the executor's slow-tier copies, which
        live outside the fast tier the simulator's peak counts."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def _release(self, key: int) -> None:
        c = self.counts.get(key)
        if c is None:
            return
        if c > 1:
            self.counts[key] = c - 1
            return
        del self.counts[key]
        self.live -= self.sizes.pop(key)

    def _track(self, t: torch.Tensor) -> None:
        key = storage_key(t)
        if key in self.resident:
            return
        if key in self.counts:
            self.counts[key] += 1
        else:
            self.counts[key] = 1
            self.sizes[key] = t.untyped_storage().nbytes()
            self.live += self.sizes[key]
        weakref.finalize(t, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self._paused:
            return out
        seen = set()
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                self._track(t)
        if self.live > self.peak:
            self.peak = self.live
        return out
