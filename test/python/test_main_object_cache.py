"""main.cpp objects made once per text (main_object_cache.py): what a build may share, the
maker's checks of a wish, the bytes a build gets against its own compile's, and two fenced
builds of the same cpp_sources under different names, the second built from the first's
object without compiling main.cpp.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)

from kbrl_eval import main_object_cache as cache, pch_maker, write_fence  # noqa: E402

TEXT = b"""#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) {
    TORCH_CHECK(x.dim() > 0, "twice: x needs a dimension");  // __FILE__: the build folder
    return x * 2;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
m.def("twice", torch::wrap_pybind_function(twice), "twice");
}
"""


def torch_args(name, source):
    """A compile of main.cpp as torch's ninja file runs it (no PCH, torch's flags)."""
    import torch.utils.cpp_extension as ce
    import sysconfig
    flags = ["-DTORCH_EXTENSION_NAME=" + name, "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for path in ce.include_paths() + [sysconfig.get_paths()["include"]]:
        flags += ["-isystem", path]
    flags += ["-D_GLIBCXX_USE_CXX11_ABI=%d" % int(__import__("torch")._C._GLIBCXX_USE_CXX11_ABI),
              "-fPIC", "-std=c++17"]
    return ["-MMD", "-MF", "main.o.d"] + flags + ["-c", source, "-o", "main.o"]


class WhatIsShared(unittest.TestCase):
    def test_parse_puts_placeholders_where_the_build_differs(self):
        args = ["-MMD", "-MF", "main.o.d", "-DTORCH_EXTENSION_NAME=kb_c001_relu", "-O3",
                "-c", "/x/ext/abc/kb_c001_relu/main.cpp", "-o", "main.o"]
        template, name, source, output, depfile = cache.parse(args)
        self.assertEqual(name, "kb_c001_relu")
        self.assertEqual((source, output, depfile),
                         ("/x/ext/abc/kb_c001_relu/main.cpp", "main.o", "main.o.d"))
        self.assertEqual(cache.fill(template, source, output, depfile, name), args)
        # the same compile under another name has the same template
        other = [a.replace("kb_c001_relu", "kb_c002_relu") for a in args]
        self.assertEqual(cache.parse(other)[0], template)

    def test_parse_refuses_what_the_maker_could_not_reproduce(self):
        base = ["-MMD", "-MF", "main.o.d", "-DTORCH_EXTENSION_NAME=kb_c001_relu",
                "-c", "/x/kb_c001_relu/main.cpp", "-o", "main.o"]
        self.assertIsNotNone(cache.parse(base))
        self.assertIsNone(cache.parse(base + ["-I/x/kb_c001_relu"]))       # the build folder
        self.assertIsNone(cache.parse(base + ["-DTAG=kb_c001_relu"]))      # the name
        self.assertIsNone(cache.parse(base[:3] + base[4:]))                # no name define
        self.assertIsNone(cache.parse([a.replace("main.cpp", "k.cu") for a in base]))
        self.assertIsNone(cache.parse(base + ["-c", "/x/other.cpp"]))      # two sources

    def test_only_angle_includes_of_relative_paths_are_shared(self):
        ok = b"#include <torch/extension.h>\n#  include <vector>\nint f();\n"
        self.assertTrue(cache.text_is_shareable(ok))
        for bad in (b'#include "local.h"\n', b"#include <../up.h>\n", b"#include </etc/x.h>\n",
                    b"#include MACRO\n", b"#if __has_include(<x.h>)\n#endif\n",
                    b"%:include <vector>\n", b"// include the kernel\n",
                    b"#include <a/../../b.h>\n"):
            self.assertFalse(cache.text_is_shareable(ok + bad), bad)

    def test_layout_matches_the_lengths_of_the_build(self):
        parent = "/tmp/kbrl-x/extensions"
        folder = os.path.join(parent, "0123456789abcdef", "kb_c001_relu")
        key = cache.key_of("/usr/bin/c++", ["-O3"], len("kb_c001_relu"), len(folder), TEXT)
        where, source_folder, name = cache.layout(parent, key, len("kb_c001_relu"), len(folder))
        self.assertEqual(len(source_folder), len(folder))
        self.assertEqual(len(name), len("kb_c001_relu"))
        self.assertTrue(source_folder.startswith(where + os.sep))
        self.assertTrue(name.isidentifier())
        self.assertIsNone(cache.layout(parent, key, 5, len(folder)))        # name too short
        self.assertIsNone(cache.layout(parent, key, 12, len(parent) + 10))  # folder too short
        # another key, other placeholders
        key2 = cache.key_of("/usr/bin/c++", ["-O2"], len("kb_c001_relu"), len(folder), TEXT)
        self.assertNotEqual(cache.layout(parent, key2, 12, len(folder))[1:], (source_folder, name))


class TheMakersChecks(unittest.TestCase):
    def plan(self, parent, **change):
        folder = os.path.join(parent, "0123456789abcdef", "kb_c001_relu")
        wish = {"compiler": "/usr/bin/c++", "name_length": 12, "folder_length": len(folder),
                "template": ["-MMD", "-MF", cache.DEPFILE, "-DTORCH_EXTENSION_NAME=" + cache.NAME,
                             "-O3", "-c", cache.SOURCE, "-o", cache.OUTPUT]}
        wish.update(change)
        return cache.plan(wish, TEXT, parent, "/usr/bin/c++",
                          lambda flags: pch_maker.check_flags(flags, ["/usr/include"]))

    def test_a_sound_wish_gets_a_spec_and_others_a_refusal_the_build_can_see(self):
        with tempfile.TemporaryDirectory() as parent:
            spec, why = self.plan(parent)
            self.assertIsNone(why)
            self.assertEqual(spec["kind"], "main")
            self.assertEqual(spec["text"].encode(), TEXT)
            t = ["-MMD", "-MF", cache.DEPFILE, "-DTORCH_EXTENSION_NAME=" + cache.NAME,
                 "-c", cache.SOURCE, "-o", cache.OUTPUT]
            for change in ({"compiler": "/tmp/evil-c++"},
                           {"template": t + ["-fplugin=/tmp/p.so"]},
                           {"template": t + ["-include", "/tmp/mine.h"]},
                           {"template": t + ["-I/tmp"]},
                           {"template": t[:5] + t[6:]},                       # no source
                           {"template": ["-o", "-DX"] + t}):                  # -o without its own
                spec, why = self.plan(parent, **change)
                self.assertIsNone(spec, change)
                self.assertTrue(why, change)
            refused = [d for d in os.listdir(os.path.join(parent, cache.CACHE_DIR))
                       if os.path.exists(os.path.join(parent, cache.CACHE_DIR, d, cache.REFUSED))]
            self.assertEqual(len(refused), 6)


@unittest.skipUnless(shutil.which("c++"), "needs a C++ compiler")
class SameBytes(unittest.TestCase):
    def test_the_cached_object_is_the_bytes_of_the_builds_own_compile(self):
        """The maker compiles TEXT under placeholders; the object, with another build's folder
        and name put in, is byte for byte what that build's own compile writes - __FILE__
        (TORCH_CHECK) and the module's name included."""
        with tempfile.TemporaryDirectory() as tmp:
            parent = os.path.join(tmp, "extensions")
            name = "kbrl_test_main_b"
            folder = os.path.join(parent, "d" * 16, name)
            os.makedirs(folder)
            source = os.path.join(folder, "main.cpp")
            with open(source, "wb") as f:
                f.write(TEXT)
            real = pch_maker.main_compiler()
            args = torch_args(name, source)
            template = cache.parse(args)[0]
            key = cache.key_of(real, template, len(name), len(folder), TEXT)
            where, source_folder, placeholder = cache.layout(parent, key, len(name), len(folder))
            spec = {"kind": "main", "folder": where, "source_folder": source_folder,
                    "name": placeholder, "compiler": real, "template": template,
                    "text": TEXT.decode()}
            os.makedirs(where)
            with open(os.path.join(where, "spec.json"), "w") as f:
                json.dump(spec, f)
            maker = subprocess.Popen([sys.executable, "-c",
                                      "import sys; sys.path.insert(0, %r); from kbrl_eval."
                                      "pch_maker import main; sys.exit(main(sys.argv[1:]))" % TOOLS,
                                      os.path.join(where, "spec.json")])
            own = subprocess.run([real] + args, cwd=folder, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=600)
            self.assertEqual(own.returncode, 0, own.stdout.decode()[-2000:])
            self.assertEqual(maker.wait(timeout=600), 0)
            with open(os.path.join(where, cache.OBJECT), "rb") as f:
                made = f.read()
            with open(os.path.join(folder, "main.o"), "rb") as f:
                built = f.read()
            self.assertIn(placeholder.encode(), made)
            self.assertIn(folder.encode(), built)  # the check's __FILE__: the test tests it
            self.assertEqual(cache.placed(made, source_folder, placeholder, folder, name), built)


