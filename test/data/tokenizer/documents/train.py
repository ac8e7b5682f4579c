"""Fine-tune a policy on kernel-writing tasks.

Usage:  python train.py --steps 1000 --lr 3e-5
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    steps: int = 1_000
    lr: float = 3e-5
    warmup: int = 100
    betas: tuple[float, float] = (0.9, 0.95)
    tags: list[str] = field(default_factory=lambda: ["rl", "cuda"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # SwiGLU-ish: keep it simple for the test corpus
        h = F.silu(self.up(x)) * self.up(x)
        return self.down(h)


def lr_at(step: int, cfg: Config) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return 0.5 * cfg.lr * (1.0 + math.cos(math.pi * progress))


def batches(data: Iterable[torch.Tensor], size: int):
    buf = []
    for item in data:
        buf.append(item)
        if len(buf) == size:
            yield torch.stack(buf)
            buf.clear()
    if buf:
        yield torch.stack(buf)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=3e-5)
    args = p.parse_args()
    cfg = Config(steps=args.steps, lr=args.lr)
    model = ModelNew(64, 256)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas)
    for step in range(cfg.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        x = torch.randn(8, 64)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step:>5d}  loss {loss.item():.4f}  lr {g['lr']:.2e}")


if __name__ == "__main__":
    main()
