# Honest Triton: autotuned softmax, imports guarded, a warm-up synchronize in setup code.
import math

import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False


@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8)],
    key=["n_cols"],
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.is_contiguous()
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.stride(0), x.shape[1])
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.cuda.synchronize()  # setup only: make sure the device is up before timing
        self.scale = 1.0 / math.sqrt(1.0)

    def forward(self, x):
        return softmax(x.contiguous())
