"""The text the command line prints for people (``--json`` prints the data instead).

Pure: data in, text out.  Text that came from a task (its input, result, error,
question) is printed with its control characters escaped: a task must not be able to
move the cursor, recolour or retitle the terminal of the person reading it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any


# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI to some terminals) and the bidirectional
# overrides that can make a line read otherwise than it is (CVE-2021-42574).
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_ESCAPES = {code: _NAMED.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)}
_ESCAPES_KEEPING_LINES = {code: text for code, text in _ESCAPES.items() if code not in (0x09, 0x0A)}

LABEL = 13  # "  lifecycle: " -- the width of a field's label in a task's text


def clean(text: object, *, lines: bool = False) -> str:
    """``text`` with control characters escaped (``\\x1b``); with ``lines``, newlines and tabs are kept."""
    return str(text).translate(_ESCAPES_KEEPING_LINES if lines else _ESCAPES)


def field(label: str, text: object) -> str:
    """``  label:   text``, a text of several lines indented under its first."""
    head = f"  {label + ':':<{LABEL - 2}}"
    return head + clean(text, lines=True).replace("\n", "\n" + " " * LABEL)


def task_text(task: dict[str, Any]) -> str:
    tier = f", tier {clean(task['tier'])}" if task.get("tier") else ""
    lines = [f"task {task['task_id']}  ({task['machine']}, priority {task['priority']}{tier})",
             f"  lifecycle: {task['lifecycle_state']}    cognitive: {task['state']}",
             field("input", task["input"])]
    if task.get("attempts"):  # a failed task is retried while attempts are fewer than the system's max_attempts
        limit = f" of {task['max_attempts']}" if task.get("max_attempts") else ""
        lines.append(field("attempts", f"{task['attempts']}{limit}"))
    if task.get("parent_id"):
        lines.append(field("parent", f"{task['parent_id']} (depth {task.get('depth')})"))
    if task.get("children"):
        waiting = len(task.get("waiting_for") or [])
        lines.append(field("children", f"{len(task['children'])}" + (f", waiting for {waiting}" if waiting else "")
                           + f" (pegasus tree {task['task_id']})"))
    if task.get("question"):
        lines.append(field("question", task["question"]))
    for message in task.get("messages") or []:  # the conversation: what the user added (pegasus message)
        if message.get("role", "user") == "user":
            lines.append(field("message", message.get("content", "")))
    for message in task.get("messages_quarantined") or []:  # stored, but unreadable: never given to the task
        lines.append(field("message", f"{message['number']} QUARANTINED: {message['error']}"))
    if task.get("messages_waiting"):
        lines.append(f"  messages waiting: {task['messages_waiting']} (taken when the current stage ends)")
    if task.get("result") is not None:
        lines.append(field("result", task["result"]))
    recalled = [s for s in task.get("stages") or [] if s.get("done_before")]  # what recall gave: beside the result
    if recalled:
        episode = recalled[-1]["done_before"]
        lines.append(field("recalled", f"done before: {episode.get('id')} ({episode.get('text')})"))
    if task.get("error"):
        lines.append(field("error", f"{task['error']} (exit_reason: {task.get('exit_reason')})"))
    lines += usage_lines(task)
    if task.get("trace_id"):  # [telemetry] on: the trace to look up in the tracing backend
        lines.append(field("trace", task["trace_id"]))
    for step in task.get("effects_unknown") or []:  # started, outcome unknown: never repeated
        lines.append(f"  effect unknown: {clean(step['tool'])} (step {step['step_index']}, key {clean(step['key'])})")
    return "\n".join(lines)


def usage_text(usage: dict[str, Any]) -> str:
    """``3 calls, 1,234 tokens (200 cached), $0.001234``; no cost shown when no model had a price;
    ``~1,234 tokens (estimated for 3 calls), cost unknown`` when the server reported no usage."""
    cached = f" ({usage['cached_tokens']:,} cached)" if usage.get("cached_tokens") else ""
    estimated = usage.get("estimated_calls") or 0
    guessed = f" (estimated for {estimated} call{'' if estimated == 1 else 's'})" if estimated else ""
    from pegasus.llm.cost import cost_text  # imported when used: views is every command's import
    priced = cost_text(usage) or ("cost unknown" if estimated else "")
    return (f"{usage.get('calls', 0)} call{'' if usage.get('calls') == 1 else 's'}, "
            f"{'~' if estimated else ''}{usage.get('total_tokens', 0):,} tokens{cached}{guessed}"
            + (f", {priced}" if priced else ""))


def usage_lines(task: dict[str, Any]) -> list[str]:
    """A task's model usage: its total, each model stage (its tier, model and cost), the context budget's fits."""
    usage = task.get("usage") or {}
    if not usage.get("calls"):
        return []
    lines = [field("usage", usage_text(usage))]
    for stage in task.get("stages") or []:
        used = stage.get("usage")
        if used:
            where = "/".join(clean(part) for part in (used.get("tier"), used.get("model")) if part)
            lines.append(f"{'':<{LABEL}}run {stage.get('run')} {clean(stage['stage']):<9} {where:<24} "
                         f"{usage_text(used)}")
        for fit in stage.get("context") or []:
            lines.append(field("context", context_text(stage.get("run"), fit)))
    return lines


def context_text(run: Any, fit: dict[str, Any]) -> str:
    """What the context budget did to one call's prompt (pegasus.llm.context)."""
    done = [f"{fit['truncated_results']} older tool results cut"] if fit.get("truncated_results") else []
    if fit.get("summarised_messages"):
        by = "the model" if fit.get("summary_by") == "model" else "mechanically"
        failed = f" (the model's summary failed: {clean(fit['summary_error'])})" if fit.get("summary_error") else ""
        done.append(f"{fit['summarised_messages']} earlier messages summarised by {by}{failed}")
    if fit.get("cut_messages"):
        done.append(f"{fit['cut_messages']} long messages cut")
    return (f"run {run} {clean(fit.get('stage'))}: ~{fit.get('estimated_tokens', 0):,} -> "
            f"~{fit.get('fitted_tokens', 0):,} prompt tokens (window {fit.get('window', 0):,}): "
            + (", ".join(done) or "nothing could be cut"))


