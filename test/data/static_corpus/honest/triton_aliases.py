# Honest Triton written with aliases: from-imports and a module alias.
import torch
from torch import nn
import triton as tr
from triton import language as tl
from triton import cdiv


@tr.jit
def add_kernel(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        n = out.numel()
        grid = lambda meta: (cdiv(n, meta["BLOCK"]),)
        add_kernel[grid](a, b, out, n, BLOCK=1024)
        return out
