"""The few CUDA runtime calls torch does not expose, through ctypes on the libcudart that the
process already loaded (torch's, which load_inline extensions share through its soname):

  * last_error(): cudaGetLastError, which finds a kernel launch that failed without anyone
    checking (too many threads per block, too much shared memory) and clears it, so that the
    failure is the candidate's instead of surfacing in the next torch call of whoever runs next;
  * reset_persisting_l2(): drops the lines a persisting L2 access window kept (a plain L2 flush
    leaves them) and sets the persisting carve-out to zero, before every timed trial;
  * device memory of its own with IPC handles: the buffers the trusted process shares with a
    candidate process are whole cudaMalloc allocations of their own, so that the handle maps
    exactly that buffer (an IPC handle maps the whole allocation, and torch's caching allocator
    would put other tensors, expected outputs among them, in the same allocation).
"""

import ctypes
import os

_lib = None
_IPC_HANDLE_BYTES = 64
_cudaLimitPersistingL2CacheSize = 0x06
_cudaIpcMemLazyEnablePeerAccess = 0x01


class CudaCallFailed(RuntimeError):
    pass


class _IpcHandle(ctypes.Structure):
    """cudaIpcMemHandle_t: 64 opaque bytes, passed by value to cudaIpcOpenMemHandle."""
    _fields_ = [("reserved", ctypes.c_ubyte * _IPC_HANDLE_BYTES)]


def _find_loaded():
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if "libcudart.so" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def lib():
    """The process's libcudart (after torch initialised CUDA), or None when none is found."""
    global _lib
    if _lib is None:
        path = _find_loaded()
        candidates = [path] if path else []
        candidates += ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
        for name in candidates:
            try:
                lib_ = ctypes.CDLL(name)
                lib_.cudaGetErrorName.restype = ctypes.c_char_p
                lib_.cudaGetErrorString.restype = ctypes.c_char_p
                _lib = lib_
                break
            except OSError:
                continue
    return _lib


def error_text(code):
    l = lib()
    name = l.cudaGetErrorName(code).decode(errors="replace")
    text = l.cudaGetErrorString(code).decode(errors="replace")
    return "%s: %s" % (name, text)


def _check(code, what):
    if code != 0:
        raise CudaCallFailed("%s failed: %s" % (what, error_text(code)))


def last_error():
    """'' when no error is pending, else 'cudaErrorName: description' (and the error is
    cleared, as cudaGetLastError does). '' when the runtime library cannot be found."""
    l = lib()
    if l is None:
        return ""
    code = l.cudaGetLastError()
    return "" if code == 0 else error_text(code)


def reset_persisting_l2():
    l = lib()
    if l is None:
        return
    l.cudaDeviceSetLimit(ctypes.c_int(_cudaLimitPersistingL2CacheSize), ctypes.c_size_t(0))
    l.cudaCtxResetPersistingL2Cache()
    l.cudaGetLastError()  # a device without persisting L2 answers "not supported": not ours


def malloc(nbytes):
    p = ctypes.c_void_p()
    _check(lib().cudaMalloc(ctypes.byref(p), ctypes.c_size_t(max(1, nbytes))), "cudaMalloc")
    return p.value


def free(ptr):
    lib().cudaFree(ctypes.c_void_p(ptr))


def ipc_handle(ptr):
    h = _IpcHandle()
    _check(lib().cudaIpcGetMemHandle(ctypes.byref(h), ctypes.c_void_p(ptr)), "cudaIpcGetMemHandle")
    return bytes(bytearray(h.reserved))


def ipc_open(handle):
    if len(handle) != _IPC_HANDLE_BYTES:
        raise CudaCallFailed("an IPC handle of %d bytes" % len(handle))
    h = _IpcHandle()
    ctypes.memmove(ctypes.byref(h), handle, _IPC_HANDLE_BYTES)
    p = ctypes.c_void_p()
    fn = lib().cudaIpcOpenMemHandle
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), _IpcHandle, ctypes.c_uint]
    _check(fn(ctypes.byref(p), h, _cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle")
    return p.value


def ipc_close(ptr):
    lib().cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))
