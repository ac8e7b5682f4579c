"""Tensors the trusted process shares with one candidate process, and nothing else.

The trusted side (`SharedArena`) allocates each shared buffer on its own: on the GPU a
cudaMalloc of its own, exported with a CUDA IPC handle; on the CPU an anonymous memfd, passed
over the channel with SCM_RIGHTS. The candidate's side (`open_shared`) maps exactly those
buffers: the inputs it reads (and may scribble on: the trusted side keeps checksums) and the
output buffers it copies its results into. Expected outputs, the reference and everything else
of the trusted process stay in memory the candidate process cannot name.

A descriptor is plain JSON: {"kind": "cuda"|"cpu", "shape", "dtype", "nbytes", and "handle"
(hex of the IPC handle) or "fd" (index into the fds sent with the message)}."""

import mmap
import os

import torch

from . import cudart

_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def dtype_of(name):
    if name not in _DTYPES:
        raise ValueError("dtype %r cannot be shared" % name)
    return _DTYPES[name]


class _CudaBuffer:
    """An object torch.as_tensor can view without copying (__cuda_array_interface__)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2}


def _view(raw, shape, dtype):
    numel = 1
    for s in shape:
        numel *= s
    flat = raw[:numel * torch.empty((), dtype=dtype).element_size()]
    return flat.view(dtype)[:numel].view(list(shape))


def _nbytes(shape, dtype):
    numel = 1
    for s in shape:
        numel *= int(s)
    return numel * torch.empty((), dtype=dtype).element_size()


class SharedArena:
    """The trusted side: shared buffers of one evaluation. close() frees them all (after the
    candidate process is gone)."""

    def __init__(self, cuda, device):
        self.cuda = cuda
        self.device = device
        self._keys = 0
        self._ptrs = []
        self._maps = []
        self._fds = []

    def new(self, shape, dtype):
        """(tensor, descriptor, fds to send with it)."""
        shape = [int(s) for s in shape]
        nbytes = _nbytes(shape, dtype)
        alloc = max(nbytes, 1)
        if self.cuda:
            ptr = cudart.malloc(alloc)
            self._ptrs.append(ptr)
            raw = torch.as_tensor(_CudaBuffer(ptr, alloc), device=self.device)
            desc = {"kind": "cuda", "handle": cudart.ipc_handle(ptr).hex()}
            fds = []
        else:
            fd = os.memfd_create("kbrl-shared", os.MFD_CLOEXEC)
            os.ftruncate(fd, alloc)
            m = mmap.mmap(fd, alloc)
            self._maps.append(m)
            self._fds.append(fd)
            raw = torch.frombuffer(m, dtype=torch.uint8)
            desc = {"kind": "cpu", "fd": 0}
            fds = [fd]
        self._keys += 1
        desc.update({"shape": shape, "dtype": dtype_name(dtype), "nbytes": alloc,
                     "key": self._keys})
        return _view(raw, shape, dtype), desc, fds

    def like(self, t):
        return self.new(list(t.shape), t.dtype)

    def close(self):
        if self.cuda and self._ptrs:
            torch.cuda.synchronize()
            for p in self._ptrs:
                cudart.free(p)
        self._ptrs = []
        for m in self._maps:
            try:
                m.close()
            except BufferError:  # a view still exported: the mapping goes with the process
                pass
        self._maps = []
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def clone_args(args):
    """An argument list with every tensor cloned."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def encode_value(v):
    """A plain Python value (number, string, None, tuples/lists/dicts of them) as JSON that
    decode_value gives back with the same types; None when it is not plain."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"v": v}
    if isinstance(v, (tuple, list)):
        items = [encode_value(x) for x in v]
        if any(x is None for x in items):
            return None
        return {"tuple" if isinstance(v, tuple) else "list": items}
    if isinstance(v, torch.dtype):
        return {"dtype": dtype_name(v)}
    return None


def decode_value(j):
    if "v" in j:
        return j["v"]
    if "tuple" in j:
        return tuple(decode_value(x) for x in j["tuple"])
    if "list" in j:
        return [decode_value(x) for x in j["list"]]
    if "dtype" in j:
        return dtype_of(j["dtype"])
    raise ValueError("not an encoded value: %r" % (j,))


def pack(entries):
    """[(descriptor, fds)] -> (descriptors, fds): one fd list for a message, each CPU
    descriptor's "fd" renumbered to its place in it."""
    descs, all_fds = [], []
    for desc, fds in entries:
        desc = dict(desc)
        if fds:
            desc["fd"] = len(all_fds)
            all_fds.extend(fds)
        descs.append(desc)
    return descs, all_fds


class SharedView:
    """The candidate's side: the buffers it was given, each mapped once (by its key) until
    released."""

    def __init__(self, device):
        self.device = device
        self._open = {}  # key -> (tensor, ptr or mmap)

    def open(self, desc, fds):
        key = int(desc["key"])
        if key in self._open:
            return self._open[key][0]
        shape = [int(s) for s in desc["shape"]]
        dtype = dtype_of(desc["dtype"])
        nbytes = int(desc["nbytes"])
        if desc["kind"] == "cuda":
            handle = cudart.ipc_open(bytes.fromhex(desc["handle"]))
            raw = torch.as_tensor(_CudaBuffer(handle, nbytes), device=self.device)
        else:
            handle = mmap.mmap(fds[int(desc["fd"])], nbytes)
            raw = torch.frombuffer(handle, dtype=torch.uint8)
        t = _view(raw, shape, dtype)
        self._open[key] = (t, handle)
        return t

    def release(self, keep=()):
        """Unmaps every buffer whose key is not in keep (the caller holds no view of them)."""
        for key in [k for k in self._open if k not in keep]:
            _, handle = self._open.pop(key)
            if isinstance(handle, int):
                torch.cuda.synchronize()
                cudart.ipc_close(handle)
            else:
                try:
                    handle.close()
                except BufferError:
                    pass
