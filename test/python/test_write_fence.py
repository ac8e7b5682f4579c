"""The candidate processes' write fence (tools/kbrl_eval/write_fence.py) in a forked child, as a
candidate process uses it: writes beneath the allowed folders go through, every other write is
refused for the process and for what it starts, and the host-compiler wrapper written before
the fence is used as it is afterwards. Needs a kernel with Landlock (the test says when not).

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import host_pch, write_fence  # noqa: E402


def in_fenced_child(writable, action):
    """Runs action() in a forked child after restrict_writes(writable); its JSON result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            why = write_fence.restrict_writes(writable)
            out = {"why": why, "result": action() if not why else None}
        except BaseException as e:  # noqa: BLE001
            out = {"why": "raised %r" % e, "result": None}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


def try_write(path):
    try:
        with open(path, "a") as f:
            f.write("x")
        return "wrote"
    except OSError as e:
        return e.strerror


@unittest.skipUnless(write_fence.abi_version()[0] > 0,
                     "no Landlock on this kernel: %s" % write_fence.abi_version()[1])
class WriteFence(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = self.tmp.name
        self.ext = os.path.join(root, "extensions")
        self.own = os.path.join(self.ext, "a" * 16)
        self.other = os.path.join(self.ext, "b" * 16)
        self.work = os.path.join(root, "scratch", "eval_1", "candidate")
        for d in (self.own, self.other, self.work):
            os.makedirs(d)
        self.library = os.path.join(self.other, "ext.so")
        with open(self.library, "w") as f:
            f.write("library")

    def tearDown(self):
        self.tmp.cleanup()

    def writable(self):
        return [self.work, self.own, "/dev"]

    def test_own_folders_are_writable_and_nothing_else(self):
        for cache in (".kbrl-pch", ".kbrl-host-pch"):
            os.makedirs(os.path.join(self.ext, cache))
        paths = {"work": os.path.join(self.work, "f"), "own": os.path.join(self.own, "lib.so"),
                 "pch": os.path.join(self.ext, ".kbrl-pch", "k"),
                 "host_pch": os.path.join(self.ext, ".kbrl-host-pch", "k"),
                 "other": self.library, "new_folder_file": os.path.join(self.ext, "new"),
                 "scratch": os.path.join(os.path.dirname(self.work), "reference.py"),
                 "dev_null": "/dev/null"}
        out = in_fenced_child(self.writable(), lambda: {k: try_write(p) for k, p in paths.items()})
        self.assertEqual(out["why"], "")
        got = out["result"]
        for key in ("work", "own", "dev_null"):
            self.assertEqual(got[key], "wrote", key)
        for key in ("other", "new_folder_file", "scratch", "pch", "host_pch"):
            self.assertEqual(got[key], "Permission denied", key)
        with open(self.library) as f:
            self.assertEqual(f.read(), "library")

    def test_processes_the_candidate_starts_are_fenced_too(self):
        def shell():
            p = subprocess.run(["sh", "-c", "echo forged > '%s'" % self.library],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            return [p.returncode, p.stdout.decode()]
        code, text = in_fenced_child(self.writable(), shell)["result"]
        self.assertNotEqual(code, 0)
        self.assertIn("Permission denied", text)

    def test_renames_and_removals_outside_are_refused(self):
        def moves():
            out = []
            for op in (lambda: os.replace(os.path.join(self.work, "f"), self.library),
                       lambda: os.unlink(self.library), lambda: os.rmdir(self.other)):
                try:
                    op()
                    out.append("done")
                except OSError as e:
                    out.append(e.strerror)
            return out
        with open(os.path.join(self.work, "f"), "w") as f:
            f.write("forged")
        got = in_fenced_child(self.writable(), moves)["result"]
        self.assertTrue(all(r != "done" for r in got), got)
        self.assertTrue(os.path.exists(self.library))

    def test_the_compiler_wrapper_written_before_the_fence_is_used_after_it(self):
        cache = os.path.join(self.ext, ".kbrl-host-pch")
        bin_dir = os.path.join(self.ext, ".kbrl-bin")
        before = host_pch.wrapper_path("/usr/bin/gcc", cache, bin_dir)
        self.assertIsNotNone(before)
        after = in_fenced_child(self.writable(), lambda: [
            host_pch.wrapper_path("/usr/bin/gcc", cache, bin_dir),
            host_pch.wrapper_path("/usr/bin/clang", cache, bin_dir),  # not written before
            try_write(before)])["result"]
        self.assertEqual(after, [before, None, "Permission denied"])

    def test_signals_reach_only_the_processes_it_started(self):
        if write_fence.abi_version()[0] < 6:
            self.skipTest("signal scoping needs Landlock ABI 6")
        sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            def signal_them():
                import signal
                out = {}
                for name, pid in (("parent", os.getppid()), ("sibling", sibling.pid)):
                    try:
                        os.kill(pid, 0)  # the permission check of a signal, nothing delivered
                        out[name] = "allowed"
                    except OSError as e:
                        out[name] = e.strerror
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                child.send_signal(signal.SIGTERM)
                out["own child"] = "signalled" if child.wait(timeout=30) == -signal.SIGTERM \
                    else "not signalled"
                return out
            got = in_fenced_child(self.writable(), signal_them)
            self.assertEqual(got["why"], "")
            self.assertEqual(got["result"], {"parent": "Operation not permitted",
                                             "sibling": "Operation not permitted",
                                             "own child": "signalled"})
            self.assertIsNone(sibling.poll())
        finally:
            sibling.kill()
            sibling.wait()

    def test_the_switch_turns_it_off_and_says_so(self):
        os.environ["KBRL_EVAL_NO_WRITE_FENCE"] = "1"
        try:
            self.assertEqual(write_fence.probe(), "off: KBRL_EVAL_NO_WRITE_FENCE=1")
            out = in_fenced_child(self.writable(), lambda: None)
            self.assertEqual(out["why"], "KBRL_EVAL_NO_WRITE_FENCE=1")
        finally:
            del os.environ["KBRL_EVAL_NO_WRITE_FENCE"]
        self.assertTrue(write_fence.probe().startswith("landlock ABI "))


if __name__ == "__main__":
    unittest.main()
