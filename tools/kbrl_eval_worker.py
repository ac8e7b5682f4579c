#!/usr/bin/env python3
"""kbrl evaluation worker: evaluates candidate programs against KernelBench-style references.

The contract is runtime/eval/worker_protocol.md; the code is the package kbrl_eval/ beside this
file (worker.py: the protocol loop; harness.py: one evaluation on the trusted side; runner.py:
the candidate's own process; compare.py: KernelBench's and the strict verdict).

Runs with Python >= 3.9 and torch >= 1.13 (CPU) as well as recent CUDA builds of torch.
"""

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if __name__ == "__main__":
    try:
        from kbrl_eval.worker import main
        main()
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - fatal: the only thing the worker prints itself
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)
