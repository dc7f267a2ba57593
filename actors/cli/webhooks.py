"""``pegasus webhook add | list | remove``: deliveries to POST /v1/webhooks/NAME make tasks from a template."""

from __future__ import annotations

import argparse
from typing import Any

import shtab

from actors import messages as m
from actors.cli.base import EXIT_OK, ask, emit
from actors.cli.views import clean


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """The ``webhook`` command and its actions, under the main parser's ``sub``."""
    p = sub.add_parser("webhook", help="webhooks whose signed deliveries make tasks",
                       description="Webhooks: a delivery signed with the webhook's secret (GitHub's "
                                   "X-Hub-Signature-256, or X-Pegasus-Signature with X-Pegasus-Timestamp) makes a "
                                   "task (source WEBHOOK_TRIGGERED); docs/schedules.md")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", parents=[parent], help="add a webhook", description="Add a webhook.")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--text", required=True, metavar="TEMPLATE",
                     help='the task\'s text, with fields of the JSON body: \'Review "{pull_request.title}"\'')
    add.add_argument("--secret-file", metavar="F", help="the shared secret, in a file only you may read (default: "
                     "one is made and written to a private file, which the answer names)"
                     ).complete = shtab.FILE
    add.add_argument("--events", type=_events, default=[], metavar="E,E", help="the GitHub events it takes "
                     "(X-GitHub-Event), comma-separated: pull_request,push (default: every event; a ping makes "
                     "no task either way)")
    add.set_defaults(handler=add_webhook)
    actions.add_parser("list", parents=[parent], help="list the webhooks").set_defaults(handler=list_webhooks)
    remove = actions.add_parser("remove", parents=[parent], help="remove a webhook")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=remove_webhook)


def add_webhook(args: argparse.Namespace) -> int:
    view = ask(args, m.WebhookAdd.of(args.name, args.text, args.secret_file, args.events))
    emit(args, view, f"webhook {view['name']} added; its secret is in {view['secret_file']}")
    return EXIT_OK


def _events(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name one event at least: pull_request,push")
    return names


def list_webhooks(args: argparse.Namespace) -> int:
    views = ask(args, m.WebhookList())
    lines = [f"{'NAME':<20} {'SECRET FILE':<40} TEXT"] + [
        f"{clean(v['name']):<20} QUARANTINED: {clean(v['quarantined'])}" if v.get("quarantined") else
        f"{clean(v['name']):<20} {clean(v['secret_file'] or '-'):<40} {clean(v['text'])[:60]}"
        + (f"  (events: {clean(','.join(v['events']))})" if v.get("events") else "") for v in views]
    emit(args, views, "\n".join(lines) if views else "no webhooks (add one: pegasus webhook add NAME --text TEMPLATE)")
    return EXIT_OK


def remove_webhook(args: argparse.Namespace) -> int:
    view = ask(args, m.WebhookRemove(name=args.name))
    emit(args, view, f"webhook {view['name']} removed")
    return EXIT_OK
