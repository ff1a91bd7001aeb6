"""Writing output files the way a user expects of `-o PATH`.

A finished file replaces the old one atomically (a reader never sees half
of it, and an interrupted run leaves the old file whole), but the path
keeps meaning what it meant: a symbolic link is written through to its
target, a device or a pipe (`-o /dev/null`, a FIFO) is written into, not
replaced by a regular file, and the file gets the mode any other tool
would give it (the umask, or the mode of the file it replaces), not the
0600 of a temporary file. The importer once replaced `/dev/null` with a
regular file when run as root.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile


def _umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    m = os.umask(0)
    os.umask(m)
    return m


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` ('-': standard output)."""
    if path == "-":
        sys.stdout.write(text)
        return
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", path)
        # A device, a pipe or a socket: the reader is waiting on it.
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
        return
    d = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".remat-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
