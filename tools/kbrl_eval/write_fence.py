"""The write fence: before a candidate's code runs, its process gives up writing files anywhere
but in its own folders, with Linux's Landlock (kernel 5.13 on). Reading and executing stay open.

Candidate processes of one machine run as one user and share the extensions folder, where each
candidate source has its build folder (its library, and the record that lets a later process
load that library without building it). Without the fence a candidate could replace another
candidate's library with one that answers from the reference, and that candidate's verdict
would be forged. With it, a candidate process writes only:
  - its own folder (the candidate's files, TMPDIR and HOME point into it),
  - its own build folder (TORCH_EXTENSIONS_DIR, keyed by the hash of its source),
  - /dev (GPU device files are opened for writing; /dev/shm is the sandbox's own) and /proc.
The shared precompiled headers (.kbrl-pch, .kbrl-host-pch) and the host-compiler wrapper
(.kbrl-bin) are read only: the worker has missing headers made (pch_maker.py).
From Landlock ABI 6 on (kernel 6.12) the same domain also scopes signals: a candidate process
cannot signal a process outside it - the worker, or another candidate's process, which a
policy could otherwise kill to lower its group-mates' rewards - only those it started itself.
The restriction is the kernel's, holds for every process the candidate starts, and cannot be
lifted by the process. Where the kernel has no Landlock (or a container's seccomp refuses it)
`restrict_writes` says why and the candidate runs without the fence; the worker reports that
at start (`probe`)."""

import ctypes
import os

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # same numbers on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Access rights that change the file system (EXECUTE, READ_FILE and READ_DIR are left alone).
_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13      # ABI 2: renames and links across folders
_TRUNCATE = 1 << 14   # ABI 3

_ABI1_WRITES = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
                | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)


_SCOPE_SIGNAL = 1 << 1  # ABI 6: no signals to processes outside the domain


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    """The ruleset attributes from ABI 6 on: network rights (none handled here) and scopes."""
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version():
    """Landlock's ABI version on this kernel, or (0, why not)."""
    try:
        libc = _libc()
        v = libc.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError) as e:
        return 0, "no libc syscall(): %s" % e
    if v < 0:
        err = ctypes.get_errno()
        return 0, "the kernel refused Landlock (%s)" % os.strerror(err)
    return int(v), ""


def probe():
    """What the fence will be in this process's candidates: 'landlock ABI N', or 'off: why'."""
    if os.environ.get("KBRL_EVAL_NO_WRITE_FENCE") == "1":
        return "off: KBRL_EVAL_NO_WRITE_FENCE=1"
    abi, why = abi_version()
    if abi <= 0:
        return "off: " + why
    return "landlock ABI %d%s" % (abi, ", signals scoped" if abi >= 6 else "")


def writes_for(abi):
    """The write rights the fence handles on a kernel of this ABI."""
    rights = _ABI1_WRITES
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def restrict_writes(writable):
    """Restricts this process (and all it starts from now on) to writing beneath the folders in
    `writable` (missing ones are created first). Returns '' on success, else why the fence is
    off; the caller decides what that means."""
    if os.environ.get("KBRL_EVAL_NO_WRITE_FENCE") == "1":
        return "KBRL_EVAL_NO_WRITE_FENCE=1"
    abi, why = abi_version()
    if abi <= 0:
        return why
    libc = _libc()
    rights = writes_for(abi)
    attr = _ScopedRulesetAttr(rights, 0, _SCOPE_SIGNAL) if abi >= 6 else _RulesetAttr(rights)
    ruleset = libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return "landlock_create_ruleset: %s" % os.strerror(ctypes.get_errno())
    try:
        for path in writable:
            os.makedirs(path, exist_ok=True)
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(rights, fd)
                if libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset),
                                ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    return "landlock_add_rule %s: %s" % (path, os.strerror(ctypes.get_errno()))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0:
            return "prctl(PR_SET_NO_NEW_PRIVS): %s" % os.strerror(ctypes.get_errno())
        if libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset),
                        ctypes.c_uint32(0)) < 0:
            return "landlock_restrict_self: %s" % os.strerror(ctypes.get_errno())
    finally:
        os.close(ruleset)
    return ""
