"""Unit tests of the nvcc driver that runs nvcc's host front end and device side side by side
(tools/kbrl_eval/nvcc_driver.py): the plan it reads from nvcc's -dryrun, the calls it leaves to
nvcc, and, where nvcc is installed, that its objects hold the same machine code as nvcc's own,
that it writes the dependency file, and that a compile error reads as nvcc's.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import nvcc_driver  # noqa: E402

NVCC = "/usr/local/cuda/bin/nvcc"
HAVE_NVCC = os.path.exists(NVCC) and shutil.which("objdump") and shutil.which("objcopy")

KERNEL = r"""
#include <cstdint>
namespace {
__device__ float twice(float v) { return 2.0f * v; }
}
__global__ void scale_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(x[i]);
}
void launch(const float* x, float* y, int64_t n) {
    scale_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""

FLAGS = ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-Xcompiler", "-fPIC"]

# nvcc's -dryrun for one source and one architecture, its shape as nvcc 13 prints it
DRYRUN = """#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ CICC_PATH=/usr/local/cuda/bin/../nvvm/bin
#$ SYSTEM_INCLUDES="-isystem" "/usr/local/cuda/include/cccl"  
#$ gcc -E -x c++ -D__CUDACC__ "a.cu" -o "/t/x-5_a.cpp4.ii" 
#$ cudafe++ --c++17 --gen_c_file_name "/t/x-6_a.cudafe1.cpp" --stub_file_name "x-6_a.cudafe1.stub.c" --gen_module_id_file --module_id_file_name "/t/x-4_a.module_id" "/t/x-5_a.cpp4.ii" 
#$ gcc -D__CUDA_ARCH__=900 -E -x c++ "a.cu" -o "/t/x-7_a.cpp1.ii" 
#$ "$CICC_PATH/cicc" --c++17 -arch compute_90a --module_id_file_name "/t/x-4_a.module_id" --stub_file_name "/t/x-6_a.cudafe1.stub.c" "/t/x-7_a.cpp1.ii" -o "/t/x-6_a.ptx"
#$ ptxas -arch=sm_90a -m64 "/t/x-6_a.ptx" -o "/t/x-8_a.cubin" 
#$ fatbinary -64 "--image3=kind=elf,sm=90a,file=/t/x-8_a.cubin" --embedded-fatbin="/t/x-3_a.fatbin.c" 
#$ rm /t/x-3_a.fatbin
#$ gcc -c -x c++ "/t/x-6_a.cudafe1.cpp" -o "a.o" 
"""


class PlanTest(unittest.TestCase):
    def test_the_host_front_end_and_the_device_side_are_split(self):
        plan = nvcc_driver.make_plan(DRYRUN)
        self.assertIsNotNone(plan)
        self.assertEqual(len(plan.host), 2)
        self.assertTrue(plan.host[0].startswith("gcc -E -x c++ -D__CUDACC__"))
        self.assertTrue(plan.host[1].startswith("cudafe++"))
        self.assertNotIn("--gen_module_id_file", plan.host[1])
        self.assertEqual([c.split()[0] for c in plan.device],
                         ["gcc", '"$CICC_PATH/cicc"', "ptxas", "fatbinary", "rm"])
        self.assertEqual(plan.after, ['gcc -c -x c++ "/t/x-6_a.cudafe1.cpp" -o "a.o" '])
        self.assertEqual(plan.module_id_file, "/t/x-4_a.module_id")
        # the one-word assignments only: SYSTEM_INCLUDES's two words are no shell line
        self.assertEqual([e.split("=")[0] for e in plan.env], ["_NVVM_BRANCH_", "_SPACE_",
                                                               "CICC_PATH"])

    def test_plans_of_another_shape_are_left_to_nvcc(self):
        two_fronts = DRYRUN.replace("#$ ptxas", "#$ cudafe++ --gen_module_id_file x\n#$ ptxas")
        self.assertIsNone(nvcc_driver.make_plan(two_fronts))
        self.assertIsNone(nvcc_driver.make_plan(DRYRUN.replace("--gen_module_id_file", "")))
        filtered = DRYRUN.replace("#$ cudafe++", "#$ -- Filter Dependencies -- > a.d\n#$ cudafe++")
        self.assertIsNone(nvcc_driver.make_plan(filtered))
        reads_host = DRYRUN.replace('"/t/x-8_a.cubin" ', '"/t/x-8_a.cubin" /t/x-5_a.cpp4.ii ')
        self.assertIsNone(nvcc_driver.make_plan(reads_host))
        self.assertIsNone(nvcc_driver.make_plan(""))

    def test_the_module_id_has_nvccs_shape_and_differs_per_source(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "cuda.cu"), os.path.join(d, "other.cu")
            for path, text in ((a, "int x;"), (b, "int y;")):
                with open(path, "w") as f:
                    f.write(text)
            self.assertRegex(nvcc_driver.module_id(a, []), r"^_[0-9a-f]{8}_7_cuda_cu_[0-9a-f]{8}$")
            self.assertNotEqual(nvcc_driver.module_id(a, []), nvcc_driver.module_id(b, []))
            self.assertNotEqual(nvcc_driver.module_id(a, []), nvcc_driver.module_id(a, ["-O0"]))

    def test_the_sides_run_at_once_only_with_a_core_to_spare(self):
        self.assertTrue(nvcc_driver.side_by_side(0.2, 16))
        self.assertTrue(nvcc_driver.side_by_side(15.0, 16))
        self.assertFalse(nvcc_driver.side_by_side(15.5, 16))
        self.assertFalse(nvcc_driver.side_by_side(1.0, 1))

    def test_calls_that_are_not_one_compile_are_left_to_nvcc(self):
        for args in (["--version"], ["-c", "a.cu", "-o", "a.o", "-keep"],
                     ["-c", "a.cu", "b.cu"], ["a.cu", "-o", "a"], ["-c", "a.cu", "-o", "a.o", "-MMD"],
                     ["-rdc=true", "-c", "a.cu", "-o", "a.o"]):
            self.assertIsNone(nvcc_driver.run(NVCC, args), args)


def host_code(obj):
    """The host disassembly, with the names that differ from one nvcc run to the next taken
    out: the file's, the anonymous namespace's (nvcc's module id, or host_pch's fixed name) and
    the static initializer's (named after nvcc's temporary file)."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    dis = "\n".join(dis.splitlines()[2:])
    dis = re.sub(r"\d+_GLOBAL__N_(_kbrl_host_pch|_[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8})",
                 "ANON", dis)
    return re.sub(r"_GLOBAL__sub_I_[\w.-]+?cudafe1\.cpp", "SUB_I", dis)


def device_code(obj):
    """The embedded fatbinary's bytes, with the module id (a fixed-length name) taken out."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out],
                       check=True)
        with open(out, "rb") as f:
            data = f.read()
    return re.sub(rb"_[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}", b"ID", data)


