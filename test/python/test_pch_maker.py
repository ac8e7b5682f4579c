"""The precompiled headers' trusted maker (tools/kbrl_eval/pch_maker.py): which wishes it takes,
that it makes the header a wish asks for (a small prefix compiled by the real gcc), and that a
maker writes nothing outside its header's folder whatever its compiler does.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import extension_builds, host_pch, pch_maker, write_fence  # noqa: E402

GCC = shutil.which("gcc")


class FlagChecks(unittest.TestCase):
    roots = ["/usr/include"]

    def test_torchs_and_nvccs_own_flags_pass(self):
        for flags in (['-DPYBIND11_COMPILER_TYPE=\\"_gcc\\"', "-D_GLIBCXX_USE_CXX11_ABI=1",
                       "-fPIC", "-std=c++17", "-O3", "-isystem", "/usr/include/torch",
                       "-isystem /usr/include/python3"],
                      ["-D__CUDA_ARCH__=900", "-Wno-psabi", "-m64", "-I/usr/include/x"]):
            self.assertEqual(pch_maker.check_flags(flags, self.roots), "", flags)

    def test_programs_files_shell_words_and_foreign_folders_are_refused(self):
        for flag in (["-fplugin=/tmp/p.so"], ["-Wl,-rpath,/x"], ["-Wp,-include,/x.h"],
                     ["-B/tmp/bin"], ["-specs=/tmp/s"], ["-DX=1;touch /tmp/y"], ["-DX=$(id)"],
                     ["-include", "/usr/include/stdio.h"], ["-I/tmp/mine"],
                     ["-isystem", "/usr/include/../../tmp"], ["-isystem", "/usr/include/a b"],
                     ["-isystem /usr/include;id"], ["-isystem /tmp/mine"]):
            self.assertNotEqual(pch_maker.check_flags(flag, self.roots), "", flag)


@unittest.skipUnless(GCC and write_fence.abi_version()[0] > 0, "needs gcc and Landlock")
class Making(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ext = os.path.join(self.tmp.name, "extensions")
        self.build = os.path.join(self.ext, "c" * 16)
        os.makedirs(self.build)
        self.saved = os.environ.get("TORCH_EXTENSIONS_DIR")
        os.environ["TORCH_EXTENSIONS_DIR"] = self.build

    def tearDown(self):
        if self.saved is None:
            del os.environ["TORCH_EXTENSIONS_DIR"]
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = self.saved
        self.tmp.cleanup()

    def host_wish(self, flags, prefix="inline int kbrl_answer() { return 42; }\n"):
        pch_maker.wish("host", {"compiler": os.path.abspath(GCC), "flags": flags}, prefix)

    def test_a_prefix_wished_twice_is_made_once_and_wishes_are_consumed(self):
        flags, prefix = ["-O2", "-fPIC"], "inline int kbrl_answer() { return 42; }\n"
        folder = pch_maker.host_folder(os.path.join(self.ext, ".kbrl-host-pch"),
                                       os.path.abspath(GCC), flags, prefix)
        self.host_wish(flags, prefix)
        self.assertEqual(pch_maker.collect(self.build), 0)  # seen once: not yet
        self.assertFalse(os.path.exists(os.path.join(self.build, pch_maker.WISHES)))
        self.host_wish(flags, prefix)
        self.assertEqual(pch_maker.collect(self.build), 1)
        pch_maker.wait_for_makers(120)
        self.assertTrue(os.path.exists(os.path.join(folder, "prefix.h.gch")),
                        os.listdir(folder))
        with open(os.path.join(folder, "prefix.h")) as f:
            self.assertEqual(f.read(), prefix)

    def test_an_unsound_wish_starts_nothing(self):
        for flags in (["-fplugin=/tmp/p.so"], ["-I" + self.tmp.name]):
            self.host_wish(flags)
            self.host_wish(flags)
            self.assertEqual(pch_maker.collect(self.build), 0)
        pch_maker.wish("host", {"compiler": "/bin/sh", "flags": []}, "x")
        pch_maker.wish("torch", {"compiler": "/tmp/my-cc", "flags": []})
        self.assertEqual(pch_maker.collect(self.build), 0)
        self.assertEqual([d for d in os.listdir(self.ext) if d.startswith(".kbrl-pch")], [])

    def test_cc_is_a_host_compiler_as_torch_passes_it_to_nvcc(self):
        # the GPU machines set CC=/opt/gcc/bin/gcc, and torch gives nvcc -ccbin $CC: its wrapper
        # is written before the fence, and its wishes are taken
        other = "/usr/bin/gcc-12"
        if not os.path.exists(other) or os.path.abspath(GCC) == other:
            self.skipTest("needs a second name of gcc at " + other)
        flags, prefix = ["-O2"], "inline int kbrl_cc() { return 7; }\n"
        saved = os.environ.get("CC")
        try:
            os.environ.pop("CC", None)
            self.assertNotIn(other, host_pch.default_host_compilers())
            for _ in range(2):
                pch_maker.wish("host", {"compiler": other, "flags": flags}, prefix)
            self.assertEqual(pch_maker.collect(self.build), 0)  # not $CC: refused
            os.environ["CC"] = other
            self.assertEqual(host_pch.default_host_compilers(), [other, os.path.abspath(GCC)])
            extension_builds.prepare_host_compiler_wrapper(self.build)
            host_wrappers = [d for d in os.listdir(os.path.join(self.ext, ".kbrl-bin"))
                             if d.startswith("bin-")]  # main- is torch's C++ compiler's
            self.assertEqual(len(host_wrappers), 2)
            for _ in range(2):
                pch_maker.wish("host", {"compiler": other, "flags": flags}, prefix)
                started = pch_maker.collect(self.build)
            self.assertEqual(started, 1)
            pch_maker.wait_for_makers(120)
        finally:
            if saved is None:
                os.environ.pop("CC", None)
            else:
                os.environ["CC"] = saved
        folder = pch_maker.host_folder(os.path.join(self.ext, ".kbrl-host-pch"), other, flags,
                                       prefix)
        self.assertTrue(os.path.exists(os.path.join(folder, "prefix.h.gch")))

    def test_a_header_being_made_gets_no_second_maker(self):
        flags, prefix = ["-O1"], "inline int kbrl_once() { return 1; }\n"
        self.host_wish(flags, prefix)
        pch_maker.collect(self.build)
        self.host_wish(flags, prefix)
        self.assertEqual(pch_maker.collect(self.build), 1)
        self.host_wish(flags, prefix)  # a build that ran while the header was being made
        self.assertEqual(pch_maker.collect(self.build), 0)
        pch_maker.wait_for_makers(120)

    def test_a_maker_writes_only_its_folder(self):
        outside = os.path.join(self.tmp.name, "outside")
        compiler = os.path.join(self.tmp.name, "cc.sh")
        with open(compiler, "w") as f:
            f.write("#!/bin/sh\necho forged > '%s'\nexit 1\n" % outside)
        os.chmod(compiler, 0o755)
        folder = os.path.join(self.ext, ".kbrl-host-pch", "k")
        os.makedirs(folder)
        spec = os.path.join(folder, "spec.json")
        with open(spec, "w") as f:
            json.dump({"kind": "host", "folder": folder, "compiler": compiler, "flags": [],
                       "prefix": "int x;\n"}, f)
        pid = os.fork()
        if pid == 0:
            os._exit(pch_maker.main([spec]))
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.WEXITSTATUS(status), 1)
        self.assertFalse(os.path.exists(outside))
        self.assertTrue(os.path.exists(os.path.join(folder, "failed")))


if __name__ == "__main__":
    unittest.main()
