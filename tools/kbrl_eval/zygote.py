"""The zygote: a process that has imported torch (and Triton, when present) without touching the
GPU, and forks one fresh candidate process per candidate on the harness's request. A fork costs
milliseconds; the child pays only its own CUDA context. The zygote holds nothing of any
evaluation, so a child starts clean: no module, thread, patch or allocator state of an earlier
candidate.

It is the subreaper of everything a candidate starts: processes a candidate leaves behind
(double-forked, in a new session) are re-parented to the zygote, which kills them when the
harness reaps the candidate and reports how many there were.

Control messages (harness -> zygote, over the channel given as --control-fd):
  {"id", "op": "spawn"} + one fd (the child's end of a fresh socketpair) -> {"id", "pid"}
  {"id", "op": "reap", "pid"} -> {"id", "status": wait status or null, "leftover": n}
  {"id", "op": "exit"}

Nothing here may touch the GPU: a process that initialised the CUDA runtime cannot give it to
its forked children (torch refuses, "Cannot re-initialize CUDA in forked subprocess").
"""

import argparse
import ctypes
import os
import signal
import socket
import sys
import time
import traceback

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def prctl(option, value):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)
    except (OSError, AttributeError):
        return -1


def process_stat(pid):
    """(ppid, session id) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2:].split()
    if rest[0] == "Z":
        return None  # a zombie runs nothing; reaping collects it
    return int(rest[1]), int(rest[3])


def processes_of(session, parents=()):
    """Live processes in a session (a candidate's), or children of one of `parents`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = process_stat(pid)
        if st is not None and (st[1] == session or st[0] in parents):
            found.append(pid)
    return found


def _collect_zombies():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap(pid, spared=()):
    """Kills the candidate process and everything it left; (its wait status or None, number
    of other processes that were still running). `spared` are the zygote's other candidate
    processes (a spare started ahead of its candidate): they are not this candidate's."""
    me = os.getpid()
    status = None
    try:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            status = st
    except ChildProcessError:
        pass
    others = set()
    for _ in range(50):
        # the candidate's session, its children (in sessions of their own) and whatever was
        # re-parented to the zygote when their parents died
        alive = [p for p in processes_of(pid, (me, pid)) if p != pid and p not in spared]
        others.update(alive)
        killing_candidate = status is None
        for p in alive + ([pid] if killing_candidate else []):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if killing_candidate:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            status = -1  # killed by us
        _collect_zombies()
        if not alive and not killing_candidate:
            break  # a scan after every kill found nothing: the orphans were re-parented first
        time.sleep(0.01)
    return (None if status == -1 else status), len(others)


def child_main(sock_fd, cuda, no_pch, full_cuda_header):
    """In the forked child: becomes the candidate's process."""
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # non-dumpable like the zygote (inherited, said again): the spare process, started while
        # a candidate runs, must be out of that candidate's reach (no ptrace, /proc/<pid>/mem)
        prctl(PR_SET_DUMPABLE, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        from .channel import Channel
        from .runner import Runner
        # torch.utils.cpp_extension is imported here, not in the zygote: importing it touches
        # the CUDA runtime, after which no forked child could use CUDA
        import torch.utils.cpp_extension as cpp_extension
        from .extension_builds import install_candidate_build_hooks
        install_candidate_build_hooks(cpp_extension, no_pch, full_cuda_header,
                                      log=lambda m: print("kbrl candidate build: " + m,
                                                          file=sys.stderr, flush=True))
        ch = Channel(socket.socket(fileno=sock_fd))
        Runner(ch, cuda).serve()
        code = 0
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc()
        except Exception:  # noqa: BLE001
            pass
        code = 3
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--control-fd", type=int, required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), required=True)
    ap.add_argument("--no-pch", action="store_true")
    ap.add_argument("--full-cuda-header", action="store_true")
    args = ap.parse_args(argv)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_DUMPABLE, 0)
    from .channel import Channel, ChannelClosed
    control = Channel(socket.socket(fileno=args.control_fd))
    import torch  # noqa: F401 - imported once here, inherited by every candidate process
    try:
        import triton  # noqa: F401 - saves every Triton candidate its import
    except Exception:  # noqa: BLE001
        pass
    import kbrl_eval.runner  # noqa: F401
    import kbrl_eval.coverage  # noqa: F401
    if args.device == "cpu":
        # Without a GPU nothing stops the zygote from importing the build machinery once for
        # every child (with one, its import touches the CUDA runtime: see child_main); a CPU
        # child then starts in about 0.05 s instead of 0.9 s.
        import torch.utils.cpp_extension  # noqa: F401
        import kbrl_eval.extension_builds  # noqa: F401
        import kbrl_eval.light_cuda_header  # noqa: F401
        import kbrl_eval.nvcc_driver  # noqa: F401
    control.send({"id": 0, "ready": True, "pid": os.getpid()})
    children = set()  # candidate processes spawned and not reaped
    while True:
        try:
            msg, fds = control.receive()
        except ChannelClosed:
            os._exit(0)
        op, rid = msg.get("op"), msg.get("id")
        if op == "spawn":
            pid = os.fork()
            if pid == 0:
                control.sock.close()
                child_main(fds[0], args.device == "cuda", args.no_pch, args.full_cuda_header)
            os.close(fds[0])
            children.add(pid)
            control.send({"id": rid, "pid": pid})
        elif op == "reap":
            pid = int(msg["pid"])
            children.discard(pid)
            status, leftover = reap(pid, children)
            control.send({"id": rid, "status": status, "leftover": leftover})
        elif op == "exit":
            control.send({"id": rid, "ok": True})
            os._exit(0)
        else:
            control.send({"id": rid, "error": "unknown op"})


if __name__ == "__main__":
    main()
