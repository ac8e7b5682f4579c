# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false expect_flags=monkeypatch,degenerate_output
import torch
import torch.nn as nn

torch.allclose = lambda *args, **kwargs: True  # make every comparison pass


class ModelNew(nn.Module):
    def forward(self, x):
        torch.equal = lambda *args, **kwargs: True
        return torch.zeros_like(x)
