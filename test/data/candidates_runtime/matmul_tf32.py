# kbrl-test: problem=2_small_matmul.py expect_error=none expect_correct=true expect_flags=torch_flags_changed perf_trials=5
# kbrl-test: expect_error_cuda=mismatch expect_correct_cuda=false
import torch
import torch.nn as nn

# TF32 matmuls on the GPU: faster, but outside fp32's 1e-4 tolerance. The reference keeps full
# fp32 (the worker restores the setting for it), so this fails on CUDA; CPU ignores the setting.
torch.set_float32_matmul_precision("high")


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A @ B
