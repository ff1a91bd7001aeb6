"""Loading a model factory named ``MODULE.py:FACTORY``.

The factory convention (see docs/pytorch.md):

``FACTORY(batch_size: int) -> (model, batch, loss_fn)``

* ``model`` is an ``nn.Module``; it is put in training mode;
* ``batch`` is a tuple of tensors; the model is called as ``model(batch[0])``;
* ``loss_fn(output, *batch[1:])`` returns a scalar tensor, the loss.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable, Tuple

import torch

from .errors import RematInputError, quote_error

Factory = Callable[[int], Tuple[torch.nn.Module, Tuple[torch.Tensor, ...], Callable[..., Any]]]


_LOADED: dict = {}  # (path, mtime, size) -> the module executed from that file


def _exec_file(path: str):
    mod_name = "_remat_factory_" + os.path.splitext(os.path.basename(path))[0]
    loader_spec = importlib.util.spec_from_file_location(mod_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise RematInputError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - user code: report in one line
        raise RematInputError(f"{path}: import failed: {quote_error(e)}") from e
    except SystemExit as e:
        raise RematInputError(f"{path}: importing it called {_exit_call(e)}") from e
    return module


def _exit_call(e: SystemExit) -> str:
    return "sys.exit()" if e.code is None else f"sys.exit({e.code!r})"


def load_factory(spec: str) -> Factory:
    """Resolve ``path/to/module.py:factory`` (or ``package.module:factory``)."""
    if ":" not in spec:
        raise RematInputError(f"{spec}: expected MODULE.py:FACTORY (a file and a function name)")
    path, _, name = spec.rpartition(":")
    if path.endswith(".py") or os.sep in path:
        if not os.path.isfile(path):
            raise RematInputError(f"{path}: no such file")
        # a file is executed once per process (per version of it): verify and train call
        # the factory several times, and a module that registers something (a
        # torch.library custom op) fails when executed again
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
        module = _LOADED.get(key)
        if module is None:
            module = _exec_file(path)
            _LOADED[key] = module
    else:
        try:
            module = importlib.import_module(path)
        except Exception as e:  # noqa: BLE001
            raise RematInputError(f"{path}: import failed: {quote_error(e)}") from e
        except SystemExit as e:
            raise RematInputError(f"{path}: importing it called {_exit_call(e)}") from e
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise RematInputError(f"{path}: no factory function named '{name}'")
    return fn


def call_factory(spec: str, batch_size: int):
    """Call the factory and check what it returns: (model, batch tuple, loss_fn)."""
    fn = load_factory(spec)
    path = spec.rpartition(":")[0]
    try:
        result = fn(batch_size)
    except Exception as e:  # noqa: BLE001
        raise RematInputError(f"{path}: factory failed: {quote_error(e)}") from e
    except SystemExit as e:
        # not an Exception: it went past every handler, and the command exited with the
        # factory's code and no word (exit 3 and an empty stderr)
        raise RematInputError(f"{path}: {spec.rpartition(':')[2]}: the factory called "
                              f"{_exit_call(e)}") from e
    if not (isinstance(result, tuple) and len(result) == 3):
        raise RematInputError(f"{path}: the factory must return (model, batch, loss_fn)")
    model, batch, loss_fn = result
    if not isinstance(model, torch.nn.Module):
        raise RematInputError(f"{path}: the factory's model is not an nn.Module")
    if isinstance(batch, torch.Tensor):
        batch = (batch,)
    ok = isinstance(batch, (tuple, list)) and batch
    if not (ok and all(isinstance(t, torch.Tensor) for t in batch)):
        raise RematInputError(f"{path}: the factory's batch must be a non-empty tuple of tensors")
    if not callable(loss_fn):
        raise RematInputError(f"{path}: the factory's loss_fn is not callable")
    model.train()
    return model, tuple(batch), loss_fn
