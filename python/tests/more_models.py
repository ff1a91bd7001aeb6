"""Factories for test_more_models.py: patterns the examples do not have, each one a
bridge failure once (see the test that uses it).

FN(batch) -> (model, batch_tuple, loss_fn), as python/examples/models.py.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class ShiftMask(nn.Module):
    """Attention whose additive mask is written into slices of a zero tensor, as
    torchvision's swin_t builds its shifted-window masks (``mask[h0:h1, w0:w1] = k``):
    functionalized, each write is a ``slice_scatter``/``select_scatter`` whose input is
    a view of the mask."""

    N, DIM = 12, 16

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(self.DIM, self.DIM)
        self.k = nn.Linear(self.DIM, self.DIM)
        self.out = nn.Linear(self.DIM, 3)

    def forward(self, x):
        n = self.N
        mask = x.new_zeros(n, n)
        mask[: n // 2, n // 2:] = 1.0
        mask[n // 2:, : n // 3] = 2.0
        mask[n - 1, 1:] = 3.0
        att = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2) - 5.0 * mask.ne(0), dim=-1)
        return self.out((att @ x).mean(1))


def shift_mask(batch_size: int):
    torch.manual_seed(0)
    x = torch.randn(batch_size, ShiftMask.N, ShiftMask.DIM)
    return ShiftMask(), (x, torch.randint(0, 3, (batch_size,))), F.cross_entropy


_OFFSET = torch.linspace(-1.0, 1.0, 8)  # a global tensor the forward reads


class ConstantTensors(nn.Module):
    """A plain tensor attribute (not a registered buffer) and a global tensor, both read
    by the forward (and, through the multiplication, by the backward)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.scale = torch.linspace(0.5, 1.5, 16)  # not a buffer
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.fc(x + _OFFSET)) * self.scale)


def constant_tensors(batch_size: int):
    torch.manual_seed(0)
    x = torch.randn(batch_size, 8)
    return ConstantTensors(), (x, torch.randint(0, 3, (batch_size,))), F.cross_entropy


def spectral_norms(batch_size: int):
    """torch.nn.utils.parametrizations' spectral_norm (power iteration on buffers ``_u``
    and ``_v``, updated in place each training step, that the normalized weight reads)
    and weight_norm."""
    from torch.nn.utils import parametrizations as P

    torch.manual_seed(0)
    model = nn.Sequential(P.spectral_norm(nn.Linear(6, 8)), nn.ReLU(),
                          P.weight_norm(nn.Linear(8, 3)))
    return model, (torch.randn(batch_size, 6), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


def hooked_spectral_norm(batch_size: int):
    """The old torch.nn.utils.spectral_norm: a forward pre-hook assigns ``module.weight``
    (a plain attribute, not a parameter) on every call."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.utils.spectral_norm(nn.Conv2d(3, 4, 3, padding=1)), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    return model, (torch.randn(batch_size, 3, 6, 6), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


class LSTMHead(nn.Module):
    """A 2-layer batch-first LSTM and a linear head on its last step."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, num_layers=2, batch_first=True)
        self.out = nn.Linear(4, 3)

    def forward(self, x):
        o, _ = self.rnn(x)
        return self.out(o[:, -1])


def lstm(batch_size: int):
    torch.manual_seed(0)
    return LSTMHead(), (torch.randn(batch_size, 3, 3), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


class MaskedTransformer(nn.Module):
    """nn.Transformer (encoder-decoder) with a causal target mask: ``causal`` says whether
    ``tgt_is_causal=True`` comes with the mask."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal
        self.tr = nn.Transformer(8, 2, 1, 1, 16, dropout=0.1, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        src, tgt = x[:, :3], x[:, 3:]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        kw = {"tgt_is_causal": True} if self.causal else {}
        return self.out(self.tr(src, tgt, tgt_mask=mask, **kw).mean(1))


def transformer_mask(batch_size: int):
    torch.manual_seed(0)
    return MaskedTransformer(False), (torch.randn(batch_size, 6, 8),
                                      torch.randint(0, 3, (batch_size,))), F.cross_entropy


def transformer_causal(batch_size: int):
    torch.manual_seed(0)
    return MaskedTransformer(True), (torch.randn(batch_size, 6, 8),
                                     torch.randint(0, 3, (batch_size,))), F.cross_entropy


def weight_decay_loss(batch_size: int):
    """A loss of two terms, the second closing over the model: cross-entropy plus an L2
    penalty on every parameter."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 3))

    def loss_fn(out, y):
        return F.cross_entropy(out, y) + 1e-3 * sum(p.pow(2).sum() for p in model.parameters())

    return model, (torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))), loss_fn


