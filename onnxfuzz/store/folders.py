"""Output folders: refused up front when they cannot be written."""

from __future__ import annotations

import os
from pathlib import Path

from onnxfuzz.errors import UsageError


def writable_folder(path: Path, flag: str = "--out", keep: bool = False) -> Path:
    """Refuse a folder that cannot be created or written, before any work starts: an
    unwritable output folder is a set-up error (exit 2), not a traceback after the first
    test. Tried for real (create the missing folders and a file, then remove what was made
    unless ``keep``): ``os.access`` says yes to root everywhere, /proc and read-only mounts
    included."""
    made: list[Path] = []
    try:
        probe = path
        while not probe.exists():
            made.append(probe)
            probe = probe.parent
        for folder in reversed(made):
            folder.mkdir()
        test = path / f".onnxfuzz-write-test-{os.getpid()}"
        test.write_bytes(b"")
        test.unlink()
        if keep:
            made = []
    except OSError as e:
        raise UsageError(
            f"{flag}: cannot create or write {path} ({e.strerror or e}); choose a folder "
            "you can write"
        ) from None
    finally:
        for folder in made:  # innermost first: nothing is left behind
            if folder.is_dir():
                folder.rmdir()
    return path
