"""Stage pools on Thespian: a thin carrier over ``pegasus.pool.core.PoolCore``, a process of its own.

Each message becomes one input of the core (``actors.pool_carrier.POOL_INPUTS``) and its commands are
carried out in order by ``PoolCarrier``.  Every decision is the core's (docs/architecture.md, "The pool").
The default runs the pools' cores in a task actor instead (actors/home_pools.py); this process is the
pools' home with ``[pools] home_host = false``.
"""

from __future__ import annotations

import os
from typing import Any

from thespian.actors import ActorTypeDispatcher, PoisonMessage

from actors.messages import PoolConfig, PoolReady
from actors.pool_carrier import POOL_INPUTS, PoolCarrier, refused_work
from actors.runtime import procs, sharing, titles
from actors.runtime.system import member_name
from pegasus.pool import inputs as i
from pegasus.pool.core import PoolCore


class StagePool(ActorTypeDispatcher):
    """One pool (``llm`` or ``tool``).  Configure it with a PoolConfig first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sharing.after_fork()
        procs.die_with_parent()
        self.core = PoolCore()
        self.carrier = PoolCarrier(self, self._step)

    def _step(self, event: i.PoolInput) -> None:
        for command in self.core.step(event):
            self.carrier.do(command)

    def receiveMessage(self, message: Any, sender: Any) -> None:
        make = POOL_INPUTS.get(type(message))
        if make is not None:
            self._step(make(message, sender))
        elif isinstance(message, PoisonMessage) and (refused := refused_work(message)) is not None:
            self._step(refused)
        else:
            super().receiveMessage(message, sender)

    def receiveMsg_PoolConfig(self, config: PoolConfig, sender: Any) -> None:
        system = config.settings.system
        titles.set_title(f"{config.name} pool")
        self._step(i.Configured(config, member_name(system.advertise, system.bind, system.admin_port)))
        self.send(sender, PoolReady(config.name, os.getpid()))  # the supervisor watches this process
