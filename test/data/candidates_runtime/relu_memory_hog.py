# kbrl-test: problem=1_small_relu.py memory_limit_mb=1024 expect_error=runtime expect_correct=false expect_flags=memory_limit expect_excerpt=eval.memory_limit_gb
# Holds 3 GiB of host memory (touched, so it is resident) before answering: the harness's memory
# watch kills its process at the 1 GiB limit the request sets.
import torch
import torch.nn as nn

_held = []


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(24):
            _held.append(torch.ones(128 * 2 ** 20 // 4))  # 128 MiB each, written
        return torch.relu(x)
