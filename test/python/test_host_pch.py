"""Unit tests of the host compiler wrapper that gives nvcc's host pass a precompiled header
(tools/kbrl_eval/host_pch.py): where a cudafe1.cpp is split, which compiler calls it takes,
that a prefix which does not compile sends the call to the compiler as asked, and, where nvcc
and torch's headers are installed, that a candidate compiled through the wrapper gives the same
machine code as without it and that a second source with the same headers reuses the header.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import host_pch  # noqa: E402
# the tests beside this one (unittest discover puts their folder on the path)
from test_light_cuda_header import torch_include_dirs  # noqa: E402
from test_nvcc_driver import host_code as machine_code  # noqa: E402

MODULE_ID = "_1a2b3c4d_7_cuda_cu_5e6f7a8b"


def unit(prefix_lines, own_code, anon=True):
    """A cudafe1.cpp-shaped text: the main file's marker, header lines, the main file's code,
    and the anonymous-namespace define nvcc appends before the stub include."""
    head = '# 1 "cuda.cu"\n' + "".join(
        "namespace _GLOBAL__N_%s { int h%d; }\n" % (MODULE_ID, i) if i == 0 else
        "int h%d;\n" % i for i in range(prefix_lines))
    tail = "#define _NV_ANON_NAMESPACE _GLOBAL__N_%s\n" % MODULE_ID if anon else ""
    return head + '# 3 "cuda.cu"\n' + own_code + tail


class SplitTest(unittest.TestCase):
    def setUp(self):
        self.saved = host_pch.MIN_PREFIX_LINES
        host_pch.MIN_PREFIX_LINES = 3

    def tearDown(self):
        host_pch.MIN_PREFIX_LINES = self.saved

    def test_the_cut_is_the_main_files_first_code_and_the_module_id_is_fixed_everywhere(self):
        prefix, rest = host_pch.split_unit(unit(5, "int f() { return h1; }\n"))
        self.assertTrue(prefix.startswith("namespace _GLOBAL__N__kbrl_host_pch { int h0; }"))
        self.assertEqual(prefix.count("\n"), 5)
        self.assertTrue(rest.startswith('# 1 "cuda.cu"\n# 3 "cuda.cu"\nint f()'))
        self.assertIn("_NV_ANON_NAMESPACE _GLOBAL__N__kbrl_host_pch", rest)
        self.assertNotIn(MODULE_ID, prefix + rest)

    def test_two_sources_with_the_same_headers_share_the_prefix(self):
        a = host_pch.split_unit(unit(5, "int f() { return 1; }\n"))[0]
        b = host_pch.split_unit(unit(5, "int g() { return 2; }\n").replace(
            MODULE_ID, "_99999999_7_cuda_cu_00000000"))[0]
        self.assertEqual(a, b)

    def test_the_build_folders_of_two_sources_do_not_part_their_prefixes(self):
        # each load_inline build has its own folder, and kbrl's light header is written there
        def in_folder(folder, code):
            text = unit(5, code).replace('# 1 "cuda.cu"', '# 1 "%s/cuda.cu"' % folder)
            text = text.replace("int h2;\n", '# 1 "%s/kbrl_torch_light.h"\nint h2;\n' % folder)
            return text.replace('# 3 "cuda.cu"', '# 3 "%s/cuda.cu"' % folder)
        a = host_pch.split_unit(in_folder("/ext/kb_a", "int f();\n"))
        b = host_pch.split_unit(in_folder("/ext/kb_b", "int g();\n"))
        self.assertEqual(a[0], b[0])
        self.assertIn('# 1 "kbrl-source-folder/kbrl_torch_light.h"', a[0])
        self.assertTrue(a[1].startswith('# 1 "/ext/kb_a/cuda.cu"\n# 3 "/ext/kb_a/cuda.cu"'))

    def test_no_split_without_the_define_without_own_code_or_with_a_short_prefix(self):
        self.assertIsNone(host_pch.split_unit(unit(5, "int f();\n", anon=False)))
        self.assertIsNone(host_pch.split_unit(unit(5, "").replace('# 3 "cuda.cu"\n', "")))
        self.assertIsNone(host_pch.split_unit(unit(2, "int f();\n")))
        self.assertIsNone(host_pch.split_unit("int x;\n"))


NVCC_HOST_COMPILE = ["-std=c++17", "-D__CUDA_ARCH__=900", "-c", "-x", "c++", "-fPIC", "-O3",
                     "-isystem", "/usr/local/cuda/include", "-m64",
                     "/tmp/tmpxft_0000_00000000-6_cuda.cudafe1.cpp", "-o", "cuda.o"]


class ParseCompileTest(unittest.TestCase):
    def test_nvccs_host_compile_is_taken_apart(self):
        flags, source, output = host_pch.parse_compile(NVCC_HOST_COMPILE)
        self.assertEqual(source, "/tmp/tmpxft_0000_00000000-6_cuda.cudafe1.cpp")
        self.assertEqual(output, "cuda.o")
        self.assertEqual(flags, ["-std=c++17", "-D__CUDA_ARCH__=900", "-fPIC", "-O3",
                                 "-isystem", "/usr/local/cuda/include", "-m64"])

    def test_other_calls_are_left_to_the_compiler(self):
        preprocess = [a if a != "-c" else "-E" for a in NVCC_HOST_COMPILE]
        self.assertIsNone(host_pch.parse_compile(preprocess))
        self.assertIsNone(host_pch.parse_compile(["--version"]))
        self.assertIsNone(host_pch.parse_compile(NVCC_HOST_COMPILE[:-3] + ["x.cpp", "-o", "x.o"]))
        forced = NVCC_HOST_COMPILE[:1] + ["-include", "pre.h"] + NVCC_HOST_COMPILE[1:]
        self.assertIsNone(host_pch.parse_compile(forced))
        as_c = [a if a != "c++" else "c" for a in NVCC_HOST_COMPILE]
        self.assertIsNone(host_pch.parse_compile(as_c))


class FallbackTest(unittest.TestCase):
    """With gcc alone: a prefix that does not compile as a header leaves the unit to gcc."""

    @unittest.skipUnless(shutil.which("gcc"), "needs gcc")
    def test_a_prefix_that_is_no_header_is_compiled_as_asked(self):
        saved, host_pch.MIN_PREFIX_LINES = host_pch.MIN_PREFIX_LINES, 3
        try:
            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "x.cudafe1.cpp")
                # the prefix leaves a namespace open: fine inside the unit, no header alone
                text = unit(5, "}\nint f() { return 7; }\n").replace(
                    "int h4;\n", "int h4;\nnamespace open {\n")
                with open(src, "w") as f:
                    f.write(text)
                cache = os.path.join(d, "cache")
                args = ["-c", "-x", "c++", "-O2", src, "-o", os.path.join(d, "x.o")]
                # the first sighting only marks the prefix seen; the second tries the header
                self.assertFalse(host_pch.compile_with_prefix("gcc", args, cache))
                self.assertEqual([r for r, _, fs in os.walk(cache) if "failed" in fs], [])
                self.assertFalse(host_pch.compile_with_prefix("gcc", args, cache))
                failed = [r for r, _, fs in os.walk(cache) if "failed" in fs]
                self.assertEqual(len(failed), 1)
                # the wrapper's entry point then runs gcc on the original
                proc = subprocess.run([sys.executable, host_pch.__file__, shutil.which("gcc"),
                                       cache] + args)
                self.assertEqual(proc.returncode, 0)
                self.assertGreater(os.path.getsize(os.path.join(d, "x.o")), 0)
        finally:
            host_pch.MIN_PREFIX_LINES = saved


# a header beside the source, in the build's own folder, as kbrl's light header is
LOCAL_HEADER = "#pragma once\n#include <torch/types.h>\n"

KERNEL = r"""
#include "local.h"
#include <cuda_runtime.h>
namespace {
__global__ void scale_kernel(const float* x, float* y, float s, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}
}
torch::Tensor scale(torch::Tensor x, double s) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    scale_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                         (float)s, n);
    return y;
}
"""


@unittest.skipUnless(os.path.exists("/usr/local/cuda/bin/nvcc") and torch_include_dirs()
                     and shutil.which("gcc") and shutil.which("objdump"),
                     "needs nvcc at /usr/local/cuda, gcc, objdump and torch's C++ headers")
class NvccTest(unittest.TestCase):
    def compile(self, d, name, text, ccbin):
        """Compiles text in a folder of its own (d/name), the local header beside it."""
        folder = os.path.join(d, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "local.h"), "w") as f:
            f.write(LOCAL_HEADER)
        src = os.path.join(folder, "cuda.cu")
        with open(src, "w") as f:
            f.write(text)
        out = os.path.join(d, name + ("-pch" if "bin-" in ccbin else "") + ".o")
        cmd = ["/usr/local/cuda/bin/nvcc", "-ccbin", ccbin, "-std=c++17",
               "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90",
               "-Xcompiler", "-fPIC", "-O3", "-c", src, "-o", out]
        for inc in torch_include_dirs():
            cmd[1:1] = ["-isystem", inc]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=900, env=dict(os.environ, KBRL_EVAL_NO_PCH=""))
        self.assertEqual(proc.returncode, 0, proc.stdout.decode(errors="replace")[-3000:])
        return out

    def test_the_wrapper_gives_the_same_code_and_reuses_its_header(self):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "cache")
            gcc = shutil.which("gcc")
            wrapper = host_pch.wrapper_path(gcc, cache, os.path.join(d, "bin"))
            plain = self.compile(d, "a", KERNEL, gcc)
            self.compile(d, "a", KERNEL, wrapper)
            self.assertEqual([r for r, _, fs in os.walk(cache) if "prefix.h.gch" in fs], [],
                             "a prefix seen once gets no header")
            wrapped = self.compile(d, "a2", KERNEL, wrapper)
            headers = [r for r, _, fs in os.walk(cache) if "prefix.h.gch" in fs]
            self.assertEqual(len(headers), 1, "the second build makes the precompiled header")
            self.assertEqual(machine_code(plain), machine_code(wrapped))
            # another source with the same headers, in another folder: same header
            other = KERNEL.replace("x[i] * s", "x[i] * s + 1.0f")
            self.compile(d, "b", other, wrapper)
            self.assertEqual([r for r, _, fs in os.walk(cache) if "prefix.h" in fs], headers)


if __name__ == "__main__":
    unittest.main()
