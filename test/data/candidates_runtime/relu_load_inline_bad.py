# kbrl-test: problem=1_small_relu.py expect_error=compile expect_correct=false expect_compiled=false timeout_s=600
# A C++ extension that does not compile: the excerpt must keep the compiler's error lines.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
        out[i] = undeclared_helper(x, i);   // error: not declared
    return y
}
"""

relu_ext = load_inline(
    name="kbrl_test_relu_cpu_bad",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
