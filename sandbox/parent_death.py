"""Child processes that die with their parent, however the parent ends (even SIGKILL).

``PR_SET_PDEATHSIG`` asks the kernel to signal a process when its parent goes; a clean shutdown
path alone is skipped by SIGKILL or a crash. The signal fires when the *thread* that forked the
child ends, not the process, so children must be started from a thread that lives as long as
their parent (the main thread, or the event loop's thread).
"""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child must not load libraries


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Arm ``signum`` for this process's parent's death, then close the race: a parent that died
    before it was armed has left this process re-parented, and it dies at once.

    Only system calls, so it may run in a ``preexec_fn`` between fork and exec."""
    if _LIBC.prctl(_PR_SET_PDEATHSIG, int(signum)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)
