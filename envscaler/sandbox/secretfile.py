"""A secret kept in a file of its own: the socket root's service key and the embedded Redis's
password are both made once, by whichever process comes first, and read back by every other.

Made in a staged file and linked into place, so processes that start together agree on one
secret and none reads it half-written. Read back without following a link, and refused when
another user owns it or anyone else may read it: such a secret is no longer one.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


def private_secret(path: Path, make: Callable[[], bytes], max_bytes: int) -> bytes:
    """The secret in ``path`` (at most ``max_bytes`` read), made by ``make`` if there is none.
    Raises ``PermissionError`` for a file this user does not own alone."""
    if not path.exists():
        staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
        try:
            os.write(descriptor, make())
        finally:
            os.close(descriptor)
        try:
            os.link(staged, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            staged.unlink()
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        secret = os.read(descriptor, max_bytes)
    finally:
        os.close(descriptor)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise PermissionError(f"{path} is not this user's alone")
    return secret
