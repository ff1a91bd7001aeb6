"""Example factories for remat_torch (see docs/pytorch.md for the convention).

Each factory takes the batch size and returns ``(model, batch, loss_fn)``:
the model is called as ``model(batch[0])`` and the loss is
``loss_fn(output, *batch[1:])``. Models are randomly initialised (no download).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(batch_size: int):
    """A 3-layer MLP with ReLU, cross-entropy loss."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )
    x = torch.randn(batch_size, 64)
    y = torch.randint(0, 10, (batch_size,))
    return model, (x, y), F.cross_entropy


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = x.mean(dim=(2, 3))
        return self.fc(x)


def cnn(batch_size: int):
    """Two conv + BatchNorm + ReLU blocks on 16x16 images, cross-entropy loss."""
    torch.manual_seed(0)
    model = SmallCNN()
    x = torch.randn(batch_size, 3, 16, 16)
    y = torch.randint(0, 10, (batch_size,))
    return model, (x, y), F.cross_entropy


class Block(nn.Module):
    """A pre-norm transformer block: attention and a GELU MLP, with dropout."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.drop(self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop(self.mlp(self.ln2(x)))


class TinyTransformer(nn.Module):
    """A token embedding, learned positions, ``depth`` blocks, and a language-model head."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, depth: int = 2,
                 seq: int = 16, dropout: float = 0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, dropout) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos
        return self.head(self.ln(self.blocks(x)))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def transformer(batch_size: int):
    """A 2-block transformer language model with dropout 0.1 (sequence 16, width 32)."""
    torch.manual_seed(0)
    model = TinyTransformer()
    tokens = torch.randint(0, 64, (batch_size, 16))
    targets = torch.randint(0, 64, (batch_size, 16))
    return model, (tokens, targets), lm_loss


def block(batch_size: int):
    """One transformer block (width 64, 4 heads, dropout 0.1) under a mean-square loss."""
    torch.manual_seed(0)
    model = Block(64, 4, 0.1)
    x = torch.randn(batch_size, 16, 64)
    target = torch.randn(batch_size, 16, 64)
    return model, (x, target), F.mse_loss


def resnet18(batch_size: int):
    """torchvision's resnet18, random init (no weights download), 32x32 images."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    x = torch.randn(batch_size, 3, 32, 32)
    y = torch.randint(0, 10, (batch_size,))
    return model, (x, y), F.cross_entropy
