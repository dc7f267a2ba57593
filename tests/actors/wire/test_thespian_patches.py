"""Thespian's patches are pinned, sorted, documented and checked (actors/thespian_patches).

Every pinned fingerprint is the installed (pinned) Thespian's; setup.cfg pins the version the
patches name; security, robustness and speed patches live apart and each module points to its
section of docs/thespian-patches.md.  The check tells a changed, missing or foreign-replaced target
from Thespian's own or a Pegasus one; another Thespian refuses every security and robustness patch
in one line, a changed target refuses its patch by name; a speed patch that cannot apply is one
warning line, once.  (The same paths through real
processes and the CLI: tests/integration/test_thespian_patches.py.)
"""

from __future__ import annotations

import configparser
import pickle
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

import actors.wire.thespian_patches as patches
from actors.wire.frames import UnreadableMessage
from actors.wire.thespian_patches import Kind, PatchRefused, base, readers, robustness, security, speed
from actors.wire.thespian_patches.base import Target, fingerprint
from actors.wire.thespian_patches.robustness import fresh_retry, logger_restart
from actors.wire.thespian_patches.security import frame_auth
from actors.wire.thespian_patches.speed import whole_messages
from pegasus.task.models import _unpickled

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / base.DOCS


def test_every_patch_applies_to_the_installed_thespian() -> None:
    checked = patches.check()
    assert checked.version == base.PINNED and checked.problems == {}


@pytest.mark.parametrize("target", [t for p in patches.PATCHES for t in p.targets],
                         ids=[f"{p.name}:{t.label}" for p in patches.PATCHES for t in p.targets])
def test_every_pinned_fingerprint_is_the_installed_thespians(target: Target) -> None:
    """The hashes CI checks: a Thespian whose code changed under a patch fails here, by target."""
    assert target.found() == target.expected


def test_a_class_pinned_whole_keeps_its_fingerprint_when_a_patch_replaces_one_of_its_members(monkeypatch) -> None:
    """compact_addresses pins IPActorAddress, whose __hash__ quick_idle_checks replaces; convention_timing pins
    LocalConventionState, two of whose methods quiet_admin replaces: the order of install must not matter."""
    classes = [t for p in patches.PATCHES for t in p.targets if isinstance(t.original, type)]
    replaced = [t for p in patches.PATCHES for t in p.targets if any(t.owner is c.original for c in classes)]
    assert replaced  # the case exists
    for target in replaced:
        monkeypatch.setattr(target.owner, target.name, base.mark(lambda self: None, "test"))
    assert patches.check().problems == {}


def test_every_patch_pins_the_source_of_the_thespian_code_it_relies_on() -> None:
    """A setting ("value") is pinned by the code that reads it: presence alone would not see a
    Thespian that copies it at import."""
    for patch in patches.PATCHES:
        assert any(t.expected.startswith("source ") for t in patch.targets), patch.name


def test_setup_cfg_pins_the_thespian_the_patches_are_written_for() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    requires = [line.strip() for line in cfg["options"]["install_requires"].splitlines()]
    assert f"thespian=={base.PINNED}" in requires
    assert [line for line in requires if line.startswith("thespian")] == [f"thespian=={base.PINNED}"]


@pytest.mark.parametrize(("package", "modules", "kind"), [(security, patches.SECURITY, Kind.SECURITY),
                                                          (robustness, patches.ROBUSTNESS, Kind.ROBUSTNESS),
                                                          (speed, patches.SPEED, Kind.SPEED)])
def test_security_robustness_and_speed_patches_live_apart(package, modules, kind) -> None:
    """Each module of security/ (robustness/, speed/) is one registered patch of that kind, and no other is."""
    found = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert found == {module.__name__.rsplit(".", 1)[1] for module in modules}
    for module in modules:
        assert module.PATCH.kind is kind and module.PATCH.name == module.__name__.rsplit(".", 1)[1]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.M)}


def test_every_patch_module_points_to_its_section_of_the_docs() -> None:
    anchors = _anchors(DOCS.read_text())
    assert patches.UPGRADING.split("#")[1] in anchors
    for module in (*patches.SECURITY, *patches.ROBUSTNESS, *patches.SPEED):
        assert module.PATCH.section in anchors, module.__name__
        assert module.PATCH.where in " ".join(module.__doc__.split()), module.__name__
    said = " ".join(readers.__doc__.split())
    for reader in readers.READERS:  # internals a carrier uses unpatched, checked as their kind says
        assert reader.section in anchors and base.DOCS in said and reader.section in said, reader.name


class _Thespian:
    """Stands for a Thespian class whose methods patches replace."""

    def step(self) -> int:
        return 1

    def other(self) -> int:
        return 2


def _target(name: str = "step", expected: str | None = None) -> Target:
    return Target(_Thespian, name, expected or fingerprint(getattr(_Thespian, name, None)))


def test_a_target_as_written_for_or_replaced_by_pegasus_applies(monkeypatch) -> None:
    target = _target()
    assert target.problem() is None
    monkeypatch.setattr(_Thespian, "step", base.mark(lambda self: 3, "a_patch"))
    assert target.problem() is None


def test_a_changed_missing_or_foreign_replaced_target_is_named(monkeypatch) -> None:
    changed = _target(expected=fingerprint(_Thespian.other))
    assert changed.problem() == (f"_Thespian.step is not the code the patch was written for "
                                 f"({fingerprint(_Thespian.step)}, expected {fingerprint(_Thespian.other)})")
    assert "(missing, expected" in Target(_Thespian, "gone", "source 0").problem()
    target = _target()
    monkeypatch.setattr(_Thespian, "step", lambda self: 3)
    assert target.problem() == "_Thespian.step was replaced by something other than Pegasus"


