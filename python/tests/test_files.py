"""Output files keep what their path means (remat_torch.files)."""

from __future__ import annotations

import os
import stat
import threading

from remat_torch.files import write_text


def test_a_link_a_pipe_and_the_mode_are_kept(tmp_path):
    """The importer wrote through a temporary file renamed over the path: a symbolic link
    became a regular file (its target untouched), a pipe's reader got nothing (the pipe
    was replaced; `-o /dev/null` as root replaced the machine's /dev/null), and every
    file got the temporary file's mode 0600 whatever the umask."""
    target = tmp_path / "graph.yaml"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    write_text(str(link), "new\n")
    assert link.is_symlink()
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640

    old = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.yaml"
        write_text(str(fresh), "x\n")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    finally:
        os.umask(old)

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_text(str(fifo), "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".remat-")]
