"""actors/wire/thespian_patches/robustness/child_exits.py ``shutdown_actor``: an exit request a child cannot
be sent removes that child (Thespian's own callback names its loop variable late: the last child)."""

from __future__ import annotations

from typing import Any

import pytest
from thespian.system.transport import SendStatus

from actors.wire.thespian_patches.robustness import child_exits


class Manager:
    """What ``_shutdownActor`` uses of an ActorManager."""

    def __init__(self, children: list[str]) -> None:
        self.childAddresses, self.intents, self.removed = children, [], []  # noqa: N815 - Thespian's name

    def _shutdownActor(self, shutdownChildren: bool = True) -> bool:  # noqa: N802, N803 - Thespian's names
        return True

    def _send_intent(self, intent: Any) -> None:
        self.intents.append(intent)

    def _childInaccessible(self, child: str, intent: Any) -> None:  # noqa: N802 - Thespian's name
        self.removed.append(child)


@pytest.mark.parametrize("shutdown", [child_exits.shutdown_actor, child_exits._SHUTDOWN.original],
                         ids=["patched", "thespian"])
def test_a_refused_exit_request_removes_the_child_it_was_for(shutdown: Any) -> None:
    manager = Manager(["a", "b", "c"])
    assert shutdown(manager, True) is True  # waits for its children
    for intent in manager.intents[:2]:  # a and b are dead: their exit requests cannot be sent
        intent.tx_done(SendStatus.DeadTarget)
    if shutdown is child_exits.shutdown_actor:
        assert manager.removed == ["a", "b"]
    else:
        assert manager.removed == ["c", "c"]  # the late-bound loop variable: a and b are waited for forever