def notice_line(notice: Any) -> str:
    """One transition as ``run`` shows it live: time, machine, from -> to, event [stage]."""
    stage = notice.detail.get("stage")
    extra = f"  [{clean(stage)}]" if stage else ""
    return (f"{notice.timestamp[11:23]}  {notice.machine:<10} {notice.from_state:>10} -> {notice.to_state:<10} "
            f"{notice.event}{extra}")


def _extractor() -> Any:
    from pegasus.streaming import AnswerExtractor  # imported when used: views is every command's import
    return AnswerExtractor()


class AnswerPrinter:
    """``run``'s live answer: the answer inside each stage's streamed reply, printed as it comes
    (``pegasus.streaming.AnswerExtractor``), escaped like any text of a task, newlines kept."""

    def __init__(self, out: Any = None) -> None:
        self.out = out
        self.reply: tuple[str, int, int] | None = None
        self.extractor = _extractor()
        self.open = False  # a line of answer is being written

    def write(self, delta: Any) -> None:
        if (delta.stage, delta.token, delta.call) != self.reply:  # another reply: another answer
            self.end()
            self.reply, self.extractor = (delta.stage, delta.token, delta.call), _extractor()
        text = self.extractor.feed(delta.text)
        if text:
            if not self.open:
                self._print(f"  [{clean(delta.stage)}] ")
                self.open = True
            self._print(clean(text, lines=True))

    def end(self) -> None:
        """Close the answer's line before anything else is printed."""
        if self.open:
            self._print("\n")
            self.open = False

    def _print(self, text: str) -> None:
        print(text, end="", flush=True, file=self.out)


def list_text(page: dict[str, Any]) -> str:
    """A page of ``pegasus list``, with where it is in the whole and how to see the next."""
    rows = page["tasks"]
    if not rows:
        return ("(no tasks)" if not page["total"]
                else f"(no tasks here: there are {page['total']}, the first at --offset 0)")
    lines = [f"{r['task_id']}  {r['lifecycle_state']:<9} {r['state']:<10} p{r['priority']:<3} {clean(r['input'])[:50]}"
             for r in rows]
    first, last = page["offset"] + 1, page["offset"] + len(rows)
    footer = f"showing {first}-{last} of {page['total']}, newest first"
    if last < page["total"]:
        footer += f"; next: --offset {last}"
    return "\n".join([*lines, footer])


