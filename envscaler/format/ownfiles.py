"""Reading an environment folder's own files, never what a link in it points to.

The gateway runs with more rights than a package's author: a ``data/db.json`` (or ``env.py``, or
a ``data`` folder) that is a symbolic link to a file of the host would have that file served as a
session's state and in tool results. So every part of the path below the environment's folder
must be a real folder or file of it (no link, no ``..``), and the file must be a regular file (a
FIFO would block the loader, a device would never end).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath


def read_own_file(folder: Path, relative: str) -> bytes:
    """The bytes of ``folder / relative``. Raises ``FileNotFoundError`` when it is missing and
    ``OSError`` (its ``strerror`` says why) when a part of it is a link, climbs out of ``folder``
    or is not a regular file."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("", ".", "..") for part in parts) or parts[0] == "/":
        raise OSError(errno.EINVAL, f"{relative!r} is not a path inside the environment's folder")
    path = folder
    for part in parts:
        path = path / part
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise OSError(errno.ELOOP, f"{path.relative_to(folder)} is a symbolic link; an "
                          "environment's files must be its own, not links")
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, f"{relative} is not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read()
    finally:
        os.close(descriptor)
