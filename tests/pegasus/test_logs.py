"""The JSON log: private files, no task content unless asked for, rotation shared by many processes,
and a line that cannot be written (a full disk) dropped, never raised.

structlog is configured once per process, so each test that configures it runs
in a fresh interpreter (``fresh_process``); the pytest process keeps its own.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pegasus.logfile import SharedLogFile

REPO = Path(__file__).resolve().parents[2]


def fresh_process(code: str, *args: str) -> str:
    """Run ``code`` in a new interpreter that imports this checkout; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_log_is_private_whatever_the_umask(tmp_path: Path) -> None:
    fresh_process("import os, sys; os.umask(0o022); from pegasus import logs; "
                  "logs.configure(sys.argv[1]); logs.get('t').info('hello')", str(tmp_path / "state"))
    logs_dir = tmp_path / "state" / "logs"
    assert mode(logs_dir) == 0o700
    assert {p.name: mode(p) for p in logs_dir.iterdir()} == {"pegasus.jsonl": 0o600, "pegasus.jsonl.lock": 0o600}


# -- content -------------------------------------------------------------------------------------

PROVOKE = r'''
import sys
from pydantic import BaseModel, ValidationError
from pegasus import logs

state, secret, content = sys.argv[1], sys.argv[2], sys.argv[3] == "true"
logs.configure(state, content=content)
log = logs.get("test", task_id="t-1")


def run_task(text):
    prompt = "local:" + text  # only ever a local variable
    raise RuntimeError("the model answered: " + text)


class Args(BaseModel):
    n: int


try:
    run_task(secret)
except RuntimeError:
    log.exception("task_actor_error")
try:
    try:
        run_task(secret)
    except RuntimeError as exc:
        raise ValueError("wrapped " + secret) from exc
except ValueError:
    log.exception("chained")
try:
    Args.model_validate({"n": secret})
except ValidationError:
    log.exception("validation")
try:
    raise ExceptionGroup("group", [KeyError(secret)])
except ExceptionGroup:
    log.exception("group")
log.warning("stage_failed", error="stage 'think' failed: " + secret)
log.info("fields", text=secret, input=secret, output={"a": secret}, result=[secret], prompt=secret, message=secret,
         payload={"x": secret}, stdout=secret, state="thinking")
'''


def provoke(tmp_path: Path, content: bool) -> tuple[str, str, list[dict]]:
    secret = f"SECRET-{uuid.uuid4().hex}"
    fresh_process(PROVOKE, str(tmp_path), secret, "true" if content else "false")
    text = (tmp_path / "logs" / "pegasus.jsonl").read_text()
    return secret, text, [json.loads(line) for line in text.splitlines()]


def test_no_content_reaches_the_log_by_default(tmp_path: Path) -> None:
    """Issue 15: prompt text landed in pegasus.jsonl through exception messages and locals."""
    secret, text, lines = provoke(tmp_path, content=False)
    assert secret not in text
    by_event = {line["event"]: line for line in lines}
    assert set(by_event) == {"task_actor_error", "chained", "validation", "group", "stage_failed", "fields"}
    fields = by_event["fields"]
    assert fields["text"] == f"<withheld: {len(secret)} chars>" and fields["state"] == "thinking"
    assert fields["output"] == f"<withheld: {len(json.dumps({'a': secret}))} chars>"
    assert by_event["stage_failed"]["error"].startswith("<withheld: ")
    [stack] = by_event["task_actor_error"]["exception"]
    assert stack["exc_type"] == "RuntimeError" and stack["exc_value"].startswith("<withheld: ")
    assert stack["frames"][-1]["name"] == "run_task"  # where it happened is kept


def test_content_true_logs_content_but_never_locals(tmp_path: Path) -> None:
    secret, text, lines = provoke(tmp_path, content=True)
    assert secret in text and "the model answered: " + secret in text
    assert "local:" not in text  # exception locals are never rendered
    assert all(frame.get("locals") is None for line in lines for stack in line.get("exception", [])
               for frame in stack["frames"])


# -- rotation ------------------------------------------------------------------------------------

WRITERS, LINES_EACH = 4, 1500


def _write_lines(log: SharedLogFile, writer: int) -> None:
    for seq in range(LINES_EACH):
        log.write_line(json.dumps({"writer": writer, "seq": seq, "pad": "x" * (seq % 300)}))


