"""No io_uring for anything a sandbox runs: a seccomp filter of our own, stacked on the engine's.

io_uring does its I/O from kernel workers, beside the system calls that a seccomp profile
filters, and has been a steady source of kernel privilege escalations; Docker 20.10's default
profile allows it. The kernel stacks seccomp filters (a call goes through only if every filter
lets it), so a filter that refuses exactly ``io_uring_setup``, ``io_uring_enter`` and
``io_uring_register`` gives Docker's default profile plus these denials under runc (and gVisor's
own system-call surface plus them under runsc) without copying Docker's profile or keeping it in
step. The first process of a sandbox installs it before any untrusted code exists; every process
it forks inherits it, and no process can remove it.
"""

from __future__ import annotations

import ctypes
import errno
import struct

# io_uring's numbers are the same on every architecture since Linux 5.1 (the generic table), so
# the filter needs no architecture check; the x32 bit is masked off so x32 callers match too.
IO_URING_SYSCALLS = range(425, 428)  # io_uring_setup, io_uring_enter, io_uring_register
_X32_SYSCALL_BIT = 0x40000000

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
# classic BPF opcodes
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JGE_K = 0x35
_JGT_K = 0x25
_RET_K = 0x06


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _instruction(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _program() -> bytes:
    """``nr & ~x32 in IO_URING_SYSCALLS`` -> ENOSYS (callers fall back as on a kernel without
    io_uring), anything else -> allowed here (and judged by the other filters)."""
    return b"".join([
        _instruction(_LD_W_ABS, 0),  # seccomp_data.nr
        _instruction(_ALU_AND_K, ~_X32_SYSCALL_BIT & 0xFFFFFFFF),
        _instruction(_JGE_K, IO_URING_SYSCALLS.start, jt=0, jf=2),
        _instruction(_JGT_K, IO_URING_SYSCALLS.stop - 1, jt=1, jf=0),
        _instruction(_RET_K, _SECCOMP_RET_ERRNO | errno.ENOSYS),
        _instruction(_RET_K, _SECCOMP_RET_ALLOW),
    ])


def deny_io_uring() -> None:
    """Install the filter on this process (and so on everything it forks from now on).
    ``no_new_privs`` first: the kernel requires it (or CAP_SYS_ADMIN) to install a filter, and
    the Docker backend sets it already."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]  # the kernel reads whole registers
    program = _program()
    fprog = _SockFprog(len(program) // 8, program)
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
