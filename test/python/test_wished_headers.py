"""A fenced candidate build that misses the precompiled torch header wishes for it and compiles
without it; the worker's trusted maker makes it from the wish (pch_maker.collecting around the
build, as worker.headers_wished does), and the next fenced build with those flags uses it. With
no worker looking at its wishes no header is made. The CUDA half (nvcc's host header) runs on
the GPU machine.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)

from kbrl_eval import pch_maker, write_fence  # noqa: E402

# A candidate's fenced build as the runner does it (runner._fence_writes, zygote.child_main):
# prints whether main.cpp's compile included the precompiled header.
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
name = sys.argv[4]
m = ce.load_inline(name, cpp_sources='''#include <torch/extension.h>
torch::Tensor triple(torch::Tensor x) { return x * 3; }''', functions=["triple"])
import torch
assert m.triple(torch.ones(2)).tolist() == [3.0, 3.0]
with open(os.path.join(build_dir, name, "build.ninja")) as f:
    print("with header" if "kbrl_torch_extension.h" in f.read() else "without header")
"""


@unittest.skipUnless(shutil.which("c++") and write_fence.abi_version()[0] > 0,
                     "needs a C++ compiler and Landlock")
class WishedHeaders(unittest.TestCase):
    def fenced_build(self, tmp, candidate_dir, name="kbrl_test_wished"):
        out = subprocess.run([sys.executable, "-c", FENCED_BUILD, TOOLS, candidate_dir,
                              os.path.join(tmp, "work"), name],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        text = out.stdout.decode(errors="replace")
        self.assertEqual(out.returncode, 0, text[-3000:])
        return text.strip().splitlines()[-1]

    def test_the_next_build_uses_the_header_a_wish_started(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "extensions")
            first, second = os.path.join(root, "c" * 16), os.path.join(root, "d" * 16)
            os.makedirs(first)
            os.makedirs(second)
            with pch_maker.collecting(first, nice=0):
                self.assertEqual(self.fenced_build(tmp, first), "without header")
            # the final look removed the wish folder
            self.assertFalse(os.path.exists(os.path.join(first, pch_maker.WISHES)))
            pch_maker.wait_for_makers(600)
            cache = os.path.join(root, pch_maker.PCH_DIR)
            self.assertEqual(len(pch_maker.headers_made(cache, pch_maker.TORCH_HEADER)), 1)
            # another candidate with the same flags, in its own folder
            self.assertEqual(self.fenced_build(tmp, second, "kbrl_test_wished_2"), "with header")

    def test_with_no_worker_collecting_no_header_is_made(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "extensions")
            candidate_dir = os.path.join(root, "c" * 16)
            os.makedirs(candidate_dir)
            self.assertEqual(self.fenced_build(tmp, candidate_dir), "without header")
            wishes = os.listdir(os.path.join(candidate_dir, pch_maker.WISHES))
            self.assertEqual(len([w for w in wishes if w.endswith(".json")]), 1)
            self.assertFalse(os.path.exists(os.path.join(root, pch_maker.PCH_DIR)))

if __name__ == "__main__":
    unittest.main()
