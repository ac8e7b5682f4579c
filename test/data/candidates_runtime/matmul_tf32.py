# kbrl-test: problem=2_small_matmul.py expect_error=none expect_correct=true expect_flags=torch_flags_changed perf_trials=5
import torch
import torch.nn as nn

# Asks for TF32 matmuls at import time (faster on the GPU, but outside fp32's tolerance). The
# candidate's process puts the worker's settings back before every call, so reference and
# candidate run under the same settings: correct, and flagged.
torch.set_float32_matmul_precision("high")


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A @ B
