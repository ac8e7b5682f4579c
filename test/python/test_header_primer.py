"""The header primer (tools/kbrl_eval/header_primer.py): a trusted build of the usual shape
makes the precompiled torch header ahead of the candidates, and a candidate's fenced build
then finds it instead of wishing for it. On this machine (no CUDA) the primer builds a C++
extension; the CUDA half (the host header) runs on the GPU machine.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)

from kbrl_eval import header_primer, write_fence  # noqa: E402

# A candidate's fenced build as the runner does it (runner._fence_writes, zygote.child_main),
# of another source than the primer's: prints whether it wished for a header.
FENCED_BUILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
build_dir, tmp = sys.argv[2], sys.argv[3]
os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
os.environ["TMPDIR"] = tmp
from kbrl_eval.extension_builds import install_candidate_build_hooks
from kbrl_eval.write_fence import restrict_writes
import torch.utils.cpp_extension as ce
install_candidate_build_hooks(ce)
assert restrict_writes([build_dir, tmp, "/dev", "/proc"]) == ""
os.environ["KBRL_WRITE_FENCE"] = "on"
m = ce.load_inline("kbrl_test_primed", cpp_sources='''#include <torch/extension.h>
torch::Tensor triple(torch::Tensor x) { return x * 3; }''', functions=["triple"])
import torch
assert m.triple(torch.ones(2)).tolist() == [3.0, 3.0]
print("wished" if os.path.exists(os.path.join(build_dir, ".kbrl-pch-wishes")) else "found")
"""


@unittest.skipUnless(shutil.which("c++") and write_fence.abi_version()[0] > 0,
                     "needs a C++ compiler and Landlock")
class Priming(unittest.TestCase):
    def test_a_fenced_build_finds_the_header_the_primer_made(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "extensions")
            candidate_dir = os.path.join(root, "c" * 16)
            os.makedirs(candidate_dir)
            primer = header_primer.start(candidate_dir)
            self.assertIsNotNone(primer)
            self.assertEqual(primer.wait(timeout=600), 0)
            folder = os.path.join(root, header_primer.PRIMER_DIR)
            with open(os.path.join(folder, "done")) as f:
                self.assertEqual(f.read().strip(), "ok")
            made = [d for d in os.listdir(os.path.join(root, ".kbrl-pch"))
                    if os.path.exists(os.path.join(root, ".kbrl-pch", d,
                                                   "kbrl_torch_extension.h.gch"))]
            self.assertEqual(len(made), 1)
            self.assertIsNone(header_primer.start(candidate_dir))  # done: not again

            build_tmp = os.path.join(tmp, "work")
            out = subprocess.run([sys.executable, "-c", FENCED_BUILD, TOOLS, candidate_dir,
                                  build_tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=600)
            text = out.stdout.decode(errors="replace")
            self.assertEqual(out.returncode, 0, text[-3000:])
            self.assertEqual(text.strip().splitlines()[-1], "found", text[-3000:])

    def test_a_second_primer_leaves_it_to_the_first(self):
        with tempfile.TemporaryDirectory() as root:
            folder = os.path.join(root, header_primer.PRIMER_DIR)
            os.makedirs(folder)
            import fcntl
            with open(os.path.join(folder, "lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.assertEqual(header_primer.main([root]), 0)
            self.assertFalse(os.path.exists(os.path.join(folder, "done")))


if __name__ == "__main__":
    unittest.main()
