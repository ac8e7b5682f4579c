# Right values, wrong dtype: the ReLU is returned in float64 (exact, every value right), which a
# checker that compares values only (allclose after promotion, or numpy) accepts. The output is not
# what the model returns (float32), so it must be refused.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x.to(getattr(torch, "float" + "64")), 0.0)
