"""Free text -> an FTS5 MATCH expression that can never be a syntax error.

FTS5's query language gives meaning to quotes, ``AND``/``OR``/``NOT``/``NEAR``,
``*``, ``^``, ``:`` and parentheses; a user's question ("where's the key?",
``"unbalanced``, ``NOT``) passed as is raises ``fts5: syntax error``.  So the
text is cut into words here (letters and digits, like FTS5's unicode61
tokenizer) and each word is sent as a quoted string: the only syntax left is
ours.  Words are OR-ed: BM25 ranks the rows that share the most (and the
rarest) words first, which is what "the k most relevant" means for a question.
"""

from __future__ import annotations

import re

MAX_TERMS = 32  # a pasted page is not a query: its first words are enough to rank by
_WORD = re.compile(r"\w+", re.UNICODE)
# Words so common in questions that they only add noise to BM25 (English; the rest is left to IDF).
STOP = frozenset("a an and are as at be by do does for from how i in is it me my of on or our "
                 "that the this to was we what when where which who why with you your".split())


def words(text: str) -> list[str]:
    """The distinct searchable words of ``text``, lower-cased, in order, stop words dropped (all of them kept
    when every word is one)."""
    found = [w.lower() for w in _WORD.findall(text) if w.strip("_")]
    distinct = list(dict.fromkeys(found))
    kept = [w for w in distinct if w not in STOP] or distinct
    return kept[:MAX_TERMS]


def match_expression(text: str) -> str | None:
    """The MATCH expression for ``text`` (None: nothing to search for)."""
    terms = words(text)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
