"""The messages each stage sends to the model, built from a TaskContext (pure: text in, text out).

It owns each stage's system prompt, how the request, earlier outputs and tool results are shown,
and the function-calling ``tools`` list; it must not call the model or validate replies.  Tool
names such as ``demo.reverse`` are not valid OpenAI function names, so each gets an API name
(``demo__reverse``) that ``ToolSpecs.tool_name`` maps back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pegasus.task.models import ActionResult, Plan, TaskContext

ANSWER_JSON_ONLY = "Reply with one JSON object and nothing else (no Markdown, no code fence)."

PERCEIVE = f"""You are the perception stage of an agent runtime.
Read the user's request and describe it as JSON:
{{"task_type": "<short label>", "intents": ["<each thing the user wants done>"],
 "entities": {{"<kind>": ["<values: names, paths, numbers, quoted text>"]}},
 "summary": "<one sentence>"}}
{ANSWER_JSON_ONLY}"""

THINK = f"""You are the thinking stage of an agent runtime.
Given the request and its perception, decide how to do it with the tools available:
{{"approach": "<how to do it, which tools>"}}
Only when the request is empty, ambiguous, or cannot be started without an answer
from the user, add to it "need_more_info": true, "question": "<what to ask the user>".
Tools available:
{{tools}}
{ANSWER_JSON_ONLY}"""

PLAN = f"""You are the planning stage of an agent runtime.
Call the tools the request needs with function calls (one call per step, in order).
Or reply with the whole plan as JSON:
{{"goal": "<the goal>", "reasoning": "<why these steps>",
 "steps": [{{"action_type": "tool_call", "tool": "<tool name>", "args": {{}}, "description": "<what it does>"}},
           {{"action_type": "respond", "text": "<the answer>"}}]}}
A respond step ends the plan.  Give it a text only when the answer needs no tool
result; otherwise leave the text out and the tool results are shown to the user.
{ANSWER_JSON_ONLY}"""

REFLECT = f"""You are the reflection stage of an agent runtime.
Judge what the plan's steps did for the request:
{{"verdict": "complete" | "continue" | "replan", "assessment": "<what was achieved>",
 "lessons": ["<what to remember>"], "next_focus": "<what to do next, or null>"}}
complete: the results answer the request, or failed in a way another try will not fix.
replan: a step failed and a different or repeated plan may work.
continue: the request needs more work than this plan did.
{ANSWER_JSON_ONLY}"""

REASON = f"""You are an agent that reasons and acts.
When you need a tool's result, call the tool with a function call; you will see
its result and can call more tools.  When you have everything you need, reply:
{{"thought": "<your reasoning>", "answer": "<the final answer to the user>"}}
When you cannot go on without the user, reply
{{"need_more_info": true, "question": "<what to ask the user>"}}.
If function calls are not available, plan tool calls as JSON:
{{"thought": "...", "steps": [{{"action_type": "tool_call", "tool": "<name>", "args": {{}}}}]}}
Replies that are not function calls: {ANSWER_JSON_ONLY[0].lower() + ANSWER_JSON_ONLY[1:]}"""

SUB_TASKS = """A step may instead start a sub-task, a task of its own that another agent runs and whose
answer comes back as the step's result: {{"action_type": "sub_task", "text": "<the task, self-contained>"}}.
Sub-task steps in a row run in parallel.  Use them for independent parts of a large request, not for
one tool call.  Limits: at most {max_children} sub-tasks per task, nested at most {max_depth} deep
(a submitted task is depth 0); a sub-task past a limit is refused and its step fails."""
SUB_TASK_RESULT = "Sub-task result:"


def sub_task_rule(max_depth: int, max_children: int) -> str:
    """What the planning prompts say of sub_task steps, with the configured limits ("" when none may start)."""
    return "" if max_depth == 0 or max_children == 0 else SUB_TASKS.format(max_depth=max_depth,
                                                                          max_children=max_children)


POST_REFLECT = f"""You are the post-task reflector of an agent runtime.
A task is finished.  Decide what the agent should keep in long-term memory:
{{"facts": [{{"path": "<short-kebab-case-name>", "content": "<a durable fact, one or two sentences>"}}],
 "episode": {{"title": "<the request, short>", "summary": "<what was done and the outcome>",
             "details": "<what matters to do it again>", "lesson": "<what to do differently, or empty>"}},
 "assessment": "<how well the task went>"}}