def history_text(history: dict[str, Any]) -> str:
    lines = [(_when(h["timestamp"]), f"{h['timestamp'][11:23]}  lifecycle  {h['from_state']:>10} -> "
                                     f"{h['to_state']:<10} {h['trigger_event_type']}") for h in history["lifecycle"]]
    lines += [(_when(h["timestamp"]), f"{h['timestamp'][11:23]}  run {h['run']}      {h['from_state']:>10} -> "
                                      f"{h['to_state']:<10} {h['event']}"
               + "".join(f"\n{'':<14}context: {context_text(h['run'], fit)}" for fit in h.get("context") or [])
               + (f"\n{'':<14}memories: {', '.join(h['memories'])}" if h.get("memories") else "")
               + (f"\n{'':<14}recall: {clean(h['recall_error'])}" if h.get("recall_error") else "")
               + (f"\n{'':<14}done before: {h['done_before'].get('id')} ({h['done_before'].get('text')})"
                  if h.get("done_before") else ""))
              for h in history["cognitive"]]
    # Order by time, not by the text: lines with the same displayed millisecond were sorted
    # alphabetically (e.g. 'queued -> running' before 'approved -> queued').
    text = "\n".join(line for _, line in sorted(lines, key=lambda pair: pair[0]))
    reflection = history.get("post_reflection")
    if reflection:  # the post-task reflector's row: after done, apart from the transitions
        detail = reflection["error"] or (reflection.get("reflection") or {}).get("assessment") or ""
        text += f"\n{'':<14}post-task reflection: {reflection['status']}" + (f" ({detail})" if detail else "")
    return text


def _when(timestamp: str) -> datetime:
    """An ISO timestamp ('...Z' or '...+00:00', with or without microseconds) as a datetime."""
    return datetime.fromisoformat(timestamp)