def _write_concurrently(log: SharedLogFile) -> None:
    """WRITERS forked processes share ``log``, as actor processes forked from the supervisor do."""
    log.write_line(json.dumps({"writer": -1, "seq": 0, "pad": ""}))  # the parent opened it before the fork
    fork = multiprocessing.get_context("fork")
    children = [fork.Process(target=_write_lines, args=(log, n)) for n in range(WRITERS)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0


def _read_all(log: SharedLogFile) -> list[dict]:
    return [json.loads(line) for path in log.files() for line in path.read_text().splitlines()]


def test_rotation_loses_and_tears_no_line_with_many_writers(tmp_path: Path) -> None:
    log = SharedLogFile(tmp_path / "logs" / "pegasus.jsonl", max_bytes=20_000, backups=1000)
    _write_concurrently(log)
    records = _read_all(log)  # every line parses: none torn
    seen = sorted((r["writer"], r["seq"]) for r in records)
    assert seen == sorted([(-1, 0)] + [(w, s) for w in range(WRITERS) for s in range(LINES_EACH)])  # none lost
    sizes = [path.stat().st_size for path in log.files()]
    assert len(sizes) > 20 and max(sizes) <= 20_000
    assert all(mode(path) == 0o600 for path in log.files())


def test_rotation_keeps_a_bounded_number_of_files(tmp_path: Path) -> None:
    log = SharedLogFile(tmp_path / "logs" / "pegasus.jsonl", max_bytes=20_000, backups=3)
    _write_concurrently(log)
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == ["pegasus.jsonl", "pegasus.jsonl.1", "pegasus.jsonl.2", "pegasus.jsonl.3", "pegasus.jsonl.lock"]
    kept = _read_all(log)  # every line parses; the newest are kept, the oldest dropped
    assert len(kept) < WRITERS * LINES_EACH and max(r["seq"] for r in kept) == LINES_EACH - 1


def test_a_deleted_log_is_recreated(tmp_path: Path) -> None:
    log = SharedLogFile(tmp_path / "pegasus.jsonl", max_bytes=10_000, backups=2)
    log.write_line("one")
    (tmp_path / "pegasus.jsonl").unlink()
    log.write_line("two")
    assert (tmp_path / "pegasus.jsonl").read_text() == "two\n"
    log.close()


@pytest.mark.parametrize("max_bytes,backups", [(0, 1), (100, 0)])
def test_bad_rotation_limits_are_refused(tmp_path: Path, max_bytes: int, backups: int) -> None:
    with pytest.raises(ValueError):
        SharedLogFile(tmp_path / "x.jsonl", max_bytes=max_bytes, backups=backups)


# Every descriptor of the log file is pointed at /dev/full (each write: ENOSPC), however
# logs.configure opened it; then the process logs.
FULL_DISK_SCRIPT = """
import os, sys
from pathlib import Path
from pegasus import logs
path = logs.configure(Path(sys.argv[1]))
logs.get("probe").info("before")
full = os.open("/dev/full", os.O_WRONLY)
for name in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{name}") == str(path):
            os.dup2(full, int(name))
    except OSError:
        pass
for n in range(3):
    logs.get("probe").error("while the disk is full", n=n)
print("still running")
"""


def test_logging_on_a_full_disk_does_not_raise(tmp_path: Path) -> None:
    """Issue 15: on a full disk every log call raised, and the supervisor answered nothing."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                            timeout=60, env=env, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "still running\n", result.stderr
    lines = (tmp_path / "logs" / "pegasus.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"before"' in lines[0]  # whole lines only: nothing half-written


# A parent configures and logs; a forked child is configured alike (as every process of a system is, by the
# settings it is sent), then otherwise (another section), and logs each time.
FORKED_SCRIPT = """
import os, sys, structlog
from pegasus import logs
from pegasus.config import LoggingSettings
logs.configure(sys.argv[1])
logs.get("probe").info("parent")
inherited = structlog.get_config()["processors"]
pid = os.fork()
if pid == 0:
    logs.configure(sys.argv[1], LoggingSettings())
    kept = structlog.get_config()["processors"] is inherited
    logs.get("probe").info("child", kept=kept)
    logs.configure(sys.argv[1], LoggingSettings(content=True))
    logs.get("probe").info("child again", kept=structlog.get_config()["processors"] is inherited)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_a_child_configured_alike_keeps_the_inherited_configuration_and_logs_on_its_own(tmp_path: Path) -> None:
    """The launcher configures a system's log once; the processes forked from it configure nothing again
    (structlog's set-up in every process unshared ~0.3 MiB each, docs/memory.md), yet each writes its lines
    through descriptors of its own; a different section still reconfigures."""
    fresh_process(FORKED_SCRIPT, str(tmp_path / "state"))
    lines = [json.loads(line) for line in (tmp_path / "state" / "logs" / "pegasus.jsonl").read_text().splitlines()]
    assert [(line["event"], line.get("kept")) for line in lines] == [("parent", None), ("child", True),
                                                                      ("child again", False)]
    assert lines[0]["pid"] != lines[1]["pid"] == lines[2]["pid"]


ASYNC_SCRIPT = """
import sys
from pegasus import logs
print("asyncio" in sys.modules, "ssl" in sys.modules)
logs.configure(sys.argv[1])
pending = logs.get("probe").ainfo("async event")  # structlog's async method: asyncio loads here, on first use
import asyncio
asyncio.run(pending)
"""


def test_structlog_loads_without_asyncio_and_its_async_methods_still_work(tmp_path: Path) -> None:
    """structlog imports asyncio only for its async log methods, which Pegasus never calls: every process
    held asyncio, ssl and concurrent.futures (~2.5 MiB, docs/memory.md).  Failed before: both were loaded."""
    assert fresh_process(ASYNC_SCRIPT, str(tmp_path / "state")).split() == ["False", "False"]
    lines = [json.loads(line) for line in (tmp_path / "state" / "logs" / "pegasus.jsonl").read_text().splitlines()]
    assert [line["event"] for line in lines] == ["async event"]


def test_a_typed_level_is_written_under_its_name_and_filtered_as_the_configured_level(tmp_path: Path) -> None:
    """The cores' Log commands name a ``Level`` (declared once); ``emit`` writes it as structlog's own method."""
    fresh_process("import sys; from pegasus import logs; from pegasus.levels import Level\n"
                  "from pegasus.config import LoggingSettings\n"
                  "logs.configure(sys.argv[1], LoggingSettings(level='info'))\n"
                  "log = logs.get('t')\n"
                  "for level in Level: logs.emit(log, level, f'at_{level.name}', n=1)\n"
                  "logs.emit(log, Level.ERROR, 'failed', exc_info=ValueError('x'))\n", str(tmp_path))
    lines = [json.loads(line) for line in (tmp_path / "logs" / "pegasus.jsonl").read_text().splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("at_INFO", "info"), ("at_WARNING", "warning"), ("at_ERROR", "error"), ("failed", "error")]
    assert lines[-1]["exception"][0]["exc_type"] == "ValueError"
