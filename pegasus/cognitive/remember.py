"""What the offline processors read as memory: "remember ..." statements, and the recalled fact that
answers a question.

``remembered(text)``: the facts a text asks to keep ("remember that X is Y", "remember: ..."), each a
``memory.write`` step (idempotent, so the reflector writing them again changes nothing);
``answering_fact(question, recall)``: the recalled fact holding every content word of a question;
``earlier_episode(text, recall)``: the recalled episode of the same request.  Pure, linear-time.
"""

from __future__ import annotations

import re

from pegasus.task.models import Fact, Memory, Recall

MEMORY_WRITE = "memory.write"  # the memory store's tool (pegasus.tools.memory), run where the store is
PATH_CHARS = 60
_REMEMBER = re.compile(r"\bremember\b\s*(?::\s*|\s+that\s+|\s+)(?P<body>[^\n]+)", re.I)
_END = re.compile(r"\s*(?:[.;!]\s|[.;!]?$)")
_VERB = re.compile(r"\s(?:is|are|was|were|lives?|sits?|goes|runs?|means?|equals?|has|have|uses?|should|must|"
                   r"can|will)\s", re.I)
_ARTICLE = re.compile(r"^(?:the|a|an|our|my|your|their|this|that)\s+", re.I)
_WORD = re.compile(r"[a-z0-9]+")
_QUESTION = re.compile(r"^\s*(?:where|what|who|when|which|how|why|is|are|does|do|did|can|tell\s+me)\b|\?\s*$", re.I)
_STOP = frozenset("""a an the is are was were be been of in on at to for from by with and or what where who when which
how why does do did can could would should will tell me us my our your you it its this that these those there here
please about know remember find get give show i we""".split())


def slug(subject: str) -> str:
    """A fact's path from its subject: "the Deploy key" -> "deploy-key" (the memory store's path rules)."""
    words = _WORD.findall(_ARTICLE.sub("", subject.strip()).lower())
    return "-".join(words)[:PATH_CHARS].strip("-") or "note"


def remembered(text: str) -> list[Fact]:
    """The facts ``text`` asks to remember, in order (one per "remember" clause)."""
    facts: list[Fact] = []
    for match in _REMEMBER.finditer(text):
        body = match.group("body")
        end = _END.search(body)
        sentence = body[:end.start()].strip() if end else body.strip()
        if not sentence:
            continue
        verb = _VERB.search(f" {sentence} ")
        subject = sentence[:verb.start()] if verb and verb.start() > 0 else " ".join(sentence.split()[:4])
        content = sentence[0].upper() + sentence[1:]
        facts.append(Fact(path=slug(subject), content=content if content.endswith(".") else content + "."))
    return facts


def is_question(text: str) -> bool:
    return bool(_QUESTION.search(text))


def _words(text: str) -> set[str]:
    return {word.rstrip("s") if len(word) > 3 else word for word in _WORD.findall(text.lower())}


def answering_fact(question: str, recall: Recall | None) -> Memory | None:
    """The first recalled fact that holds every content word of ``question`` (None: not a question,
    no content word, or no such fact).  Recalled memories come best first."""
    if recall is None or not is_question(question):
        return None
    wanted = _words(question) - _STOP
    if not wanted:
        return None
    for memory in recall.memories:
        if memory.kind == "fact" and wanted <= _words(f"{memory.title} {memory.text}"):
            return memory
    return None


def episode_title(text: str) -> str:
    """An episode's title for a request: its first line, cut."""
    first = text.strip().splitlines()[0] if text.strip() else "(empty request)"
    return first if len(first) <= 80 else first[:77] + "..."


def earlier_episode(text: str, recall: Recall | None) -> Memory | None:
    """The recalled episode whose title is this request's (the same request, done before)."""
    if recall is None:
        return None
    title = episode_title(text).casefold()
    return next((m for m in recall.memories if m.kind == "episode" and m.title.casefold() == title), None)
