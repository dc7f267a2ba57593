"""What a system's processes share (actors/runtime/sharing.preload_system, issue 33): the actor tree
and every pydantic schema are built once, before the admin is forked, and every forked process
freezes what it inherited (each process built the config's schemas at its first Settings: 0.05-0.3 s
of CPU, and the collections of that build copied 6-13 MiB of inherited heap; docs/memory.md)."""

from __future__ import annotations

import gc
import os

import pydantic

from actors.runtime import sharing


def _models(root: type) -> list[type]:
    return [m for sub in root.__subclasses__() for m in (sub, *_models(sub))]


def test_after_the_preload_no_schema_of_pegasus_is_left_to_build() -> None:
    sharing.preload_system(freeze_here=False)
    ours = [m for m in _models(pydantic.BaseModel) if m.__module__.startswith(("pegasus.", "actors."))]
    from pegasus.config import Settings
    assert Settings in ours and len(ours) > 50  # the actor tree is loaded: the config, the task models, ...
    assert [m.__qualname__ for m in ours if not m.__pydantic_complete__] == []


def test_a_process_forked_after_the_preload_freezes_what_it_inherited_and_this_one_does_not() -> None:
    sharing.preload_system(freeze_here=False)
    here = gc.get_freeze_count()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports and exits
        os.write(write, str(gc.get_freeze_count()).encode())
        os._exit(0)
    os.close(write)
    try:
        frozen = int(os.read(read, 64))
    finally:
        os.close(read)
        os.waitpid(child, 0)
    assert frozen > 1000  # the whole inherited heap
    assert gc.get_freeze_count() == here  # the client's own process is left as it was
