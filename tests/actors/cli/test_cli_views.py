"""The text the command line prints: a task's text escaped, lists paged, stats and members readable."""

from __future__ import annotations

from actors.cli import views

RED = "\x1b[31mred\x1b[0m"


def task(**fields) -> dict:
    return {"task_id": "t1", "machine": "classic", "priority": 5, "lifecycle_state": "done", "state": "completed",
            "input": "echo hi", **fields}


def test_control_characters_are_escaped() -> None:
    """Issue 16: an ANSI escape sequence in a task coloured the terminal."""
    assert views.clean(RED) == "\\x1b[31mred\\x1b[0m"
    assert views.clean("a\tb\nc\rd\x00\x7f\x9b2J") == "a\\tb\\nc\\rd\\x00\\x7f\\x9b2J"
    assert views.clean("abc\u202edcba\u2066x") == "abc\\u202edcba\\u2066x"  # bidi overrides (Trojan Source)
    assert views.clean("line 1\n\tline 2\x1b]0;title\x07", lines=True) == "line 1\n\tline 2\\x1b]0;title\\x07"
    assert views.clean("héllo, 世界 ✓") == "héllo, 世界 ✓"  # printable text stays as it is


def test_a_tasks_text_from_the_task_is_escaped_everywhere() -> None:
    text = views.task_text(task(input=f"echo {RED}", result=f"{RED}\nsecond line", question=f"why {RED}?",
                                error=f"bad {RED}", exit_reason="exception",
                                effects_unknown=[{"tool": f"t{RED}", "step_index": 0, "key": "k"}]))
    assert "\x1b" not in text and text.count("\\x1b[31m") == 5
    assert "  result:    \\x1b[31mred\\x1b[0m\n             second line" in text  # lines kept, indented
    listed = views.list_text({"tasks": [{**task(input=f"echo {RED}\nmore"), "state": "completed"}], "total": 1,
                              "offset": 0, "limit": 50})
    assert "\x1b" not in listed and "\n" not in listed.splitlines()[0] and "echo \\x1b[31m" in listed


def test_a_page_says_where_it_is_in_the_whole() -> None:
    rows = [task(task_id=f"t{n}") for n in range(3)]
    page = views.list_text({"tasks": rows, "total": 1234, "offset": 50, "limit": 3})
    assert page.splitlines()[-1] == "showing 51-53 of 1234, newest first; next: --offset 53"
    last = views.list_text({"tasks": rows, "total": 53, "offset": 50, "limit": 3})
    assert last.splitlines()[-1] == "showing 51-53 of 53, newest first"
    assert views.list_text({"tasks": [], "total": 0, "offset": 0, "limit": 50}) == "(no tasks)"
    assert "there are 7" in views.list_text({"tasks": [], "total": 7, "offset": 10, "limit": 50})


STATS = {"active": 1, "max_active_tasks": 5, "queue_length": 2, "tasks": {"done": 8, "running": 1, "queued": 2},
         "pools": {"llm": {"busy": 1, "size": 3, "queued": 0}, "tool": {"busy": 0, "size": 3, "queued": 2}},
         "store": {"writable": True, "error": None}, "rejected_frames": 0,
         "members": [{"name": "10.0.0.1:19190", "local": True, "workers": {"llm": 3, "tool": 3},
                      "capabilities": {"pegasus.member": "10.0.0.1:19190", "pegasus.llm_workers": 3}},
                     {"name": "10.0.0.2:19190", "local": False, "workers": {"llm": 2},
                      "capabilities": {"pegasus.llm_workers": 2, "pegasus.tool_workers": 0, "zone": "rack-1"}}]}


def test_stats_are_text_not_python_dicts() -> None:
    """Issue 16: stats printed ``tasks: {'done': 8, ...}``."""
    text = views.stats_text(STATS)
    assert "{" not in text and "'" not in text
    assert text.splitlines()[:3] == ["tasks:   8 done, 2 queued, 1 running (11 in all)",
                                     "active:  1 of 5, 2 queued",
                                     "pools:   llm 1/3 busy, 0 queued; tool 0/3 busy, 2 queued"]
    assert "  10.0.0.2:19190         member  workers: llm 2, tool 0  (zone=rack-1)" in text
    assert "  10.0.0.1:19190         local   workers: llm 3, tool 3" in text.splitlines()
    broken = views.stats_text({**STATS, "store": {"writable": False, "error": "disk full"}, "rejected_frames": 2})
    assert "store:   takes no writes: disk full" in broken and "refused: 2 frames" in broken
    assert views.counts_text({}) == "none"