Keep only facts worth knowing in later tasks (what the user asked to remember, names, places,
settings); none is fine.  Paths use lowercase letters, digits, "-", "_", "." and "/".
{ANSWER_JSON_ONLY}"""

# What a prompt that looks back at steps may carry (reflect, post_reflect, and plan on a replan; think's
# perception): each step's output, arguments or error as an excerpt with a marker saying so, at most
# STEPS_SHOWN steps (the first and the last ones), the plan once (its goal and each step beside its result).
# A small local model reads a prompt at a few tokens/s: reflect's prompt, with the whole plan and every
# output twice, reached 2,690 tokens.  reason_act's tool results are its protocol, left whole (the
# context budget, [llm] context_window, cuts those).  docs/llm.md, "What a prompt carries".
EXCERPT_CHARS = 600  # of one step's output, arguments or error; of the perception in think's prompt
NAME_CHARS = 100  # of a tool's name, a goal, a step's description
REQUEST_CHARS = 2000  # of the request, in the prompts that judge or recall it (reflect, post_reflect)
ANSWER_CHARS = 1500  # of the final answer, in post_reflect's prompt
STEPS_SHOWN = 8
CUT = "…[cut: {shown} of {total} characters shown]"
TOOL_RESULT = "Tool result:"
IDENTITY_CHARS = 2000  # of the identity, in a system prompt (the context budget never cuts that one)
MEMORY_CHARS = 500  # of one recalled memory
MEMORY_HEADER = "From memory (facts and earlier tasks that may be relevant; cite the id when you use one):"
MUST_ANSWER = ("You have used the tool-call budget of this task: answer now from the results above, "
               'as {"thought": "...", "answer": "..."}.')


PROMPTED_TOOLS = """Function calls are not available here: to call a tool, write the call as a step in the
"steps" of your JSON reply, {"action_type": "tool_call", "tool": "<tool name>", "args": {<its arguments>}}.
The tools, with the JSON schema of their arguments:
"""


def prompted_tools(tools: ToolSpecs) -> str:
    """The prompted tool protocol: the tools and their argument schemas, for a model without ``tools``."""
    listed = [f"- {tools.tool_name(spec['function']['name'])}: {spec['function']['description']}\n"
              f"  arguments: {_json(spec['function']['parameters'])}" for spec in tools.specs]
    return PROMPTED_TOOLS + ("\n".join(listed) or "(none)")


REFUSED_NOTE = "refused: the same call is refused again, do not repeat it"


def retry_message(error: str) -> str:
    """What the model is told after an invalid reply."""
    return f"Your reply could not be used: {error}\nReply again, correctly. {ANSWER_JSON_ONLY}"


# -- tools ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpecs:
    """The ``tools`` parameter of a request, and the registry name of each function name."""

    specs: tuple[dict[str, Any], ...]
    names: dict[str, str]  # api name -> registry name

    def tool_name(self, api_name: str) -> str:
        return self.names.get(api_name, api_name)

    def lines(self) -> str:
        return "\n".join(f"- {spec['function']['name']}: {spec['function']['description']}"
                         for spec in self.specs) or "(none)"


def api_name(name: str) -> str:
    """``name`` as a valid function name: runs of other characters become ``__``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "__", name)[:64] or "tool"


def tool_specs(described: Iterable[dict[str, Any]]) -> ToolSpecs:
    """The function-calling list from ``ToolRegistry.describe()`` entries."""
    specs: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for entry in described:
        name = api_name(entry["name"])
        if name in names:  # two names that differ only in unusual characters: keep them apart
            name = f"{name[:60]}_{len(names)}"
        names[name] = entry["name"]
        description = f"{entry['description']} (effect: {entry['effect']})"
        specs.append({"type": "function",
                      "function": {"name": name, "description": description, "parameters": entry["schema"]}})
    return ToolSpecs(tuple(specs), names)