def scripted(batch_size: int):
    """A TorchScript submodule (torch.jit.script) inside an eager model."""
    import warnings

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script is deprecated
        first = torch.jit.script(nn.Linear(8, 64))
    model = nn.Sequential(first, nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))
    return model, (torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


class Linalg(nn.Module):
    """torch.linalg.solve and inv (which check their result with ``_linalg_check_errors``,
    an op AOTAutograd threads an effect token through), slogdet and eigvalsh."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 16)
        self.c = nn.Linear(4, 3)

    def forward(self, x):
        m = self.a(x).view(-1, 4, 4)
        m = m @ m.transpose(1, 2) + torch.eye(4)
        s = torch.linalg.solve(m, torch.ones(4)) + torch.linalg.inv(m).sum(1)
        return self.c(s + torch.linalg.slogdet(m)[1][:, None] + torch.linalg.eigvalsh(m))


def linalg(batch_size: int):
    torch.manual_seed(0)
    return Linalg(), (torch.randn(batch_size, 4), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


class CausalEncoder(nn.Module):
    """A pre-norm, causal nn.TransformerEncoder (batch first, dropout) and a cross
    attention with other key/value widths."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.mha = nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        t = x.shape[1]
        h = self.enc(x, mask=nn.Transformer.generate_square_subsequent_mask(t), is_causal=True)
        kv = x[..., :4]
        a, _ = self.mha(h, kv, kv, attn_mask=torch.zeros(t, t), need_weights=False)
        return self.out(a.mean(1))


def causal_encoder(batch_size: int):
    torch.manual_seed(0)
    return CausalEncoder(), (torch.randn(batch_size, 5, 8),
                             torch.randint(0, 3, (batch_size,))), F.cross_entropy


class Bags(nn.Module):
    """nn.EmbeddingBag in its three modes over token ids (2-D input: fixed-size bags)."""

    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(30, 16, mode=m) for m in ("mean", "max", "sum"))
        self.out = nn.Linear(16, 3)

    def forward(self, tok):
        return self.out(sum(torch.tanh(b(tok)) for b in self.bags))


def embedding_bag(batch_size: int):
    torch.manual_seed(0)
    return Bags(), (torch.randint(0, 30, (batch_size, 6)), torch.randint(0, 3, (batch_size,))), \
        F.cross_entropy


class Unfold(nn.Module):
    """F.unfold (im2col) after a convolution: its backward is ``aten.col2im``."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, padding=1)
        self.l = nn.Linear(6 * 4, 2)

    def forward(self, x):
        p = F.unfold(torch.relu(self.c(x)), 2)
        return self.l(torch.tanh(p).mean(2))


def unfold(batch_size: int):
    torch.manual_seed(0)
    return Unfold(), (torch.randn(batch_size, 3, 8, 8),
                      torch.randint(0, 2, (batch_size,))), F.cross_entropy


class AutocastNorm(nn.Module):
    """LayerNorm under CPU bf16 autocast: a bf16 input with fp32 weights."""

    def __init__(self):
        super().__init__()
        self.l1, self.ln, self.l2 = nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.l2(torch.tanh(self.ln(torch.tanh(self.l1(x))))).float()


def autocast_norm(batch_size: int):
    torch.manual_seed(0)
    return AutocastNorm(), (torch.randn(batch_size, 8),
                            torch.randint(0, 4, (batch_size,))), F.cross_entropy
