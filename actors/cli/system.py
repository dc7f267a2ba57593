"""Commands about the system: start, stop, join (a convention), stats, backup, restore."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from actors.runtime import convention
from actors import messages as m
from actors.cli import views
from actors.cli.base import EXIT_OK, ask, emit, settings_of
from actors.client.client import Client
from actors.runtime.lifecycle import System
from actors.runtime.ownership import address_in_use, read_owner
from actors.runtime.settings import SettingsUnusable, read_settings
from actors.runtime.spec import SystemSpec, resolved
from actors.runtime.system import SystemNotRunningError, SystemStartError
from pegasus.errors import PegasusError
from pegasus.store.backup import backup_file, restore_file
from pegasus.store.sqlite import DB_FILE


def start(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if getattr(args, "http", None) is not None:
        settings = settings.with_overrides({"http": {"enabled": True, "port": args.http}})
    if args.leader or settings.convention.lead:
        client, pid = Client.start_leader(settings)
        client.close()
        spec = client.spec
        emit(args, {"pid": pid, "port": spec.admin_port, "state_dir": str(spec.state_dir), "leader": True,
                    "member": spec.member_name},
             f"pegasus started: convention leader {spec.member_name} (admin pid {pid}), state in {spec.state_dir}\n"
             f"join it from another machine: pegasus join {spec.member_name} --port PORT")
        return EXIT_OK
    system = System.of(settings)
    spec, http = system.spec, settings.http
    if http.enabled and system.is_running():  # said first: its own HTTP port is no "other program"
        raise SystemStartError(_already_running(spec, http.port), spec.admin_port)
    if http.enabled and address_in_use(http.bind, http.port):
        raise SystemStartError(f"the HTTP port {http.bind}:{http.port} is used by another program: choose another "
                               "(--http PORT or [http] port)", spec.admin_port)
    client, pid = Client.start_daemon(settings)
    client.close()
    where = f"; HTTP API on {'https' if http.tls_cert else 'http'}://{http.bind}:{http.port}" if http.enabled else ""
    emit(args, {"pid": pid, "port": spec.admin_port, "state_dir": str(spec.state_dir),
                **({"http": f"{http.bind}:{http.port}"} if http.enabled else {})},
         f"pegasus started: admin pid {pid} on {spec.bind}:{spec.admin_port}, state in {spec.state_dir}{where}")
    return EXIT_OK


def _already_running(spec: SystemSpec, http_port: int) -> str:
    """What is true when this state directory's system runs: where, its HTTP API, how to get what was asked."""
    port = (read_owner(spec) or {}).get("admin_port", spec.admin_port)
    try:
        running = read_settings(spec.state_dir).http
        serving = f"{running.bind}:{running.port}" if running.enabled else None
    except SettingsUnusable:
        serving = None
    said = f"the system of state directory {spec.state_dir} is already running (admin port {port}, " + (
        f"HTTP API on {serving})" if serving else "no HTTP API)")
    if serving and serving.endswith(f":{http_port}"):
        return said
    return f"{said}: to serve HTTP on port {http_port}, stop it (pegasus stop) and start it with --http {http_port}"


def join(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    capabilities = dict(convention.parse_capability(text) for text in args.capability or [])
    member = System.member(settings, args.leader_address, capabilities)
    pid = member.join(key_file=args.key_file)
    spec = member.spec
    leader = "{}:{}".format(*spec.convention_leader or ("?", 0))
    # Offered: the worker counts and what --capability gave (not the Thespian setting every member has).
    emit(args, {"pid": pid, "port": spec.admin_port, "member": spec.member_name, "leader": leader,
                "capabilities": spec.capabilities},
         f"pegasus joined: member {spec.member_name} (admin pid {pid}) of the convention led by {leader}, "
         f"offering {views.capabilities_text(spec.capabilities, skip=('AllowRemoteActorSources',))}\n"
         f"leave with: pegasus stop --port {spec.admin_port}")
    return EXIT_OK


def stop(args: argparse.Namespace) -> int:
    """Stop the system of this state directory, and only it: its processes are the lock's holders."""
    system = System.of(settings_of(args))
    system.stop()
    spec = system.spec
    emit(args, {"stopped": spec.admin_port}, f"pegasus stopped (port {spec.admin_port})")
    return EXIT_OK


def stats(args: argparse.Namespace) -> int:
    numbers = ask(args, m.Stats())
    emit(args, numbers, views.stats_text(numbers))
    return EXIT_OK


def backup(args: argparse.Namespace) -> int:
    """Copy the database with SQLite's online backup API: from the running system, or from
    the file when none runs."""
    settings = resolved(settings_of(args))
    target = os.path.abspath(args.path)
    try:
        client = Client.connect(settings)
    except SystemNotRunningError:
        report = backup_file(settings.state_dir() / DB_FILE, target, overwrite=args.force)
    else:
        with client:
            report = client.backup(target, overwrite=args.force)
    emit(args, report, f"backup written: {report['path']} ({report['tasks']} tasks, {report['bytes']} bytes)")
    return EXIT_OK


def restore(args: argparse.Namespace) -> int:
    """Put a backup in place of the database (a damaged one, say); the system must be stopped."""
    settings = resolved(settings_of(args))
    try:
        Client.connect(settings).close()
    except SystemNotRunningError:
        pass
    else:
        raise PegasusError("the system is running: stop it first (pegasus stop), then restore")
    report = restore_file(Path(os.path.abspath(args.path)), settings.state_dir() / DB_FILE)
    kept = f"; the files it replaced are kept as {', '.join(report['kept'])}" if report["kept"] else ""
    emit(args, report, f"restored {report['tasks']} tasks from {os.path.abspath(args.path)} into {report['path']}"
                       f"{kept}; start the system with pegasus start")
    return EXIT_OK