# -- what the model is shown ---------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def request_text(context: TaskContext) -> str:
    """The user's request and what the user added on resume."""
    parts = [context.input_text.strip() or "(empty request)"]
    for message in context.messages:
        if message.get("role", "user") == "user" and str(message.get("content") or "").strip():
            parts.append(f"The user added: {message['content']}")
    return "\n\n".join(parts)


def excerpt(value: Any, limit: int) -> Any:
    """``value`` as it is when its text fits ``limit`` characters, else its first ``limit`` and a marker."""
    text = value if isinstance(value, str) else _json(value)
    if len(text) <= limit:
        return value
    return text[:limit] + CUT.format(shown=f"{limit:,}", total=f"{len(text):,}")


def result_view(result: ActionResult, limit: int | None = None) -> dict[str, Any]:
    """One step's result as the model is shown it; ``limit``: its output, arguments and error as excerpts."""
    def cut(value: Any, chars: int | None = limit) -> Any:
        return value if limit is None or chars is None else excerpt(value, chars)

    view: dict[str, Any] = {"step": result.step_index, "action": result.action_type}
    if result.tool:
        view.update(tool=cut(result.tool, NAME_CHARS), args=cut(result.params))
    view["success"] = result.success
    view["output" if result.success else "error"] = cut(result.output if result.success else result.error)
    if result.refused:  # deterministic: the model is told so, and a repeat is refused without a call
        view["refused"] = REFUSED_NOTE
    return view


def steps_view(results: list[ActionResult], plan: Plan | None = None) -> list[dict[str, Any]]:
    """The plan's steps once, each beside its result (excerpts), at most STEPS_SHOWN (the first and the
    last ones, the rest counted): what reflect, post_reflect and a replan are shown of what was done."""
    done = {result.step_index for result in results}
    views = [result_view(result, EXCERPT_CHARS) for result in results]
    views += [{"step": step.index, "action": step.action_type, "not run": excerpt(step.description, NAME_CHARS)}
              for step in (plan.steps if plan else []) if step.index not in done and not step.completed]
    if len(views) <= STEPS_SHOWN:
        return views
    head = STEPS_SHOWN // 2
    return [*views[:head], {"not shown": f"{len(views) - STEPS_SHOWN} steps"}, *views[-(STEPS_SHOWN - head):]]


def _system(prompt: str) -> dict[str, Any]:
    return {"role": "system", "content": prompt}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def with_identity(prompt: str, context: TaskContext) -> str:
    """The stage's system prompt and, after it, who the agent is (``[agent]`` or identity.md)."""
    identity = context.recall.identity.strip() if context.recall is not None else ""
    return f"{prompt}\n\nWho you are:\n{identity[:IDENTITY_CHARS]}" if identity else prompt


def memory_text(context: TaskContext) -> str:
    """The memories recalled for this stage, one line each (id, title, text cut), or ''.  In the user's
    message, where the context budget may cut it: recalled text never crowds out the request."""
    memories = context.recall.memories if context.recall is not None else []
    if not memories:
        return ""
    lines = [f"- [{m.id}] {m.title}: {' '.join(m.text.split())[:MEMORY_CHARS]}" for m in memories]
    return "\n\n" + MEMORY_HEADER + "\n" + "\n".join(lines)


def post_reflect_messages(context: TaskContext) -> list[dict[str, Any]]:
    """The finished task: its request, its steps' results and its answer (each bounded)."""
    text = (f"{excerpt(request_text(context), REQUEST_CHARS)}\n\nSteps: {_json(steps_view(context.actions_done))}"
            f"\n\nFinal answer: {_json(excerpt(context.final_result, ANSWER_CHARS))}")
    return [_system(with_identity(POST_REFLECT, context)), _user(text)]


