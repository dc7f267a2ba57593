"""The gateway keeper starts a dead HTTP gateway again as the one supervision core decides under its ``SPEC``
(no restart policy of its own): at once, then 1 s doubling, and past 5 deaths a minute every 30 s with an
alarm; a gateway that stayed up a minute starts over.  The keeper in a real system: tests/integration/test_metrics.py."""

from __future__ import annotations

from pathlib import Path

from actors import gateway_keeper
from actors.gateway_keeper import GATEWAY, SPEC
from pegasus.supervision import Exited, StartAgain, Started, Supervision


def test_a_dying_gateway_is_started_again_at_once_then_with_a_doubling_pause_and_a_crash_loop_is_an_alarm() -> None:
    supervision, now, seen = Supervision({GATEWAY: SPEC}), 0.0, []
    for _ in range(7):
        supervision.step(Started(GATEWAY, GATEWAY, now))
        now += 1.0
        seen.append([(type(c).__name__, getattr(c, "delay_s", None)) for c in
                     supervision.step(Exited(GATEWAY, now, "exit status 1"))])
    assert seen == [[("StartAgain", 0.0)], [("StartAgain", 1.0)], [("StartAgain", 2.0)], [("StartAgain", 4.0)],
                    [("StartAgain", 8.0)], [("Alarm", None), ("StartAgain", 30.0)], [("Alarm", None), ("StartAgain", 30.0)]]
    supervision.step(Started(GATEWAY, GATEWAY, now))
    [again] = supervision.step(Exited(GATEWAY, now + 120.0, "exit status 1"))  # up two minutes: a fresh streak
    assert isinstance(again, StartAgain) and again.delay_s == 0.0 and again.deaths == 8


def test_the_gateway_process_is_given_the_tree_this_code_is_in_first_on_its_path() -> None:
    """Not the tree's parent: its other folders would come before the standard library, and a relative
    PYTHONPATH (read from the gateway's state dir) would leave it on an installed Pegasus's code."""
    assert (gateway_keeper._PROJECT_ROOT / "actors" / "gateway_keeper.py").resolve() == \
        Path(gateway_keeper.__file__).resolve()
