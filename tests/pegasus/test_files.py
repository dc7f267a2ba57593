"""Private state: directories 0700, files 0600, another user's directory refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pegasus import files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_private_dir_is_created_0700_and_an_open_one_narrowed(tmp_path: Path) -> None:
    """A new state directory is 0700; an existing 0755 one is narrowed to 0700."""
    created = files.private_dir(tmp_path / "a" / "state")
    assert mode(created) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    os.chmod(wide, 0o755)
    files.private_dir(wide)
    assert mode(wide) == 0o700


def test_private_dir_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(files.StateDirError, match="not a directory"):
        files.private_dir(tmp_path / "f")


def test_write_private_is_0600_and_atomic(tmp_path: Path) -> None:
    """The file is 0600 whatever the umask, and no temporary file is left beside it."""
    old = os.umask(0)
    try:
        files.write_private(tmp_path / "key", b"secret")
    finally:
        os.umask(old)
    assert (tmp_path / "key").read_bytes() == b"secret"
    assert mode(tmp_path / "key") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]


def test_open_private_narrows_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    fd = files.open_private(path)
    os.write(fd, b"new\n")
    os.close(fd)
    assert mode(path) == 0o600 and path.read_text() == "old\nnew\n"


def test_tighten_narrows_a_tree_and_leaves_links_alone(tmp_path: Path) -> None:
    """State written by an older Pegasus (0755 / 0644) becomes private; a symlink is not followed."""
    root = tmp_path / "state"
    (root / "logs").mkdir(parents=True)
    (root / "pegasus.db").write_text("db")
    (root / "logs" / "pegasus.jsonl").write_text("{}")
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (root / "link").symlink_to(outside)
    for path, wide in ((root, 0o755), (root / "logs", 0o755), (root / "pegasus.db", 0o644),
                       (root / "logs" / "pegasus.jsonl", 0o644)):
        os.chmod(path, wide)
    files.tighten(root)
    assert mode(root) == 0o700 and mode(root / "logs") == 0o700
    assert mode(root / "pegasus.db") == 0o600 and mode(root / "logs" / "pegasus.jsonl") == 0o600
    assert mode(outside) == 0o644
