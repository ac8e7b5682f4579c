"""The harness's handle on candidate processes: starts the zygote, asks it for one fresh process
per candidate, talks to that process with deadlines, and has it killed (with whatever it left
running) when the candidate is done. Nothing the candidate process sends is trusted: answers are
JSON matched to their request ids, and every way the process can fail - an exception, a crash,
silence past the deadline, a malformed or misdirected message - ends as a verdict of the
candidate's, never as a failure of the harness."""

import os
import signal
import socket
import subprocess
import sys
import time

from .channel import Channel, ChannelClosed, ChannelTimeout, ProtocolViolation
from .common import CandidateError, truncate
from .memory_watch import MemoryWatch

_TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZYGOTE_START_S = 300.0


class CandidateGone(Exception):
    """The candidate process crashed, hung, or broke the protocol: kind is 'crashed',
    'timeout' or 'protocol'."""

    def __init__(self, kind, text):
        super().__init__(text)
        self.kind = kind
        self.text = text


def _describe_status(status):
    if status is None:
        return "it was killed"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return "it was killed by %s" % name
    if os.WIFEXITED(status):
        return "it exited with status %d" % os.WEXITSTATUS(status)
    return "wait status %d" % status


class Zygote:
    def __init__(self, device, no_pch, full_cuda_header=False):
        self.device = device
        self.no_pch = no_pch
        self.full_cuda_header = full_cuda_header
        self.proc = None
        self.control = None
        self._next = 1

    def ensure(self):
        if self.proc is not None and self.proc.poll() is None:
            return
        self.close()
        mine, theirs = socket.socketpair()
        cmd = [sys.executable, "-c",
               "import sys; sys.path.insert(0, %r); from kbrl_eval.zygote import main; "
               "main(sys.argv[1:])" % _TOOLS_DIR,
               "--control-fd", str(theirs.fileno()), "--device", self.device]
        if self.no_pch:
            cmd.append("--no-pch")
        if self.full_cuda_header:
            cmd.append("--full-cuda-header")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                                     close_fds=True)
        theirs.close()
        self.control = Channel(mine)
        try:
            hello, _ = self.control.receive(time.monotonic() + ZYGOTE_START_S)
        except (ChannelClosed, ChannelTimeout, ProtocolViolation) as e:
            self.close()
            raise RuntimeError("the candidate-process zygote did not start: %s" % e)
        if not hello.get("ready"):
            self.close()
            raise RuntimeError("the candidate-process zygote answered %r" % hello)

    def _request(self, msg, fds=()):
        msg["id"] = self._next
        self._next += 1
        try:
            ans, _ = self.control.request(msg, time.monotonic() + 60, fds)
        except (ChannelClosed, ChannelTimeout, ProtocolViolation) as e:
            # a candidate process may have killed the zygote: start a new one next time
            self.close()
            raise RuntimeError("the candidate-process zygote failed: %s" % e)
        return ans

    def spawn(self):
        """(pid, Channel) of a fresh candidate process."""
        self.ensure()
        mine, theirs = socket.socketpair()
        try:
            ans = self._request({"op": "spawn"}, fds=[theirs.fileno()])
        finally:
            theirs.close()
        return int(ans["pid"]), Channel(mine)

    def reap(self, pid):
        """(wait status or None, processes left behind)."""
        return self.reap_finish(self.reap_start(pid))

    def reap_start(self, pid):
        """Asks for the reap without waiting: the zygote kills the process and what it left
        and waits for them to end (with a GPU, the CUDA context's teardown) while the caller
        does other work. reap_finish(the returned token) takes the answer; no other request
        may come between the two."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        msg = {"op": "reap", "pid": pid, "id": self._next}
        self._next += 1
        try:
            self.control.send(msg)
        except (ChannelClosed, ProtocolViolation, OSError) as e:
            self.close()
            raise RuntimeError("the candidate-process zygote failed: %s" % e)
        return msg["id"]

    def reap_finish(self, token):
        """(wait status or None, processes left behind) of the reap reap_start began."""
        if token is None:
            return None, 0
        try:
            ans, fds = self.control.receive(time.monotonic() + 60)
        except (ChannelClosed, ChannelTimeout, ProtocolViolation) as e:
            self.close()
            raise RuntimeError("the candidate-process zygote failed: %s" % e)
        if ans.get("id") != token:
            for fd in fds:
                os.close(fd)
            self.close()
            raise RuntimeError("the candidate-process zygote answered %r to reap request %d"
                               % (ans.get("id"), token))
        return ans.get("status"), int(ans.get("leftover", 0))

    def close(self):
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                pass
            self.proc = None


class CandidateProcess:
    """One candidate's process, for one evaluation."""

    def __init__(self, zygote, deadline):
        self.zygote = zygote
        self.deadline = deadline  # time.monotonic() by which the whole evaluation must end
        self.pid, self.ch = zygote.spawn()
        self._next = 1
        self.flags = set()
        self.patched = []   # what the candidate's process says the candidate replaced
        self.status = None
        self.leftover = 0
        self.closed = False
        self._hello = None  # request id of a hello sent ahead, not yet answered
        self._greeted = False
        self.memory = None  # MemoryWatch, from watch_memory() on
        self.memory_limit = 0

    def watch_memory(self, limit_bytes):
        """From now on the process (and its session) may hold at most limit_bytes resident;
        past it the process is killed and its loss reported as a memory-limit error."""
        if limit_bytes > 0 and self.memory is None:
            self.memory_limit = limit_bytes
            self.memory = MemoryWatch(self.pid, limit_bytes)

    def say_hello(self, warm_profiler=False):
        """Sends the first request without waiting: the process initialises CUDA (and, asked
        to, the profiler) while the worker does other things. ready() takes the answer."""
        self._hello = self.start("hello", warm_profiler=bool(warm_profiler))

    def settle(self, deadline, during):
        """Waits until the hello sent ahead is answered (the process is then idle)."""
        if self._hello is not None:
            saved, self.deadline = self.deadline, deadline
            try:
                rid, self._hello = self._hello, None
                self.finish(self.next_message(rid, during))
                self._greeted = True
            finally:
                self.deadline = saved

    def ready(self, deadline, during):
        """The process has answered its hello (sent now unless it was sent ahead); from here the
        evaluation's deadline applies."""
        self.deadline = deadline
        if self._hello is None and not self._greeted:
            self.say_hello()
        self.settle(deadline, during)

    def _gone(self, kind, text):
        self.close()
        if self.memory is not None and self.memory.tripped:
            raise CandidateGone("memory", "the candidate's process used %.2f GiB of memory, more "
                                "than the limit of %.2f GiB (eval.memory_limit_gb), and was "
                                "killed" % (self.memory.tripped / 2.0 ** 30,
                                            self.memory_limit / 2.0 ** 30))
        if kind == "crashed":
            text = "%s (%s)" % (text, _describe_status(self.status))
        raise CandidateGone(kind, text)

    def _receive(self, during):
        try:
            ans, fds = self.ch.receive(self.deadline)
        except ChannelTimeout:
            self._gone("timeout", "the candidate's process did not answer in time during %s" %
                       during)
        except ChannelClosed:
            self._gone("crashed", "the candidate's process died during %s" % during)
        except ProtocolViolation as e:
            self.flags.add("protocol_violation")
            self._gone("protocol", "the candidate's process broke the protocol during %s: %s" % (
                during, e))
        for fd in fds:
            os.close(fd)
        return ans

    def send(self, msg, fds=()):
        try:
            self.ch.send(msg, fds)
        except ChannelClosed:
            self._gone("crashed", "the candidate's process died")

    def request(self, op, during, fds=(), **fields):
        """Sends a command; returns the answer. A candidate error in the answer raises
        CandidateError; a lost process raises CandidateGone."""
        rid = self.start(op, fds, **fields)
        return self.finish(self.next_message(rid, during))

    def start(self, op, fds=(), **fields):
        """Sends a command without waiting; its request id."""
        rid = self._next
        self._next += 1
        msg = dict(fields)
        msg.update({"id": rid, "op": op})
        self.send(msg, fds)
        return rid

    def next_message(self, rid, during):
        """The next message, which must belong to request rid (an answer, or one of the
        intermediate messages a command may send before it)."""
        ans = self._receive(during)
        if ans.get("id") != rid:
            self.flags.add("protocol_violation")
            self._gone("protocol", "the candidate's process answered request %r with id %r" % (
                rid, ans.get("id")))
        return ans

    def finish(self, ans):
        """Takes in what a final answer reports (flags, patched names) and raises the
        candidate's error when it is one; returns the answer."""
        flags = ans.get("flags", [])
        if isinstance(flags, list):
            self.flags.update(str(f) for f in flags[:32])
        patched = ans.get("patched", [])
        if isinstance(patched, list):
            self.patched = [str(n)[:100] for n in patched[:20]]
        if "error" in ans:
            kind = str(ans.get("error"))
            if kind not in ("compile", "runtime", "runtime_init"):
                kind = "runtime"
            raise CandidateError(kind, truncate(str(ans.get("excerpt", ""))))
        return ans

    def close(self):
        self.finish_close(self.begin_close())

    def begin_close(self):
        """Starts ending the process (the zygote kills it and what it left); finish_close(the
        returned token) waits for that and records the leftovers. Between the two the caller
        may do its own work, but must not use the zygote or free memory the process mapped."""
        if self.closed:
            return None
        self.closed = True
        if self.memory is not None:
            self.memory.stop()
        try:
            self.ch.close()
            return self.zygote.reap_start(self.pid)
        except RuntimeError:
            self._kill_directly()
            return None

    def finish_close(self, token):
        if token is None:
            return
        try:
            self.status, self.leftover = self.zygote.reap_finish(token)
        except RuntimeError:
            self._kill_directly()
        if self.leftover:
            self.flags.add("leftover_processes")

    def _kill_directly(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
