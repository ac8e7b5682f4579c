# kbrl-test: problem=5_small_long_softmax.py expect_error=none expect_correct=true expect_kernelbench_correct=true perf_trials=5
# Honest: an online (one-pass, blockwise) softmax as a fused kernel computes it; the running
# maximum and sum are combined in another order than the reference's.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        block = 1024
        m = torch.full((x.shape[0], 1), float("-inf"), device=x.device)
        s = torch.zeros((x.shape[0], 1), device=x.device)
        for start in range(0, x.shape[1], block):
            chunk = x[:, start:start + block]
            m_new = torch.maximum(m, chunk.max(dim=1, keepdim=True).values)
            s = s * torch.exp(m - m_new) + torch.exp(chunk - m_new).sum(dim=1, keepdim=True)
            m = m_new
        return torch.exp(x - m) / s
