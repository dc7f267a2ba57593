"""Requests that only read or write the store: tokens, the task tree, a task's context.  Each a plain
function ``(ctx, request) -> reply`` in ``LOOKUPS`` (memory's, schedules' and webhooks' lists are in their
modules' tables): a new one is a message, a row here and its tests."""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.supervisor.context import Context, Rows
from pegasus.views import context_view
from pegasus.store import tokens
from pegasus.store.checkpoint import rebuild
from pegasus.task import TaskNotFoundError


def token_create(ctx: Context, request: m.TokenCreate) -> Any:
    """The supervisor is the store's only writer, so tokens are written here; the gateway only reads them."""
    _, store, _ = ctx.configured
    record = tokens.create(store, request.name, request.token_hash, request.scope)
    ctx.log.info("token_created", name=request.name, scope=request.scope)
    return record


def token_list(ctx: Context, request: m.TokenList) -> Any:
    return tokens.listed(ctx.configured[1])


def token_revoke(ctx: Context, request: m.TokenRevoke) -> Any:
    record = tokens.revoke(ctx.configured[1], request.name)
    ctx.log.info("token_revoked", name=request.name)
    return record


def tree(ctx: Context, request: m.Tree) -> Any:
    """The policy (fan-out, fan-in, limits, cancel) is ``pegasus.admission.tree``'s."""
    return ctx.configured[2].tree.subtree(request.task_id)


def task_context(ctx: Context, request: m.TaskContextRequest) -> Any:
    """A task's context as of its last checkpoint (its run is a passivated snapshot somewhere)."""
    store = ctx.configured[1]
    if store.task_row(request.task_id) is None:
        raise TaskNotFoundError(request.task_id)
    rows = store.checkpoints(request.task_id)
    return context_view(request.task_id, rebuild(request.task_id, rows) if rows else None)


REQUESTS: Rows = {m.TokenCreate: token_create, m.TokenList: token_list, m.TokenRevoke: token_revoke, m.Tree: tree,
           m.TaskContextRequest: task_context}
