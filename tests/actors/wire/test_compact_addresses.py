"""compact_addresses (actors/wire/thespian_patches/speed): a plain IPv4 TCP actor address pickles as its
four values and unpickles as the same address; any other address pickles as Thespian's own."""

from __future__ import annotations

import copyreg
import pickle
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from thespian.actors import ActorAddress
from thespian.system.addressManager import ActorAddressManager, CannotPickleAddress
from thespian.system.transport.IPBase import RoutedTCPv4ActorAddress, TCPv4ActorAddress, TCPv6ActorAddress

from actors.messages import StageRequest, Work, WorkDone
from actors.wire import thespian_patches
from actors.wire.thespian_patches.speed import compact_addresses
from actors.wire.thespian_patches.speed.quick_idle_checks import _ADDRESS_HASH

CACHES = ("_str_form", _ADDRESS_HASH)  # __str__'s text, quick_idle_checks' hash: never pickled


@pytest.fixture(autouse=True)
def installed() -> Iterator[None]:
    """The patch as every Pegasus process has it (the dispatch table is per process: put back as it was)."""
    before = copyreg.dispatch_table.get(ActorAddress)
    compact_addresses.install()
    yield
    if before is None:
        copyreg.dispatch_table.pop(ActorAddress, None)
    else:
        copyreg.dispatch_table[ActorAddress] = before


def _state(address: ActorAddress) -> dict[str, object]:
    return {k: v for k, v in vars(address.addressDetails).items() if k not in CACHES}


def _same(a: ActorAddress, b: ActorAddress) -> bool:
    return a == b and type(b.addressDetails) is type(a.addressDetails) and _state(a) == _state(b) and str(a) == str(b)


def test_a_frame_with_a_workers_work_done_is_under_200_bytes() -> None:
    """A frame's pickle is (sender, message): Thespian's own pickle of the sender alone was 257 bytes
    (the WorkDone frame 338)."""
    sender = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001, external=False))
    frame = pickle.dumps((sender, WorkDone(17)))
    assert len(frame) < 200
    back, done = pickle.loads(frame)
    assert _same(sender, back) and done == WorkDone(17)


@given(st.sampled_from(["127.0.0.1", "10.1.2.3", "192.168.0.7"]), st.integers(1, 65535),
       st.sampled_from(["", "0.0.0.0", "127.0.0.1"]))
def test_an_ipv4_tcp_address_comes_back_the_same(host: str, port: int, bind: str) -> None:
    address = ActorAddress(TCPv4ActorAddress(host, port, external=False))
    address.addressDetails.bindname = (bind, port)
    assert _same(address, pickle.loads(pickle.dumps(address)))
    str(address)  # (its text is kept on it now: still four values)
    data = pickle.dumps(address, protocol=0)
    assert b"tcp_address" in data and _same(address, pickle.loads(data))


@pytest.mark.parametrize("details", [RoutedTCPv4ActorAddress("127.0.0.1", 40002, None, None, False),
                                     TCPv6ActorAddress("::1", 40003, external=False), "a string address"],
                         ids=["routed", "ipv6", "string"])
def test_another_address_pickles_as_thespians_own(details: object) -> None:
    address = ActorAddress(details)
    data = pickle.dumps(address)
    assert b"tcp_address" not in data
    back = pickle.loads(data)
    assert type(back.addressDetails) is type(details) and str(back) == str(address)


def test_an_address_the_manager_imported_or_hashed_still_pickles_as_four_values() -> None:
    """What a pool's Work carries: the requester's address as its actor received it (the address manager's
    marks on it, quick_idle_checks' cached hash on its details), which Thespian's own pickle leaves out."""
    me = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40005, external=False))
    requester = pickle.loads(pickle.dumps(ActorAddress(TCPv4ActorAddress("127.0.0.1", 40006, external=False))))
    ActorAddressManager(me, me).importAddr(requester)
    requester.addressDetails.__dict__[_ADDRESS_HASH] = hash(requester.addressDetails)  # as quick_idle_checks keeps it
    data = pickle.dumps((me, Work(3, StageRequest("t", 1, "think"), requester)))
    assert data.count(b"tcp_address") == 1 and b"IPBase" not in data  # (memoized: named once)
    _, work = pickle.loads(data)
    assert _same(requester, work.reply_to) and vars(work.reply_to).keys() == {"_aaddr"}


def test_a_local_address_pickles_as_thespians_own() -> None:
    me = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40007, external=False))
    with pytest.raises(CannotPickleAddress):  # no translation yet: Thespian's own refusal
        pickle.dumps(ActorAddressManager(me, me).createLocalAddress())


def test_values_that_are_not_an_address_are_refused() -> None:
    with pytest.raises(pickle.UnpicklingError):
        compact_addresses.tcp_address("127.0.0.1", "40001", "", 40001)


def test_every_pegasus_process_installs_it() -> None:
    """``thespian_patches.install`` installs each speed patch that applies: this one is one of them."""
    assert compact_addresses in thespian_patches.SPEED and thespian_patches.check().applies(compact_addresses.PATCH)