# A candidate's fenced build as the runner does it (runner._fence_writes, zygote.child_main),
# without the precompiled torch header (so both builds have one key): prints how main.cpp's
# object came about.
FENCED_BUILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
build_dir, tmp, name = sys.argv[2], sys.argv[3], sys.argv[4]
os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
os.environ["TMPDIR"] = tmp
from kbrl_eval.extension_builds import install_candidate_build_hooks, prepare_host_compiler_wrapper
from kbrl_eval.write_fence import restrict_writes
import torch.utils.cpp_extension as ce
prepare_host_compiler_wrapper(build_dir)
install_candidate_build_hooks(ce, no_pch=True)
assert restrict_writes([build_dir, tmp, "/dev", "/proc"]) == ""
os.environ["KBRL_WRITE_FENCE"] = "on"
m = ce.load_inline(name, cpp_sources='''%s''', functions=["twice"])
import torch
assert m.twice(torch.ones(2)).tolist() == [2.0, 2.0]
assert m.__name__ == name, m.__name__
with open(os.path.join(build_dir, name, "build.ninja")) as f:
    print("wrapped" if "/.kbrl-bin/main-" in f.read() else "not wrapped")
""" % TEXT.decode().split("\n", 1)[1].split("PYBIND11_MODULE")[0]


@unittest.skipUnless(shutil.which("c++") and write_fence.abi_version()[0] > 0,
                     "needs a C++ compiler and Landlock")
class TwoBuildsOneCompile(unittest.TestCase):
    def fenced_build(self, tmp, build_dir, name):
        out = subprocess.run([sys.executable, "-c", FENCED_BUILD, TOOLS, build_dir,
                              os.path.join(tmp, "work"), name],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        text = out.stdout.decode(errors="replace")
        self.assertEqual(out.returncode, 0, text[-3000:])
        self.assertEqual(text.strip().splitlines()[-1], "wrapped")
        with open(os.path.join(build_dir, name, "main.o"), "rb") as f:
            return f.read()

    def test_the_second_build_takes_the_object_the_first_had_made(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "work"))
            root = os.path.join(tmp, "extensions")
            first, second = os.path.join(root, "c" * 16), os.path.join(root, "d" * 16)
            os.makedirs(first)
            os.makedirs(second)
            with pch_maker.collecting(first, nice=0):
                one = self.fenced_build(tmp, first, "kbrl_test_main_1")
            made = [d for d in os.listdir(os.path.join(root, cache.CACHE_DIR))]
            self.assertEqual(len(made), 1)
            where = os.path.join(root, cache.CACHE_DIR, made[0])
            with open(os.path.join(where, cache.OBJECT), "rb") as f:
                obj = f.read()
            with open(os.path.join(where, "spec.json")) as f:
                spec = json.load(f)
            self.assertEqual(cache.placed(obj, spec["source_folder"], spec["name"],
                                          os.path.join(first, "kbrl_test_main_1"),
                                          "kbrl_test_main_1"), one)
            # no worker looks at the second build's wishes: it can only have taken the object
            two = self.fenced_build(tmp, second, "kbrl_test_main_2")
            self.assertEqual(cache.placed(obj, spec["source_folder"], spec["name"],
                                          os.path.join(second, "kbrl_test_main_2"),
                                          "kbrl_test_main_2"), two)
            self.assertFalse(os.path.exists(os.path.join(second, pch_maker.WISHES)))


if __name__ == "__main__":
    unittest.main()