def test_a_fingerprint_is_of_the_source() -> None:
    assert fingerprint(_Thespian.step) != fingerprint(_Thespian.other)
    assert fingerprint(_Thespian.step).startswith("source ") and fingerprint(base) == f"module {base.__name__}"
    assert fingerprint(_Thespian) != fingerprint(type("_Thespian", (), {"step": _Thespian.other}))


def test_another_thespian_refuses_every_security_and_robustness_patch_in_one_line(monkeypatch) -> None:
    monkeypatch.setattr(patches, "installed_version", lambda: "4.0.2")
    checked = patches.check()
    assert {p.name for p in checked.refused()} == {m.PATCH.name for m in (*patches.SECURITY, *patches.ROBUSTNESS)} | {
        readers.SENT_CALLBACKS.name, readers.CLIENT_SENDS.name}
    with pytest.raises(PatchRefused) as refused:
        patches.verify()
    assert str(refused.value) == (
        "Thespian security patches bind_address, frame_auth, private_files, thespian_log and robustness patches "
        "fresh_retry, convention_timing, logger_restart, child_exits, peer_slots, sent_callbacks, client_sends cannot apply: "
        "Thespian 4.0.2 is "
        "installed, not 4.0.1; "
        "Pegasus needs thespian==4.0.1 (pip install thespian==4.0.1; see docs/thespian-patches.md#moving-to-another-thespian)")


def test_a_changed_target_of_what_a_clients_send_waits_on_refuses_the_start(monkeypatch) -> None:
    target = readers.CLIENT_SENDS.targets[0]  # systemBase._run_transport
    monkeypatch.setattr(target, "expected", "source 0")
    with pytest.raises(PatchRefused, match=r"^Thespian robustness patch client_sends cannot apply: .*_run_transport"):
        patches.verify()


def test_a_changed_security_target_refuses_naming_it(monkeypatch) -> None:
    target = patches.frame_auth.PATCH.targets[0]
    monkeypatch.setattr(target, "expected", "source 0")
    with pytest.raises(PatchRefused, match=r"^Thespian security patch frame_auth cannot apply: "
                                           r"transport\.TCPTransport\.ReceiveBuffer is not the code"):
        patches.verify()


def test_a_changed_robustness_target_refuses_naming_it_and_what_differs(monkeypatch) -> None:
    monkeypatch.setattr(fresh_retry.PATCH.targets[1], "expected", "source 0")
    with pytest.raises(PatchRefused) as refused:
        patches.verify()
    assert str(refused.value) == (
        "Thespian robustness patch fresh_retry cannot apply: TCPTransport._next_XMIT_6 is not the code the patch was "
        f"written for ({fingerprint(fresh_retry.PATCH.targets[1].original)}, expected source 0); Pegasus needs "
        "Thespian 4.0.1's own code there (see docs/thespian-patches.md#fresh-retry)")


def test_two_changed_patches_refuse_naming_each_and_what_differs(monkeypatch) -> None:
    monkeypatch.setattr(fresh_retry.PATCH.targets[0], "expected", "source 0")
    monkeypatch.setattr(logger_restart.PATCH.targets[0], "expected", "source 1")
    monkeypatch.setattr(whole_messages.PATCH.targets[0], "expected", "source 2")  # speed: not a reason to refuse
    with pytest.raises(PatchRefused) as refused:
        patches.verify()
    assert str(refused.value) == (
        "Thespian robustness patches fresh_retry, logger_restart cannot apply: "
        f"fresh_retry: TCPTransport._next_XMIT_1 is not the code the patch was written for "
        f"({fingerprint(fresh_retry.PATCH.targets[0].original)}, expected source 0); "
        f"logger_restart: MultiProcReplicator.childDied is not the code the patch was written for "
        f"({fingerprint(logger_restart.PATCH.targets[0].original)}, expected source 1); "
        "Pegasus needs Thespian 4.0.1's own code there (see docs/thespian-patches.md#moving-to-another-thespian)")


def test_a_speed_patch_that_cannot_apply_is_one_warning_line_once(monkeypatch, capsys) -> None:
    monkeypatch.setattr(whole_messages.PATCH.targets[1], "expected", "source 0")
    monkeypatch.setattr(patches, "_warned", set())
    checked = patches.verify()
    assert [p.name for p in checked.skipped()] == ["whole_messages"] and not checked.refused()
    assert not checked.applies(whole_messages.PATCH) and checked.applies(patches.poll_selector.PATCH)
    assert capsys.readouterr().err.splitlines() == [
        "pegasus: warning: running without the Thespian speed patch whole_messages: TCPTransport._next_XMIT_2 is not "
        f"the code the patch was written for ({fingerprint(whole_messages.PATCH.targets[1].original)}, expected "
        "source 0) (see docs/thespian-patches.md#whole-messages)"]
    patches.verify()
    assert capsys.readouterr().err == ""  # once per process


class _NewerModel:
    """A model a newer member has and this process lacks, pickled as ``_Model.__reduce__`` writes one."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickled, ("ContextV2", {"x": 1}, {"x"})


def test_an_authentic_message_holding_a_model_this_process_lacks_is_answered_unreadable_not_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read again with what is missing stood in for (frame_auth's ``_sender_only``), so its sender hears why."""
    monkeypatch.setattr(frame_auth, "report", lambda *args: None)
    data = memoryview(pickle.dumps(("sender-address", {"context": _NewerModel()})))
    with pytest.raises(KeyError) as first:
        pickle.loads(data)
    sender, answer = frame_auth._sender_only(data, first.value, "peer")
    assert sender == "sender-address" and isinstance(answer, UnreadableMessage) and "ContextV2" in answer.error
