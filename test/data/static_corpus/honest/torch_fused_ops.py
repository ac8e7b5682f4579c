# Honest torch backend: PyTorch ops fused by hand, contiguity and empty_like, a class Model copy
# kept from the prompt, and the usual demo block.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return F.gelu(x) * 2.0


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        torch.mul(F.gelu(x), 2.0, out=out)
        return out


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return []


if __name__ == "__main__":
    m = ModelNew()
    print(m(*get_inputs()).shape)
