"""The checks of the files tpugen reads and writes for a user, made before any work starts.

``check_input_file(path, label, what)`` returns ``path`` as a ``Path`` when it names an existing
regular file, and raises ``ValueError`` naming ``label`` otherwise: an empty name, a missing
file, a directory, or a pipe or device (reading a FIFO would block; a device need never end).
``writable(path)`` says whether a file can be written there, by trying.
"""

from pathlib import Path

__all__ = ["check_input_file", "writable"]


def check_input_file(path, label: str, what: str = "a file") -> Path:
    """``path`` as a ``Path`` to a regular file; ``ValueError("<label>: ...")`` otherwise
    (``what`` names the kind of file expected)."""
    if not str(path):
        raise ValueError(f"{label}: empty; name {what}")
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{label}: no such file")
    if p.is_dir():
        raise ValueError(f"{label}: is a directory, not {what}")
    if not p.is_file():
        raise ValueError(f"{label}: not a regular file (a pipe or a device); name {what}")
    return p


def writable(path) -> bool:
    """Whether the file ``path`` can be written: tried (a file made for the try is removed),
    since permission bits say nothing to root or of /proc and read-only mounts."""
    path = Path(path)
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError:
        return False
    if not existed:
        path.unlink(missing_ok=True)
    return True
