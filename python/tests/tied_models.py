"""Factories with tied (shared) parameters, for test_tied.py.

FN(batch) -> (model, batch_tuple, loss_fn), as python/examples/models.py.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, SEQ = 50, 16, 8


class TiedNet(nn.Module):
    """A small language model whose embedding is shared by three modules (the input
    embedding and two output heads, by attribute assignment), and whose ``proj`` layer
    is reused at three places of a ``ModuleList`` (one module under several names)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList([self.proj, nn.Linear(DIM, DIM), self.proj])
        self.drop = nn.Dropout(0.1)
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.aux = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.aux.weight = self.emb.weight  # tied a third time

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = x + self.drop(torch.tanh(b(x)))
        x = self.ln(x)
        return self.head(x) + 0.5 * self.aux(torch.relu(x))


def _lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def tied_net(batch_size: int):
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ))
    targets = torch.randint(0, VOCAB, (batch_size, SEQ))
    return TiedNet(), (tokens, targets), _lm_loss


class UntiedNet(TiedNet):
    """TiedNet with its own head weights (the same graph, more parameters)."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.aux = nn.Linear(DIM, VOCAB, bias=False)


def untied_net(batch_size: int):
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ))
    targets = torch.randint(0, VOCAB, (batch_size, SEQ))
    return UntiedNet(), (tokens, targets), _lm_loss


class SharedBN(nn.Module):
    """One BatchNorm module applied twice (also reachable as ``layers.0``): its
    parameters are shared and its running statistics advance twice per step."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.layers = nn.ModuleList([self.bn])
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = torch.relu(self.layers[0](self.c2(x)))
        return self.fc(x.mean((2, 3)))


def shared_bn(batch_size: int):
    torch.manual_seed(0)
    x = torch.randn(batch_size, 3, 8, 8)
    y = torch.randint(0, 10, (batch_size,))
    return SharedBN(), (x, y), F.cross_entropy
