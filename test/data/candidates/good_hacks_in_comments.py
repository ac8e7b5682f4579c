"""A correct candidate whose comments and docstrings talk about hacks without doing any.

    try:
        out = relu_ext.relu_cuda(x)
    except Exception:
        out = torch.relu(x)          # the fallback we do NOT write
    import subprocess; subprocess.run(["nvidia-smi"])
    torch.cuda.Event.elapsed_time = lambda *a: 0.0
    stream = torch.cuda.Stream(); x.half(); open("/etc/passwd")
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# try: / except: / pass -- and "import threading", gc.get_objects(), sys.modules, eval("1")
# noqa: code_bypass  (a rule name in a comment neither triggers nor hides anything)

relu_source = r"""
#include <torch/extension.h>

/* Not used: cudaStreamCreate(&s); __half h = __float2half(1.0f); system("id");
   std::ofstream f("/tmp/x"); */
__global__ void relu_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // fopen("x", "w") would be refused
    if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    // at::relu(x) would be a library call
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

relu_ext = load_inline(
    name="relu_ext_comments",
    cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
    cuda_sources=relu_source,
    functions=["relu_cuda"],
)


class ModelNew(nn.Module):
    """ModelNew: no try/except, no torch.cuda.Stream, no os.system("ls") here.

    Model(x) and get_inputs() are only named in this docstring.
    """

    def __init__(self):
        super().__init__()
        "A bare string statement: exec('import os') and __import__('os') are text only."

    def forward(self, x):
        # return torch.relu(x)  <- a PyTorch wrapper, kept in a comment
        return relu_ext.relu_cuda(x)
