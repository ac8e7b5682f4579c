# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=none expect_correct=true perf_trials=20
# Does its work on a side stream and returns without making the current stream wait: the
# worker's device-wide synchronize must still wait for it (and time it).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        y = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(50):  # make it slow enough to matter
                torch.clamp_min(x, 0.0, out=y)
        return y
