"""Makes the precompiled headers of a typical candidate's build before candidates need them.

A fenced candidate build only reads the precompiled headers (write_fence.py). One that misses
a header wishes for it, and the worker has it made once that candidate is gone (pch_maker.py).
On a fresh machine that came too late. Twelve builders started at once, the first header was
made in 143 s by a niced maker competing with them, and nearly every build of the 64-candidate
benchmark ran without headers: main.cpp 38.7 s and nvcc 39.6 s a build, 14.4 candidates a
minute against 20.2 before the fence (H200, 2026-11-29).

The primer is a trusted process a worker starts at the first candidate of an extensions folder
that may build an extension, on machines that build CUDA extensions (worker.prime_headers). It
runs no candidate code and no fence. It builds a small load_inline extension of the usual shape
(a .cu source including torch/extension.h and cuda_runtime.h, and main.cpp's bindings; C++ alone
where there is no CUDA) beside the candidates' build folders. It installs the same build hooks a
candidate's process installs, so its builds make their headers themselves, as unfenced builds
do: the torch header for main.cpp and the host header for nvcc's host pass. The host header is
made at first sight here, since this prefix is the common one (KBRL_EVAL_PRIMING, host_pch.py).
It runs once per extensions folder (a `done` marker), one primer at a time (a lock), at normal
priority. Builds that start before it is done go on without the headers, as before.

    python3 header_primer.py EXTENSIONS_ROOT      (what start() runs)"""

import fcntl
import os
import subprocess
import sys

PRIMER_DIR = ".kbrl-primer"
PRIMING_ENV = "KBRL_EVAL_PRIMING"

_CPP_DECLARATION = "torch::Tensor kbrl_primer_double(torch::Tensor x);"

_CUDA_SOURCE = r"""#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void kbrl_primer_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = 2.0f * x[i];
}

torch::Tensor kbrl_primer_double(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  kbrl_primer_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

_CPP_SOURCE = r"""#include <torch/extension.h>

torch::Tensor kbrl_primer_double(torch::Tensor x) { return x * 2; }
"""


def start(build_dir):
    """Starts the primer for the extensions folder build_dir lies in, unless its headers were
    made already; returns the process or None. Never raises: a missing speed-up is no error."""
    root = os.path.dirname(os.path.abspath(build_dir))
    folder = os.path.join(root, PRIMER_DIR)
    if os.path.exists(os.path.join(folder, "done")):
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        log = open(os.path.join(folder, "primer.log"), "a")
    except OSError:
        return None
    with log:
        try:
            return subprocess.Popen(
                [sys.executable, "-c", "import sys; sys.path.insert(0, %r); "
                 "from kbrl_eval.header_primer import main; sys.exit(main(sys.argv[1:]))"
                 % os.path.dirname(os.path.dirname(os.path.abspath(__file__))), root],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                start_new_session=True)
        except OSError:
            return None


def main(argv):
    root = os.path.abspath(argv[0])
    folder = os.path.join(root, PRIMER_DIR)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another worker's primer is at it
        done = os.path.join(folder, "done")
        if os.path.exists(done):
            return 0
        # the caches are found beside TORCH_EXTENSIONS_DIR, as for a candidate's build folder
        os.environ["TORCH_EXTENSIONS_DIR"] = folder
        os.environ[PRIMING_ENV] = "1"
        tmp = os.path.join(folder, "tmp")
        os.makedirs(tmp, exist_ok=True)
        os.environ["TMPDIR"] = tmp
        import torch
        import torch.utils.cpp_extension as cpp_extension
        from .extension_builds import install_candidate_build_hooks
        install_candidate_build_hooks(cpp_extension, log=lambda m: print(m, flush=True))
        # a CUDA torch and nvcc, as candidates' CUDA builds need; not a visible GPU: builders
        # build without one (the 2026-11-29 run's primer saw none and primed only C++ flags)
        cuda = torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
        kind = "CUDA" if cuda else "C++"
        print("kbrl header primer: building a %s extension in %s" % (kind, folder), flush=True)
        try:
            if cuda:
                cpp_extension.load_inline("kbrl_primer_cuda", cpp_sources=_CPP_DECLARATION,
                                          cuda_sources=_CUDA_SOURCE,
                                          functions=["kbrl_primer_double"])
            else:
                cpp_extension.load_inline("kbrl_primer_cpp", cpp_sources=_CPP_SOURCE,
                                          functions=["kbrl_primer_double"])
            outcome = "ok"
        except Exception as e:  # noqa: BLE001 - written down, and not tried again
            outcome = "failed: %s" % str(e)[-2000:]
        with open(done, "w") as f:
            f.write(outcome + "\n")
        print("kbrl header primer: " + outcome, flush=True)
    return 0 if outcome == "ok" else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from kbrl_eval.header_primer import main as _main
    sys.exit(_main(sys.argv[1:]))