def counts_text(counts: dict[str, int]) -> str:
    """``3 done, 1 running (4 in all)``, the largest first."""
    if not counts:
        return "none"
    parts = [f"{n} {state}" for state, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return f"{', '.join(parts)} ({sum(counts.values())} in all)"


def pool_text(name: str, pool: dict[str, Any]) -> str:
    """One pool's figures; one that did not answer in time (stopped, restarting) is said to be so."""
    if not pool.get("responsive", True):
        return f"{name} not answering" + (" (its process is stopped)" if pool.get("stopped") else "")
    text = f"{name} {pool['busy']}/{pool['size']} busy, {pool['queued']} queued"
    restarts = (pool.get("supervision") or {}).get("restarts")
    return text + (f", restarted {restarts}x" if restarts else "")


def restarts_text(stats: dict[str, Any]) -> list[str]:
    """Children that died (the guardian's: supervisor, gateway keeper; the supervisor's: pools), the crash loops
    named with what they last died of."""
    children = {**stats.get("supervision", {}),
                **{f"{name} pool": p["supervision"] for name, p in stats.get("pools", {}).items() if p.get("supervision")}}
    lines = []
    for name, child in sorted(children.items()):
        if not child.get("restarts"):
            continue
        looping = child.get("status") in ("crash_looping", "given_up")
        lines.append(f"{'CRASH LOOP' if looping else 'restarts'}: {name} died {child['restarts']}x "
                     f"({child['recent']} within {child['period_s']:g}s; more than {child['intensity']} is a loop), "
                     f"last of: {clean(str(child.get('last_reason') or '-'))}")
    return lines


def stats_text(stats: dict[str, Any]) -> str:
    pools = "; ".join(pool_text(name, p) for name, p in stats["pools"].items())
    lines = [f"tasks:   {counts_text(stats['tasks'])}",
             f"active:  {stats['active']} of {stats['max_active_tasks']}, {stats['queue_length']} queued",
             f"pools:   {pools or 'none'}", *restarts_text(stats)]
    usage = stats.get("usage")
    if usage and usage.get("calls"):
        lines.append(f"models:  {usage_text(usage)}")
        for model in usage.get("models") or []:
            where = "/".join(clean(part) for part in (model.get("tier"), model.get("model")) if part)
            lines.append(f"  {where:<30} {usage_text(model)}")
    if not stats["store"]["writable"]:
        lines.append(f"store:   takes no writes: {clean(stats['store']['error'])}")
        action = stats["store"].get("action")
        if action and action not in stats["store"]["error"]:
            lines.append(f"         to go on: {clean(action)}")
    for kind, records in (stats.get("quarantined") or {}).items():  # stored records set aside, with their errors
        for record in records:
            lines.append(f"quarantined: {kind[:-1] if kind.endswith('s') else kind} {clean(record['name'])}: "
                         f"{clean(record['error'])}")
    if stats.get("rejected_frames"):
        lines.append(f"refused: {stats['rejected_frames']} frames that failed authentication")
    if stats.get("embeddings"):
        lines.append(f"vectors: {embeddings_text(stats['embeddings'])}")
    if "members" in stats:
        lines.append(members_text(stats))
    return "\n".join(lines)


def embeddings_text(view: dict[str, Any]) -> str:
    """``stats``' embeddings in a line: rows still without a vector, and what failed last."""
    missing = view.get("rows_without_vector")
    text = (f"{clean(view['model'])}: {'?' if missing is None else missing} rows without a vector, "
            f"{view.get('filled', 0)} given one since the start")
    if view.get("last_error") and not view.get("healthy", True):
        text += f"; failing, next try in {view['next_try_s']:g}s: {clean(view['last_error'])}"
    if view.get("recall_without_vector"):
        text += (f"; {view['recall_without_vector']} recalls by full text alone (last: "
                 f"{clean(view.get('last_recall_error') or '')})")
    if view.get("search_without_vector"):
        text += (f"; {view['search_without_vector']} memory.search steps by full text alone (last: "
                 f"{clean(view.get('last_search_error') or '')})")
    return text


def capabilities_text(capabilities: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """``NAME=VALUE, ...`` as ``pegasus join --capability`` takes them."""
    return ", ".join(f"{clean(name)}={clean(value)}" for name, value in sorted(capabilities.items())
                     if name not in skip)


def members_text(stats: dict[str, Any]) -> str:
    """Each admin of a convention (``local``: the one the pools run on) and its workers."""
    rows = stats.get("members") or []
    if not rows:
        return "members: (none)"
    pools = sorted(stats.get("pools", {}))
    lines = ["members:"]
    for row in rows:
        counts = ", ".join(f"{pool} {row['workers'].get(pool, 0)}" for pool in pools)
        from actors.runtime.convention import WORKER_CAPABILITIES
        extra = capabilities_text(row["capabilities"], (*WORKER_CAPABILITIES, "pegasus.member", "pegasus.home"))
        lines.append(f"  {row['name']:<22} {'local' if row['local'] else 'member':<7} workers: {counts}"
                     + (f"  ({extra})" if extra else "") + contact_text(row.get("contact"), stats.get("now")))
    return "\n".join(lines)


def contact_text(contact: dict[str, Any] | None, now: float | None) -> str:
    """``  rtt 0.41 ms (avg 0.52), last contact 0.8 s ago`` for a member (nothing for the local admin)."""
    if not contact:
        return ""
    rtt = ("rtt -" if contact.get("rtt_ms") is None
           else f"rtt {contact['rtt_ms']:.2f} ms (avg {contact['rtt_avg_ms']:.2f}, max {contact['rtt_max_ms']:.2f})")
    last = contact.get("last_contact")
    if last is None:
        return f"\n{'':<32}{rtt}, never heard from"
    when = f"{max(0.0, (now or time.time()) - last):.1f} s ago"
    return f"\n{'':<32}{rtt}, last contact {when}"


def tools_text(catalogue: dict[str, Any], arguments: Any) -> str:
    """``pegasus tools``: name, effect class, source, description and arguments of each tool."""
    lines = [f"{r['name']:<20} {r['effect']:<10} {r['source']:<12} {clean(r['description'])}\n"
             f"{'':<20} args: {clean(arguments(r['schema']))}" for r in catalogue["tools"]]
    lines += [f"{name + '.*':<20} {'-':<10} {'mcp:' + name:<12} UNAVAILABLE: {clean(why)}"
              for name, why in catalogue["unavailable"].items()]
    return "\n".join(lines)
