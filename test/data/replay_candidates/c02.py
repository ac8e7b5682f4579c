import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Grid-stride ReLU. A ``` in a comment must not end the code block.
cuda_src = "#include <torch/extension.h>\n" + """
__global__ void relu_gs(const float* x, float* y, long n) {
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor relu_gs_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_gs<<<1024, 512>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

ext = load_inline(name="replay_fixture_c02_relu", cpp_sources="torch::Tensor relu_gs_forward(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_gs_forward"])   


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_gs_forward(x)