@unittest.skipUnless(HAVE_NVCC, "needs nvcc at /usr/local/cuda, objdump and objcopy")
class DriverTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.src = os.path.join(self.dir, "cuda.cu")
        with open(self.src, "w") as f:
            f.write(KERNEL)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def driver(self, args, at_once=True):
        """The driver as a subprocess: its two sides at once, or as the load decides."""
        env = dict(os.environ, KBRL_EVAL_SERIAL_NVCC="",
                   KBRL_EVAL_SIDE_BY_SIDE="1" if at_once else "")
        return subprocess.run([sys.executable, nvcc_driver.__file__, NVCC] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)

    def test_the_objects_hold_nvccs_machine_code_and_the_dependencies_are_written(self):
        plain, side = os.path.join(self.dir, "plain.o"), os.path.join(self.dir, "side.o")
        subprocess.run([NVCC] + FLAGS + ["-c", self.src, "-o", plain], check=True)
        dep = os.path.join(self.dir, "side.d")
        proc = self.driver(["-MD", "-MF", dep] + FLAGS + ["-c", self.src, "-o", side])
        self.assertEqual(proc.returncode, 0, proc.stdout.decode(errors="replace"))
        self.assertEqual(host_code(plain), host_code(side))
        self.assertEqual(device_code(plain), device_code(side))
        self.assertGreater(len(device_code(side)), 1000)
        with open(dep) as f:
            deps = f.read()
        self.assertTrue(deps.startswith(side + ":"), deps[:200])
        self.assertIn("cstdint", deps)

    def test_a_compile_error_reads_as_nvccs(self):
        with open(self.src, "a") as f:
            f.write("\nvoid broken() { undefined_name(1); }\n")
        out = os.path.join(self.dir, "x.o")
        plain = subprocess.run([NVCC] + FLAGS + ["-c", self.src, "-o", out],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertNotEqual(plain.returncode, 0)
        self.assertIn(b"undefined_name", plain.stdout)
        for at_once in (True, False):
            side = self.driver(FLAGS + ["-c", self.src, "-o", out], at_once)
            self.assertNotEqual(side.returncode, 0)
            self.assertEqual(side.stdout, plain.stdout)


if __name__ == "__main__":
    unittest.main()
