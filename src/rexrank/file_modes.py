"""The mode of a file written through a temporary file and a rename: `tempfile` creates
its files 0600 whatever the umask, so a results file would be unreadable to the group and
others that every other file of the user's is readable by. `follow_umask` gives it the mode
`open()` would have given it (0666 less the umask)."""
from __future__ import annotations

import os
import threading

_lock = threading.Lock()


def current_umask() -> int:
    """The process's umask: read from /proc on Linux (changing it to read it, the portable
    way, would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def follow_umask(fd_or_path) -> None:
    """Give a newly written file (an open descriptor or a path) the mode open() would have."""
    mode = 0o666 & ~current_umask()
    if isinstance(fd_or_path, int):
        os.fchmod(fd_or_path, mode)
    else:
        os.chmod(fd_or_path, mode)
