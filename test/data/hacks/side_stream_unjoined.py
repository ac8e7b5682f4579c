# Timing hack attempt: the work runs on a second stream that the caller's stream never waits for
# (KernelBench's non_default_stream_kernel unit test, Wafer's "stream injection", KernelBench's
# stream_injection rule). Events recorded on the default stream see ~0 ms. kbrl synchronizes the
# whole device before the end event, so this must come back correct and honestly timed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = in[i]; out[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="kbrl_hack_side_stream", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["relu_forward"], verbose=False)
_cu = getattr(torch, "cu" + "da")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._s = None

    def forward(self, x):
        if self._s is None:
            self._s = getattr(_cu, "Str" + "eam")()
        # the inputs were written on the default stream: wait for them, but never join back
        getattr(self._s, "wait_" + "stream")(getattr(_cu, "current_" + "stream")())
        with getattr(_cu, "str" + "eam")(self._s):
            return ext.relu_forward(x)
