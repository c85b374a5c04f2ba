"""The runtime's io_uring filter, in a child process of its own (a filter is for life): the three
io_uring calls answer ENOSYS, x32 spellings of them too, and every other call is left alone."""

from __future__ import annotations

import errno
import json
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.deadlines import scaled

PROBE = """
import ctypes, json
from envscaler.sandbox.runtime.seccomp import deny_io_uring

libc = ctypes.CDLL(None, use_errno=True)

def errno_of(number, *args):
    ctypes.set_errno(0)
    libc.syscall(number, *args)
    return ctypes.get_errno()

deny_io_uring()
params = ctypes.create_string_buffer(120)
print(json.dumps({
    "setup": errno_of(425, 4, params),
    "enter": errno_of(426, -1, 0, 0, 0, None, 0),
    "register": errno_of(427, -1, 0, None, 0),
    "x32 setup": errno_of(0x40000000 | 425, 4, params),
    "close(-1)": errno_of(3, -1),
}))
"""


def test_io_uring_calls_are_refused_and_others_are_not() -> None:
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=scaled(30), check=True)
    answers = json.loads(probe.stdout)
    assert answers == {"setup": errno.ENOSYS, "enter": errno.ENOSYS, "register": errno.ENOSYS,
                       "x32 setup": errno.ENOSYS, "close(-1)": errno.EBADF}
