"""Paths opened beneath a directory never leave it: by openat2 where the kernel has it, by the
component walk elsewhere (both proven here), and not even while a parent is swapped for a symlink."""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pegasus.config import Settings
from pegasus.tools import beneath
from pegasus.tools.beneath import EscapeError, open_beneath
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolContext, ToolExecutionError


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with openat2 (when this kernel has it) and with the component walk."""
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_openat2_works", False)
    elif not beneath._has_openat2():
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """root/ with a/b/f.txt, links inside (relative, absolute) and out; outside/secret.txt beside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "b" / "f.txt").write_text("inside")
    (outside / "secret.txt").write_text("secret")
    (root / "rel").symlink_to("a/b")
    (root / "abs").symlink_to(root / "a")
    (root / "out").symlink_to(outside)
    (root / "dotdot").symlink_to("../outside")
    (root / "dangling").symlink_to(outside / "new.txt")
    (root / "loop").symlink_to("loop")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    yield fd, outside
    os.close(fd)


def read(fd: int, path: str) -> str:
    handle = open_beneath(fd, path, os.O_RDONLY)
    try:
        return os.read(handle, 100).decode()
    finally:
        os.close(handle)


@pytest.mark.parametrize("path", ["a/b/f.txt", "rel/f.txt", "abs/b/f.txt", "a/../a/b/f.txt", "./a/b//f.txt"])
def test_paths_inside_open(tree: tuple[int, Path], resolution: str, path: str) -> None:
    fd, _ = tree
    assert read(fd, path) == "inside"


@pytest.mark.parametrize("path", ["out/secret.txt", "dotdot/secret.txt", "../outside/secret.txt",
                                  "a/../../outside/secret.txt", "rel/../../../outside/secret.txt"])
def test_paths_leading_out_are_refused(tree: tuple[int, Path], resolution: str, path: str) -> None:
    fd, _ = tree
    with pytest.raises(EscapeError):
        read(fd, path)


def test_a_dangling_link_out_creates_nothing_outside(tree: tuple[int, Path], resolution: str) -> None:
    fd, outside = tree
    with pytest.raises(EscapeError):
        open_beneath(fd, "dangling", os.O_WRONLY | os.O_CREAT)
    assert not (outside / "new.txt").exists()


def test_a_symlink_loop_is_an_error(tree: tuple[int, Path], resolution: str) -> None:
    fd, _ = tree
    with pytest.raises(OSError) as caught:
        read(fd, "loop")
    assert caught.value.errno == errno.ELOOP


def test_make_parents_creates_missing_directories_inside(tree: tuple[int, Path], resolution: str,
                                                         tmp_path: Path) -> None:
    fd, _ = tree
    os.close(open_beneath(fd, "new/deeper/f.txt", os.O_WRONLY | os.O_CREAT, make_parents=True))
    assert (tmp_path / "root" / "new" / "deeper" / "f.txt").is_file()
    with pytest.raises(FileNotFoundError):
        open_beneath(fd, "missing/f.txt", os.O_WRONLY | os.O_CREAT)


def test_a_fifo_is_refused_without_hanging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    os.mkfifo(tmp_path / "pipe")
    registry = registry_for(Settings())
    with pytest.raises(ToolExecutionError, match="pipe is not a regular file"):
        registry.call("read_file", {"path": "pipe"}, ToolContext(tmp_path))
    with pytest.raises(ToolExecutionError, match="pipe: No such device"):  # no reader: refused at open
        registry.call("write_file", {"path": "pipe", "content": "x"}, ToolContext(tmp_path))


# -- the race of issue 15 ----------------------------------------------------------------------------

ROUNDS, MET = 300, 30  # at least this many rounds of a read and a write, this many calls meeting the swap
RACE_MAX_S = 60.0  # a loaded machine runs both sides slower: the counts are waited for, not a time


def _swap_forever(workspace: Path, outside: Path) -> None:
    """Swap workspace/sub for a symlink to outside and back, as fast as it goes."""
    real, sub = workspace / "sub.real", workspace / "sub"
    while True:
        os.rename(sub, real)
        sub.symlink_to(outside)
        sub.unlink()
        os.rename(real, sub)


def test_a_parent_swapped_for_a_symlink_never_lets_a_read_or_write_out(tmp_path: Path, resolution: str) -> None:
    """Issue 15: 28 of 3,000 writes and 25 of 3,000 reads reached outside; here none may, in ROUNDS rounds
    in which at least MET calls met the swap (refused, or the file not there at that instant)."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "sub").mkdir(parents=True)
    outside.mkdir()
    (workspace / "sub" / "f.txt").write_text("inside")
    (outside / "f.txt").write_text("OUTSIDE")
    registry = registry_for(Settings().with_overrides({"tools": {"workspace_root": str(workspace), "confine_reads": True}}))
    ctx = ToolContext(workspace)
    swapper = multiprocessing.get_context("fork").Process(target=_swap_forever, args=(workspace, outside), daemon=True)
    swapper.start()
    calls = outside_reads = met = through = 0
    try:
        deadline = time.monotonic() + RACE_MAX_S
        while calls < ROUNDS or met < MET:
            assert time.monotonic() < deadline, f"{calls} rounds, {met} calls met the swap, {through} went through"
            calls += 1
            try:
                if registry.call("read_file", {"path": "sub/f.txt"}, ctx) == "OUTSIDE":
                    outside_reads += 1
                through += 1
            except ToolExecutionError:
                met += 1  # refused or not there at that instant: both fine
            try:
                registry.call("write_file", {"path": f"sub/w{calls}.txt", "content": "x"}, ctx)
                through += 1
            except ToolExecutionError:
                met += 1
    finally:
        swapper.kill()
        swapper.join()
    outside_writes = len(list(outside.glob("w*.txt")))
    assert (outside_reads, outside_writes) == (0, 0), f"{calls} rounds: {met} calls met the swap, {through} went through"
    print(f"\n{calls} rounds: {met} calls met the swap, {through} went through")
