"""The home host's side of a task actor: the stage pools' cores in its process (``pegasus.pool.home``).

A task actor told a ``PoolConfig`` hosts that pool from then on: its workers are its children, their
messages and the pool's timers come here, and a stage one of its runs asks reaches the pool without a
message (the worker's one answer frees it too).  Requests from other task actors and the supervisor
come as ``StageRequest``s naming their pool.  Commands are carried out by ``PoolCarrier``, as in a pool
process (actors/pool.py).
"""

from __future__ import annotations

import os
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, PoisonMessage, WakeupMessage

from actors.messages import PoolConfig, PoolReady, StageRequest, StageResult
from actors.pool_carrier import POOL_INPUTS, PoolCarrier, refused_work
from actors.runtime.system import member_name
from pegasus.pool import inputs as i
from pegasus.pool.home import ForPool, HomePools, PoolTimer

# What a home handles besides its runs' messages (its requests and timers are told apart below).
HOME_MESSAGES = frozenset({PoolConfig, StageRequest, *POOL_INPUTS})


class HomePoolsHost(ActorTypeDispatcher):
    """A task actor's pools, when it is their home; ``answer_here`` takes an answer for one of its runs."""

    def _home_init(self) -> None:
        self.home = HomePools()
        self._carriers: dict[str, PoolCarrier] = {}

    def answer_here(self, result: StageResult) -> None:
        raise NotImplementedError

    def home_message(self, message: Any, sender: Any) -> bool:
        """Step the pools with ``message`` if it is theirs (True); a run's message is not (False)."""
        kind = type(message)
        if kind is PoolConfig:
            self._configure_pool(message, sender)
        elif kind is StageRequest:
            self.home_do(self.home.ask(message, sender))
        elif kind is WakeupMessage:
            if not isinstance(message.payload, PoolTimer):
                return False
            self.home_do(self.home.take(message.payload))
        elif kind in POOL_INPUTS and kind is not ActorExitRequest:  # (the task actor's own, then home_closing)
            self.home_do(self.home.take(POOL_INPUTS[kind](message, sender), sender))
        elif kind is PoisonMessage and (refused := refused_work(message)) is not None:  # (a run's: the task actor's)
            self.home_do(self.home.take(refused, sender))
        else:
            return False
        return True

    def home_ask(self, request: StageRequest) -> bool:
        """A stage one of this actor's runs asks: to the pool here (True), if its pool is here."""
        if not self.home.hosts(request.pool):
            return False
        self.home_do(self.home.ask(request))
        return True

    def home_closing(self) -> None:
        """The process is exiting: each pool ends its workers."""
        self.home_do(self.home.take(i.Closing()))

    def home_do(self, commands: list[ForPool]) -> None:
        for marked in commands:
            carrier = self._carriers.get(marked.pool) or self._carrier("")
            carrier.do(marked.command)

    def _configure_pool(self, config: PoolConfig, sender: Any) -> None:
        system = config.settings.system
        self._carrier(config.name)
        self.home_do(self.home.configure(config, member_name(system.advertise, system.bind, system.admin_port)))
        self.send(sender, PoolReady(config.name, os.getpid()))  # the supervisor watches this process

    def _carrier(self, pool: str) -> PoolCarrier:
        if pool not in self._carriers:
            self._carriers[pool] = PoolCarrier(self, lambda event: self.home_do(self.home.to_pool(pool, event)),
                                               here=self.answer_here, timer=lambda timer: PoolTimer(pool, timer))
        return self._carriers[pool]