def perceive_messages(context: TaskContext) -> list[dict[str, Any]]:
    return [_system(PERCEIVE), _user(request_text(context))]


def think_messages(context: TaskContext, tools: ToolSpecs) -> list[dict[str, Any]]:
    text = request_text(context)
    if context.perception is not None:
        text += f"\n\nPerception: {excerpt(_json(context.perception), EXCERPT_CHARS)}"
    return [_system(with_identity(THINK.replace("{tools}", tools.lines()), context)), _user(text + memory_text(context))]


def _with_tools(prompt: str, prompted: ToolSpecs | None, sub_tasks: str = "") -> dict[str, Any]:
    prompt = f"{prompt}\n\n{sub_tasks}" if sub_tasks else prompt
    return _system(prompt if prompted is None else f"{prompt}\n\n{prompted_tools(prompted)}")


def plan_messages(context: TaskContext, previous: list[ActionResult], *,
                  prompted: ToolSpecs | None = None, sub_tasks: str = "") -> list[dict[str, Any]]:
    """The request and reasoning; on a replan, the previous plan's results and its reflection.
    ``prompted``: the tools are listed in the prompt (the endpoint takes no ``tools``);
    ``sub_tasks``: what it says of sub_task steps (``sub_task_rule``)."""
    text = request_text(context)
    if context.reasoning is not None:
        text += f"\n\nReasoning: {excerpt(_json(context.reasoning), EXCERPT_CHARS)}"
    if context.reflections and context.reflections[-1].verdict != "complete":
        reflection = excerpt(_json(context.reflections[-1].model_dump(mode="json")), EXCERPT_CHARS)
        text += (f"\n\nThe previous plan's results: {_json(steps_view(previous))}"
                 f"\nIts reflection: {reflection}\nMake a new plan.")
    return [_with_tools(PLAN, prompted, sub_tasks), _user(text)]


def reflect_messages(context: TaskContext, results: list[ActionResult]) -> list[dict[str, Any]]:
    """The request, the plan's goal, and its steps once, each beside its result (bounded: steps_view)."""
    goal = excerpt(context.plan.goal, NAME_CHARS) if context.plan else "(no plan)"
    text = (f"{excerpt(request_text(context), REQUEST_CHARS)}\n\nThe plan's goal: {goal}"
            f"\n\nIts steps and their results: {_json(steps_view(results, context.plan))}")
    return [_system(REFLECT), _user(text)]


def reason_messages(context: TaskContext, *, must_answer: bool = False,
                    prompted: ToolSpecs | None = None, sub_tasks: str = "") -> list[dict[str, Any]]:
    """The request, then every tool call so far as the protocol's assistant/tool message pairs;
    ``prompted``: as the JSON steps the model wrote and user messages with their results (an
    endpoint without ``tools`` may not take ``tool`` messages either)."""
    messages = [_with_tools(with_identity(REASON, context), None if must_answer else prompted,
                            "" if must_answer else sub_tasks),
                _user(request_text(context) + memory_text(context))]
    for n, result in enumerate(context.actions_done):
        if result.action_type == "sub_task":  # a child's answer: as the user message it came as
            messages.append(_user(f"{SUB_TASK_RESULT} {_json(result_view(result))}"))
            continue
        if result.action_type != "tool_call" or not result.tool:
            continue
        if prompted is not None:
            step = {"action_type": "tool_call", "tool": result.tool, "args": result.params}
            messages.append({"role": "assistant", "content": _json({"steps": [step]})})
            messages.append(_user(f"{TOOL_RESULT} {_json(result_view(result))}"))
            continue
        call_id = f"call_{n}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": api_name(result.tool), "arguments": _json(result.params)}}]})
        content = result.output if result.success else {"error": result.error,
                                                        **({"refused": REFUSED_NOTE} if result.refused else {})}
        messages.append({"role": "tool", "tool_call_id": call_id,
                         "content": content if isinstance(content, str) else _json(content)})
    if must_answer:
        messages.append(_user(MUST_ANSWER))
    return messages
