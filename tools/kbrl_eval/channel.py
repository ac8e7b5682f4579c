"""A message channel between the trusted harness and one candidate process: JSON objects over a
Unix socketpair (never a named socket), each message one length-prefixed frame, optionally with
file descriptors attached (SCM_RIGHTS: the shared-memory buffers of CPU tensors).

The candidate's end is hostile. The harness therefore reads with a deadline, bounds every frame,
decodes only JSON (never pickle) and matches each answer to its request id: a frame that is not
the answer it waits for is a protocol violation of the candidate's, not a crash of the harness."""

import json
import os
import select
import socket
import struct
import time

MAX_FRAME = 1 << 20  # a message of the candidate's is small: a megabyte is a violation
MAX_FDS = 64
_HEADER = struct.Struct("!I")


class ChannelClosed(Exception):
    """The other end is gone (it exited, crashed or closed its socket)."""


class ChannelTimeout(Exception):
    """No complete message before the deadline."""


class ProtocolViolation(Exception):
    """The other end sent something that is not a well-formed message of the protocol."""


class Channel:
    def __init__(self, sock):
        self.sock = sock
        self.sock.setblocking(True)
        self._buf = b""
        self._fds = []

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, msg, fds=()):
        data = json.dumps(msg, allow_nan=False, separators=(",", ":")).encode("utf-8")
        frame = _HEADER.pack(len(data)) + data
        try:
            if fds:
                socket.send_fds(self.sock, [frame[:1]], list(fds))
                self.sock.sendall(frame[1:])
            else:
                self.sock.sendall(frame)
        except OSError as e:
            raise ChannelClosed(str(e))

    def receive(self, deadline=None):
        """The next message and the fds that came with it. deadline: time.monotonic() value."""
        while True:
            if len(self._buf) >= _HEADER.size:
                (n,) = _HEADER.unpack(self._buf[:_HEADER.size])
                if n > MAX_FRAME:
                    raise ProtocolViolation("a frame of %d bytes (at most %d)" % (n, MAX_FRAME))
                if len(self._buf) >= _HEADER.size + n:
                    data = self._buf[_HEADER.size:_HEADER.size + n]
                    self._buf = self._buf[_HEADER.size + n:]
                    fds, self._fds = self._fds, []
                    try:
                        msg = json.loads(data.decode("utf-8"))
                    except (UnicodeDecodeError, ValueError) as e:
                        _close_all(fds)
                        raise ProtocolViolation("a frame that is not JSON: %s" % e)
                    if not isinstance(msg, dict):
                        _close_all(fds)
                        raise ProtocolViolation("a frame that is not a JSON object")
                    return msg, fds
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout()
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    raise ChannelTimeout()
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, MAX_FDS)
            except OSError as e:
                raise ChannelClosed(str(e))
            if not data:
                _close_all(fds)
                raise ChannelClosed("end of stream")
            self._buf += data
            self._fds.extend(fds)
            if len(self._buf) > MAX_FRAME + _HEADER.size:
                raise ProtocolViolation("more than %d bytes without a complete frame" % MAX_FRAME)

    def request(self, msg, deadline=None, fds=()):
        """Sends msg (with its "id") and returns the answer carrying the same id. Anything else
        that arrives first is a protocol violation."""
        self.send(msg, fds)
        answer, got_fds = self.receive(deadline)
        if answer.get("id") != msg["id"]:
            _close_all(got_fds)
            raise ProtocolViolation("an answer with id %r to request %r" % (
                answer.get("id"), msg["id"]))
        return answer, got_fds


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
