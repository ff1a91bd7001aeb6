"""remat_torch: the PyTorch bridge of remat.

* :func:`remat_torch.capture.capture` - the joint forward+backward graph of a model;
* :func:`remat_torch.graphfile.export` - a ``graph: training`` file for ``remat solve``;
* :class:`remat_torch.executor.Executor` / :func:`train_step` - run a plan as a training step;
* ``python -m remat_torch export|verify|train|from-onnx`` - the command line.

See docs/pytorch.md.
"""

__version__ = "0.1.0"

from .executor import Executor, train_step  # noqa: E402

__all__ = ["Executor", "train_step", "__version__"]