def test_stats_say_which_pool_does_not_answer_and_what_crash_loops() -> None:
    """Issue 28: a stopped pool held the whole stats answer; a crash-looping supervisor was seen nowhere."""
    looping = {"kind": "supervisor", "status": "crash_looping", "restarts": 7, "recent": 6, "intensity": 5,
               "period_s": 60.0, "last_reason": "OverflowError: timestamp too large (handling WakeupMessage)"}
    pool_view = {"status": "up", "restarts": 1, "recent": 1, "intensity": 5, "period_s": 60.0,
                 "last_reason": "the llm pool died"}
    text = views.stats_text({**STATS, "pools": {"llm": {**STATS["pools"]["llm"], "supervision": pool_view},
                                                "tool": {"responsive": False, "stopped": True}},
                             "supervision": {"supervisor": looping}})
    assert "pools:   llm 1/3 busy, 0 queued, restarted 1x; tool not answering (its process is stopped)" in text
    assert ("CRASH LOOP: supervisor died 7x (6 within 60s; more than 5 is a loop), last of: OverflowError: "
            "timestamp too large (handling WakeupMessage)") in text
    assert "restarts: llm pool died 1x (1 within 60s; more than 5 is a loop), last of: the llm pool died" in text


def test_capabilities_read_as_the_join_flags_take_them() -> None:
    """Issue 16: join printed ``offering {'pegasus.llm_workers': 4, ...}``."""
    assert (views.capabilities_text({"pegasus.tool_workers": 0, "pegasus.llm_workers": 4, "zone": "r1"})
            == "pegasus.llm_workers=4, pegasus.tool_workers=0, zone=r1")


def test_run_prints_the_answer_of_each_streamed_reply_as_it_comes() -> None:
    """The answer inside the reason stage's JSON, piece by piece on one line, escaped; a new stage's
    reply starts a new line; the end closes it before the next transition line."""
    import io

    from pegasus.streaming import TextDelta

    out = io.StringIO()
    printer = views.AnswerPrinter(out)
    for seq, text in enumerate(['{"thought": "t", "answer": "Hel', 'lo\\u001b[2J', ' world"}'], 1):
        printer.write(TextDelta("t1", 3, "reason", seq, text))
    assert out.getvalue() == "  [reason] Hello\\x1b[2J world"
    printer.write(TextDelta("t1", 5, "reason", 1, "Plain prose."))
    printer.end()
    assert out.getvalue().endswith(" world\n  [reason] Plain prose.\n")


def test_a_members_row_shows_its_round_trip_and_last_contact_and_the_local_admin_none() -> None:
    heard = {"rtt_ms": 0.93, "rtt_avg_ms": 1.2, "rtt_min_ms": 0.5, "rtt_max_ms": 4.1, "pings": 3, "answers": 3,
             "last_contact": 1000.0}
    stats = {"now": 1000.6, "pools": {"llm": {}, "tool": {}}, "members": [
        {"name": "10.8.0.1:19190", "local": True, "workers": {"llm": 0, "tool": 0}, "capabilities": {},
         "contact": None},
        {"name": "10.8.0.2:19190", "local": False, "workers": {"llm": 4, "tool": 2}, "capabilities": {},
         "contact": heard},
        {"name": "10.8.0.3:19190", "local": False, "workers": {"llm": 1, "tool": 0}, "capabilities": {},
         "contact": {**heard, "rtt_ms": None, "last_contact": None}}]}
    assert views.members_text(stats).splitlines() == [
        "members:",
        "  10.8.0.1:19190         local   workers: llm 0, tool 0",
        "  10.8.0.2:19190         member  workers: llm 4, tool 2",
        f"{'':<32}rtt 0.93 ms (avg 1.20, max 4.10), last contact 0.6 s ago",
        "  10.8.0.3:19190         member  workers: llm 1, tool 0",
        f"{'':<32}rtt -, never heard from"]


def test_what_recall_gave_is_shown_beside_the_result_never_in_it() -> None:
    """Issue 31: the earlier episode of the same request is a line of its own (status and history)."""
    stage = {"stage": "think", "done_before": {"id": "episode:7", "title": "echo hi", "text": "hi"}}
    text = views.task_text(task(result="hi", stages=[stage]))
    assert "  result:    hi\n  recalled:  done before: episode:7 (hi)" in text
    history = views.history_text({"lifecycle": [], "cognitive": [
        {"run": 1, "from_state": "thinking", "to_state": "planning", "event": "THINK_DONE",
         "timestamp": "2026-11-26T08:00:00.000000+00:00", "seq": 1, **stage}]})
    assert "done before: episode:7 (hi)" in history
