"""tools/check_layers.py, the build's layer check, on small trees made for each case."""

import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_layers.py")


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def check(files, *extra):
    """Runs the checker on a tree holding `files` ({path: text}); (exit code, stderr)."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        r = subprocess.run([sys.executable, CHECKER, "--root", root, *extra],
                           capture_output=True, text=True)
        return r.returncode, r.stderr


class LayerCheck(unittest.TestCase):
    def test_includes_that_point_down_pass(self):
        code, err = check({
            "messages/data.hpp": "#include <string>\n",
            "runtime/eval/x.hpp": '#include "messages/data.hpp"\n',
            "actors/a.cpp": '#include "runtime/eval/x.hpp"\n#include "messages/data.hpp"\n',
            "tools/node/run.cpp": '#include "actors/a.hpp"\n',
            "actors/a.hpp": "",
            "tools/main.cpp": '#include "tools/node/run.hpp"\n',
            "tools/node/run.hpp": "",
        })
        self.assertEqual(code, 0, err)

    def test_an_upward_include_fails_naming_file_line_and_layers(self):
        code, err = check({
            "actors/coordinator.hpp": "",
            "runtime/node/rl_settings.cpp": '// settings\n#include "actors/coordinator.hpp"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn("runtime/node/rl_settings.cpp:2: includes actors/coordinator.hpp (actors); "
                      "runtime code may use messages/ and runtime/ only", err)

    def test_messages_may_not_include_runtime(self):
        code, err = check({"runtime/io/text.hpp": "",
                           "messages/data.hpp": '#include "runtime/io/text.hpp"\n'})
        self.assertEqual(code, 1)
        self.assertIn("messages/data.hpp:1: includes runtime/io/text.hpp", err)

    def test_torch_reached_through_a_header_outside_its_places_fails_with_the_chain(self):
        code, err = check({
            "runtime/model/transformer.hpp": "#include <ATen/core/Tensor.h>\n",
            "runtime/model/transformer.cpp": '#include "runtime/model/transformer.hpp"\n',
            "runtime/episode/light.hpp": '#include "runtime/model/transformer.hpp"\n',
            "runtime/episode/user.cpp": '#include "runtime/episode/light.hpp"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn("runtime/episode/user.cpp: reaches libtorch (runtime/episode/user.cpp -> "
                      "runtime/episode/light.hpp -> runtime/model/transformer.hpp -> "
                      "<ATen/core/Tensor.h>)", err)
        self.assertNotIn("runtime/model/transformer.cpp:", err)

    def test_includes_inside_raw_strings_are_not_includes(self):
        code, err = check({
            "runtime/eval/kernels.cpp": 'auto src = R"(\n#include <torch/extension.h>\n)";\n',
        })
        self.assertEqual(code, 0, err)

    def test_list_torch_names_the_runtime_sources_that_reach_torch(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, {
                "runtime/model/transformer.hpp": "#include <ATen/core/Tensor.h>\n",
                "runtime/model/transformer.cpp": '#include "runtime/model/transformer.hpp"\n',
                "runtime/model/model_config.cpp": "#include <string>\n",
            })
            r = subprocess.run([sys.executable, CHECKER, "--root", root, "--list-torch"],
                               capture_output=True, text=True)
        self.assertEqual(r.stdout, "runtime/model/transformer.cpp\n")

    def test_a_changed_torch_split_fails_once_and_asks_cmake_to_configure_again(self):
        tree = {
            "runtime/model/transformer.hpp": "#include <ATen/core/Tensor.h>\n",
            "runtime/model/transformer.cpp": '#include "runtime/model/transformer.hpp"\n',
            "runtime/model/loader.cpp": '#include "runtime/model/transformer.hpp"\n',
        }
        with tempfile.TemporaryDirectory() as build:
            configured = os.path.join(build, "torch_sources.txt")
            stamp = os.path.join(build, "torch_split.stamp")
            with open(configured, "w") as f:
                f.write("runtime/model/transformer.cpp\n")
            open(stamp, "w").close()
            os.utime(stamp, (0, 0))
            code, err = check(tree, "--split", configured, stamp)
            self.assertEqual(code, 1)
            self.assertIn("runtime/model/loader.cpp now reaches libtorch", err)
            self.assertGreater(os.path.getmtime(stamp), 0)
            with open(configured, "w") as f:  # what CMake writes when it configures again
                f.write("runtime/model/loader.cpp\nruntime/model/transformer.cpp\n")
            code, err = check(tree, "--split", configured, stamp)
            self.assertEqual(code, 0, err)

    def test_the_repository_itself_passes(self):
        r = subprocess.run([sys.executable, CHECKER], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
