# Honest CUTLASS Python DSL (CuTe DSL): a jitted elementwise kernel.
import torch
import torch.nn as nn
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    if i < cute.size(gA):
        gC[i] = gA[i] + gB[i]


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    n = cute.size(mA)
    add_kernel(mA, mB, mC).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1))


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        add(from_dlpack(a.reshape(-1)), from_dlpack(b.reshape(-1)), from_dlpack(c.reshape(-1)))
        return c
