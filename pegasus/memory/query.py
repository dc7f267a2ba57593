"""Free text -> an FTS5 MATCH expression that can never be a syntax error.

FTS5 gives meaning to quotes, ``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``^``, ``:`` and parentheses,
so the text is cut into words (like FTS5's unicode61 tokenizer) and each is sent quoted, OR-ed: BM25
ranks the rows sharing the most, and rarest, words first.  ``informative`` leaves out words found in
more than half the rows: BM25 clamps their IDF to 1e-6, so they change no ranking but cost most of a
search (docs/agent-memory.md, "Search").
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 32  # a pasted page is not a query: its first words are enough to rank by
_WORD = re.compile(r"[^\W_]+")  # letters and digits: unicode61's tokens (an underscore separates)
# Words so common in questions that they only add noise to BM25 (English; the rest is left to IDF).
STOP = frozenset("a an and are as at be by do does for from how i in is it me my of on or our "
                 "that the this to was we what when where which who why with you your".split())


def plain(word: str) -> str:
    """A word as the index holds it: lower case, diacritics dropped (unicode61 remove_diacritics 2)."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The distinct searchable words of ``text``, lower-cased, in order, stop words dropped (all of them kept
    when every word is one)."""
    found = [word for word in map(plain, _WORD.findall(text)) if word]
    distinct = list(dict.fromkeys(found))
    kept = [w for w in distinct if w not in STOP] or distinct
    return kept[:MAX_TERMS]


def match_expression(text: str | list[str]) -> str | None:
    """The MATCH expression for ``text`` (or its words; None: nothing to search for)."""
    terms = words(text) if isinstance(text, str) else text
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def informative(terms: list[str], documents: dict[str, int], rows: int) -> list[str]:
    """The terms worth ranking by: those in the index (``documents``: term -> rows holding it) and in at most half
    of its ``rows``; when every one is commoner, the rarest alone (a search always has a chance to find)."""
    present = [term for term in terms if documents.get(term)]
    kept = [term for term in present if documents[term] * 2 <= rows]
    return kept or sorted(present, key=lambda term: documents[term])[:1]
