"""Unit tests of the per-operator CUDA build tier (tools/kbrl_eval/ops_cuda_header.py and its
place in light_cuda_header.py): which sources may use it, what their header holds, when the
tier is skipped, the fallback order (the first copy, then as written), and, where nvcc and
torch's headers are installed, that a typical candidate's ops copy compiles.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import json
import os
import shutil
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import light_cuda_header as light  # noqa: E402
from kbrl_eval import ops_cuda_header as ops_tier  # noqa: E402
from test_light_cuda_header import (RELU, SourceFolderTest, fake_cpp_extension,  # noqa: E402
                                    nvcc_compiles, torch_include_dirs)


def ops_header(split=("infer_size", "globalContext"), operators=("empty_like", "zeros", "add")):
    return ops_tier.OpsHeader(light.read_header(), split, operators)


class DecisionTest(unittest.TestCase):
    def test_called_names_are_qualified_or_unqualified_calls_not_members(self):
        names = ops_tier.called_names(
            "auto y = torch::empty_like(x); z = at::zeros({3}); w = x.add(y); f<float>(a);\n"
            "// at::commented_out(x)\nconst char* s = \"at::in_a_string(x)\";")
        self.assertEqual(names & {"empty_like", "zeros", "f"}, {"empty_like", "zeros", "f"})
        self.assertNotIn("add", names)  # a member call
        self.assertNotIn("commented_out", names)
        self.assertNotIn("in_a_string", names)

    def test_a_typical_candidate_gets_the_headers_of_what_it_calls(self):
        self.assertEqual(ops_header().names_to_include(RELU), ["empty_like"])

    def test_a_call_of_a_split_name_keeps_the_light_header(self):
        text = RELU + "auto s = at::infer_size(a, b);\n"
        self.assertIsNone(ops_header().names_to_include(text))
        # unqualified too: argument-dependent lookup reaches namespace at
        self.assertIsNone(ops_header().names_to_include(RELU + "auto s = infer_size(a, b);\n"))

    def test_a_preprocessor_conditional_keeps_the_light_header(self):
        self.assertIsNone(ops_header().names_to_include("#ifdef AT_CUDA_ENABLED\n#endif\n" + RELU))

    def test_the_header_replaces_all_of_aten_by_the_fixed_part_and_the_operators(self):
        text = ops_header().header_text(["add", "empty_like"])
        self.assertNotIn("#include <ATen/ATen.h>", text)
        self.assertIn(ops_tier.FIXED_PART + "#include <ATen/ops/add.h>\n"
                      "#include <ATen/ops/empty_like.h>\n", text)
        # the rest of the light header (torch's names) is kept
        self.assertIn("using namespace at;", text)


class TorchListTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "ATen", "ops"))
        for name in ("add", "empty_like"):
            open(os.path.join(self.dir, "ATen", "ops", name + ".h"), "w").close()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_release_numbers(self):
        self.assertEqual(ops_tier.torch_release("2.11.0+cu130"), "2.11.0")
        self.assertEqual(ops_tier.torch_release("1.13.0a0"), "1.13.0")
        self.assertIsNone(ops_tier.torch_release("nightly"))

    def test_a_torch_without_a_list_skips_the_tier_and_says_why(self):
        ops, why = ops_tier.OpsHeader.for_torch("", "0.0.1", [self.dir])
        self.assertIsNone(ops)
        self.assertIn("no split-name list for torch 0.0.1", why)

    def test_an_ops_folder_unlike_the_lists_skips_the_tier(self):
        release = sorted(f for f in os.listdir(ops_tier.SPLIT_NAMES_DIR))[0][len("torch-"):-5]
        ops, why = ops_tier.OpsHeader.for_torch("", release + "+local", [self.dir])
        self.assertIsNone(ops)
        self.assertIn("has 2 headers", why)

    def test_every_list_names_its_release_and_its_operator_headers(self):
        for name in os.listdir(ops_tier.SPLIT_NAMES_DIR):
            with open(os.path.join(ops_tier.SPLIT_NAMES_DIR, name)) as f:
                data = json.load(f)
            self.assertEqual(name, "torch-%s.json" % data["torch_release"])
            self.assertGreater(data["operator_headers"], 1000)
            self.assertGreater(len(data["split"]), 1000)
            # names the sets' candidates call are whole in their own header...
            for whole in ("empty_like", "zeros", "relu", "matmul"):
                self.assertNotIn(whole, data["split"])
            # ... and ATen's helpers outside the fixed part are split
            self.assertIn("infer_size", data["split"])

    def test_this_machines_torch_has_the_tier_when_kbrl_has_its_list(self):
        dirs = torch_include_dirs()
        if not dirs:
            self.skipTest("no torch C++ headers here")
        import torch
        ops, why = ops_tier.OpsHeader.for_torch("", torch.__version__, dirs)
        if os.path.exists(ops_tier.list_path(ops_tier.torch_release(torch.__version__))):
            self.assertIsNotNone(ops, why)
            self.assertIn("empty_like", ops.operator_headers)
        else:
            self.assertIsNone(ops)


class TierOrderTest(SourceFolderTest):
    def build(self, failing, ops=None):
        module = fake_cpp_extension(failing)
        said = []
        light.install_light_cuda_header(module, log=said.append,
                                        ops=ops_header() if ops is None else ops)
        result = module._write_ninja_file_and_build_library(
            "x", [self.cu], [], [], [], [], self.dir, False, True)
        self.assertEqual(result, "built")
        return [[os.path.basename(s) for s in b] for b in module.builds], said

    def test_an_ops_copy_that_compiles_is_the_only_build(self):
        builds, said = self.build(failing=())
        self.assertEqual(builds, [["cuda" + ops_tier.OPS_SUFFIX]])
        self.assertEqual(said, [])
        with open(os.path.join(self.dir, "cuda" + ops_tier.OPS_SUFFIX)) as f:
            copy = f.read()
        with open(os.path.join(self.dir, "cuda" + ops_tier.HEADER_SUFFIX)) as f:
            header = f.read()
        self.assertIn('#include "cuda%s"' % ops_tier.HEADER_SUFFIX, copy)
        self.assertEqual(len(copy.splitlines()), len(RELU.splitlines()))  # same line numbers
        self.assertIn("#include <ATen/ops/empty_like.h>", header)

    def test_a_failing_ops_copy_falls_back_to_the_source_as_written(self):
        # not to the light copy: a failing copy is almost always the candidate's own error,
        # which the build as written reports; a light build between would only add its time
        builds, said = self.build(failing=(ops_tier.OPS_SUFFIX,))
        self.assertEqual(builds, [["cuda" + ops_tier.OPS_SUFFIX], ["cuda.cu"]])
        self.assertEqual(len(said), 1)
        self.assertIn("per-operator", said[0])
        self.assertIn("as written", said[0])

    def test_a_failing_light_copy_falls_back_to_the_source_as_written(self):
        with open(self.cu, "a") as f:
            f.write("auto s = at::infer_size(a, b);\n")  # the screen refuses: light first
        builds, said = self.build(failing=(light.LIGHT_SUFFIX,))
        self.assertEqual(builds, [["cuda" + light.LIGHT_SUFFIX], ["cuda.cu"]])
        self.assertEqual(len(said), 1)

    def test_a_source_the_screen_refuses_starts_at_the_light_header(self):
        with open(self.cu, "a") as f:
            f.write("auto s = at::infer_size(a, b);\n")
        builds, _ = self.build(failing=())
        self.assertEqual(builds, [["cuda" + light.LIGHT_SUFFIX]])

    def test_without_the_tier_the_light_header_comes_first(self):
        module = fake_cpp_extension(())
        light.install_light_cuda_header(module, ops=None)
        module._write_ninja_file_and_build_library(
            "x", [self.cu], [], [], [], [], self.dir, False, True)
        self.assertEqual(module.builds, [[os.path.join(self.dir, "cuda" + light.LIGHT_SUFFIX)]])

    def test_the_switch_turns_the_tier_off(self):
        os.environ["KBRL_EVAL_OPS_CUDA_HEADER"] = "0"
        try:
            self.assertIsNone(light._ops_tier(types.SimpleNamespace(), "", None))
        finally:
            del os.environ["KBRL_EVAL_OPS_CUDA_HEADER"]


class CompileTest(unittest.TestCase):
    @unittest.skipUnless(os.path.exists("/usr/local/cuda/bin/nvcc") and torch_include_dirs(),
                         "needs nvcc at /usr/local/cuda and torch's C++ headers")
    def test_the_ops_copy_of_a_typical_candidate_compiles_with_nvcc(self):
        import torch
        ops, why = ops_tier.OpsHeader.for_torch(light.read_header(), torch.__version__,
                                                torch_include_dirs())
        if ops is None:
            self.skipTest(why)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "cuda.cu")
            with open(src, "w") as f:
                # a tensor operator too: the fixed part's TensorOperators.h
                f.write(RELU + "torch::Tensor twice(torch::Tensor x) { return x + x; }\n")
            out = light.write_ops_sources([src], d, ops)
            self.assertTrue(out[0].endswith(ops_tier.OPS_SUFFIX))
            ok, output = nvcc_compiles(out[0], d)
            self.assertTrue(ok, output)


if __name__ == "__main__":
    unittest.main()
