# kbrl-test: problem=1_small_relu.py requires=cpu backend=cuda expect_error=none expect_correct=true perf_trials=10 timeout_s=600
# A C++ (CPU) extension through torch.utils.cpp_extension.load_inline: needs a C++ compiler, ninja
# and the pybind11 headers (Debian: pybind11-dev; pip torch wheels ship their own).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: CPU tensors only");
    auto xc = x.contiguous().to(torch::kFloat32);
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i)
        out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return y.to(x.scalar_type());
}
"""

relu_ext = load_inline(
    name="kbrl_test_relu_cpu",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
