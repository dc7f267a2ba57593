"""Commands about the HTTP gateway's bearer tokens: token create | list | revoke (docs/http.md)."""

from __future__ import annotations

import argparse
from typing import Any

from actors import messages as m
from actors.cli.base import EXIT_OK, ask, emit
from actors.cli.views import clean
from pegasus.gateway.auth import SCOPES, new_token, token_hash


def create(args: argparse.Namespace) -> int:
    token = new_token()  # made and shown here: only its hash travels
    stored = ask(args, m.TokenCreate(name=args.name, scope=args.scope, token_hash=token_hash(token)))
    record = {**stored, "token": token}
    emit(args, record, f"token {record['name']} ({record['scope']}): {record['token']}\n"
                       "shown this once: keep it now (only its hash is stored)")
    return EXIT_OK


def list_tokens(args: argparse.Namespace) -> int:
    rows = ask(args, m.TokenList())
    lines = [f"{'NAME':<24} {'SCOPE':<7} {'CREATED':<32} REVOKED"] + [
        f"{clean(r['name']):<24} QUARANTINED: {clean(r['quarantined'])}" if r.get("quarantined") else
        f"{r['name']:<24} {r['scope']:<7} {r['created_at']:<32} {r['revoked_at'] or '-'}" for r in rows]
    emit(args, rows, "\n".join(lines) if rows else "no tokens (pegasus token create NAME)")
    return EXIT_OK


def revoke(args: argparse.Namespace) -> int:
    record = ask(args, m.TokenRevoke(name=args.name))
    emit(args, record, f"token {record['name']} revoked ({record['revoked_at']})")
    return EXIT_OK


def add_commands(sub: Any, parent: argparse.ArgumentParser) -> None:
    """``pegasus token create|list|revoke``."""
    token = sub.add_parser("token", help="bearer tokens of the HTTP API", description="Bearer tokens of the HTTP API "
                           "(docs/http.md): create shows a token once, only its hash is stored.")
    verbs = token.add_subparsers(dest="token_command", required=True, metavar="VERB")
    p = verbs.add_parser("create", parents=[parent], help="make a token (shown once)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--scope", choices=SCOPES, default="read",
                   help="read: GET routes; submit: and submit/resume/message; admin: everything (default read)")
    p.set_defaults(handler=create)
    p = verbs.add_parser("list", parents=[parent], help="every token (never the token itself)")
    p.set_defaults(handler=list_tokens)
    p = verbs.add_parser("revoke", parents=[parent], help="refuse a token from now on")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=revoke)
