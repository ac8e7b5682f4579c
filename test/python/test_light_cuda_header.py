"""Unit tests of the light torch header for CUDA builds (tools/kbrl_eval/light_cuda_header.py):
which sources get a light copy, what the copy is, and that a build whose light copy does not
compile is built again from the sources as written. One case compiles a light copy with nvcc
against this machine's torch headers (where nvcc and those headers are installed).

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import light_cuda_header as light  # noqa: E402

LOAD_INLINE_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"

RELU = LOAD_INLINE_PRELUDE + r"""
#include <torch/extension.h>
// a PyTorch-style elementwise kernel
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


class LightSourceTest(unittest.TestCase):
    def test_every_torch_include_names_the_light_header_and_lines_stay_where_they_were(self):
        text = light.light_source(RELU)
        self.assertIsNotNone(text)
        self.assertNotIn("torch/extension.h", text)
        self.assertNotIn("torch/types.h", text)
        self.assertEqual(text.count('#include "kbrl_torch_light.h"'), 2)
        self.assertEqual(len(text.splitlines()), len(RELU.splitlines()))
        # everything but the include lines is untouched
        kept = [l for l in RELU.splitlines() if "torch/" not in l]
        self.assertEqual([l for l in text.splitlines() if "kbrl_torch_light" not in l], kept)

    def test_quoted_and_spaced_includes_and_the_other_full_headers_are_replaced(self):
        for line in ('#include "torch/extension.h"', '#  include <torch/torch.h>',
                     '#include <torch/all.h>  // everything', '\t#include<torch/types.h>'):
            text = light.light_source(line + "\n__global__ void k() {}\n")
            self.assertIsNotNone(text, line)
            self.assertTrue(text.startswith('#include "kbrl_torch_light.h"'), line)

    def test_a_source_that_includes_no_full_torch_header_is_left_as_written(self):
        self.assertIsNone(light.light_source(
            "#include <ATen/ATen.h>\n#include <cuda_runtime.h>\n__global__ void k() {}\n"))

    def test_what_the_light_header_lacks_or_would_change_keeps_the_full_header(self):
        for use in ("auto y = torch::zeros({4}, x.options().requires_grad(true));",
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"f\", &f); }",
                    "namespace py = pybind11;",
                    "py::object o;",
                    "PyObject* p = nullptr;",
                    "Py_INCREF(p);",
                    "PyErr_SetString(PyExc_RuntimeError, \"x\");",
                    "auto lin = torch::nn::Linear(4, 4);",
                    "torch::autograd::AutoGradMode g(false);",
                    "torch::cuda::synchronize();",
                    "auto t = torch::tensor({1, 2, 3});",
                    "TORCH_LIBRARY(myops, m) {}"):
            self.assertIsNone(light.light_source(RELU + use + "\n"), use)

    def test_a_comment_about_pytorch_does_not_keep_the_full_header(self):
        self.assertIsNotNone(light.light_source(RELU + "// matches PyTorch's Python module\n"))


class WriteLightSourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.cu = os.path.join(self.dir, "cuda.cu")
        self.cpp = os.path.join(self.dir, "main.cpp")
        with open(self.cu, "w") as f:
            f.write(RELU)
        with open(self.cpp, "w") as f:
            f.write("#include <torch/extension.h>\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_the_cuda_source_is_replaced_by_its_light_copy_with_the_header_beside_it(self):
        out = light.write_light_sources([self.cpp, self.cu], self.dir)
        self.assertEqual(out[0], self.cpp)  # C++ sources keep the precompiled full header
        self.assertEqual(out[1], os.path.join(self.dir, "cuda" + light.LIGHT_SUFFIX))
        with open(out[1]) as f:
            self.assertEqual(f.read(), light.light_source(RELU))
        with open(os.path.join(self.dir, light.HEADER_NAME)) as f, open(light.HEADER_PATH) as g:
            self.assertEqual(f.read(), g.read())

    def test_an_unchanged_copy_is_not_rewritten_so_ninja_can_skip_it(self):
        out = light.write_light_sources([self.cpp, self.cu], self.dir)
        os.utime(out[1], ns=(1_000_000_000, 1_000_000_000))
        light.write_light_sources([self.cpp, self.cu], self.dir)
        self.assertEqual(os.stat(out[1]).st_mtime_ns, 1_000_000_000)

    def test_nothing_to_lighten_gives_none(self):
        with open(self.cu, "w") as f:
            f.write(RELU + "auto t = torch::tensor({1});\n")
        self.assertIsNone(light.write_light_sources([self.cpp, self.cu], self.dir))


def fake_cpp_extension(failing_suffixes=()):
    """A stand-in for torch.utils.cpp_extension's build step with torch's signature: records
    the sources of each build (their file names) and fails a build of a copy whose name ends
    with one of failing_suffixes."""
    module = types.SimpleNamespace(builds=[])

    def build(name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags,
              extra_include_paths, build_directory, verbose, with_cuda, is_standalone=False):
        module.builds.append(list(sources))
        if any(s.endswith(tuple(failing_suffixes)) for s in sources):
            raise RuntimeError("Error building extension 'x': %s(9): error: namespace "
                               "\"torch\" has no member \"special_thing\""
                               % os.path.basename(sources[0]))
        return "built"

    module._write_ninja_file_and_build_library = build
    return module


def nvcc_compiles(source, folder):
    """(whether nvcc compiles source against this machine's torch headers, its output)."""
    cmd = ["/usr/local/cuda/bin/nvcc", "-std=c++17", "--expt-relaxed-constexpr",
           "-gencode=arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC",
           "-c", source, "-o", os.path.join(folder, "cuda.o")]
    for inc in torch_include_dirs():
        cmd[1:1] = ["-isystem", inc]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    ok = proc.returncode == 0 and os.path.getsize(os.path.join(folder, "cuda.o")) > 0
    return ok, proc.stdout.decode(errors="replace")[-3000:]


class SourceFolderTest(unittest.TestCase):
    """A fresh folder holding cuda.cu (RELU) for each test."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.cu = os.path.join(self.dir, "cuda.cu")
        with open(self.cu, "w") as f:
            f.write(RELU)

    def tearDown(self):
        shutil.rmtree(self.dir)


class FallbackTest(SourceFolderTest):

    def build(self, module):
        return module._write_ninja_file_and_build_library(
            "x", [self.cu], [], [], [], [], self.dir, False, True)

    def test_a_light_build_that_compiles_is_the_only_build(self):
        module = fake_cpp_extension()
        light.install_light_cuda_header(module, ops=None)
        self.assertEqual(self.build(module), "built")
        self.assertEqual(module.builds, [[os.path.join(self.dir, "cuda" + light.LIGHT_SUFFIX)]])

    def test_a_light_build_that_fails_is_built_again_as_written_and_said(self):
        module = fake_cpp_extension((light.LIGHT_SUFFIX,))
        said = []
        light.install_light_cuda_header(module, log=said.append, ops=None)
        self.assertEqual(self.build(module), "built")
        self.assertEqual(module.builds[-1], [self.cu])
        self.assertEqual(len(module.builds), 2)
        self.assertEqual(len(said), 1)
        self.assertIn("special_thing", said[0])

    def test_the_wrapper_keeps_torchs_signature_for_the_wrappers_around_it(self):
        import inspect
        module = fake_cpp_extension()
        original = inspect.signature(module._write_ninja_file_and_build_library)
        light.install_light_cuda_header(module, ops=None)
        wrapped = inspect.signature(module._write_ninja_file_and_build_library)
        self.assertEqual(wrapped, original)
        self.assertIn("build_directory", wrapped.bind(
            "x", [self.cu], [], [], [], [], self.dir, False, True).arguments)

    def test_installing_twice_wraps_once(self):
        module = fake_cpp_extension((light.LIGHT_SUFFIX,))
        light.install_light_cuda_header(module, ops=None)
        light.install_light_cuda_header(module, ops=None)
        self.build(module)
        self.assertEqual(len(module.builds), 2)


def torch_include_dirs():
    """This machine's torch C++ headers (the CPU wheel's; ATen and c10 are the same headers)."""
    try:
        import torch.utils.cpp_extension as cpp_extension
        return [p for p in cpp_extension.include_paths() if os.path.isdir(p)]
    except Exception:  # noqa: BLE001
        return []


class CompileTest(unittest.TestCase):
    @unittest.skipUnless(os.path.exists("/usr/local/cuda/bin/nvcc") and torch_include_dirs(),
                         "needs nvcc at /usr/local/cuda and torch's C++ headers")
    def test_the_light_copy_of_a_typical_candidate_compiles_with_nvcc(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "cuda.cu")
            with open(src, "w") as f:
                f.write(RELU)
            out = light.write_light_sources([src], d)
            ok, output = nvcc_compiles(out[0], d)
            self.assertTrue(ok, output)


if __name__ == "__main__":
    unittest.main()
