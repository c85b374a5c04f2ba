"""Near-duplicate topics, by lexical similarity in pure Python (no embedding model needed).

The original embeds summary + introduction and keeps one topic per KMeans cluster. Here: first the
exact summary (case- and space-insensitive; the best topic by modelability, then usefulness, then
input order is kept), then a greedy pass in that same order that keeps a topic only when its
similarity to every kept topic is below the threshold. Similarity is TF-IDF cosine (smoothed idf,
log-scaled term frequency) or token-set Jaccard, over summary + introduction without stop words.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

STOP_WORDS = frozenset(["a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "being", "between", "both", "but", "by", "can", "could", "do", "does", "each", "either", "for", "from", "has", "have", "how", "in", "into", "is", "it", "its", "may", "more", "most", "much", "must", "no", "not", "of", "on", "one", "or", "other", "our", "over", "per", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "under", "up", "use", "used", "uses", "using", "via", "was", "we", "were", "what", "when", "where", "which", "while", "who", "will", "with", "within", "without", "would", "you", "your", "system", "systems", "manage", "manages", "management", "managing", "environment"])
_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class TopicText:
    item: str
    summary: str
    introduction: str
    usefulness: int
    modelability: int


def tokens(text: str) -> list[str]:
    words = [_stem(word) for word in _TOKEN.findall(text.lower())]
    return [word for word in words if word not in STOP_WORDS and len(word) > 1]


def _stem(word: str) -> str:
    """A light plural stem: appointments -> appointment, entries -> entry."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    set_a, set_b = set(a), set(b)
    if not set_a and not set_b:
        return 1.0
    return len(set_a & set_b) / len(set_a | set_b)


def tfidf_vectors(documents: list[list[str]]) -> list[dict[str, float]]:
    """L2-normalised TF-IDF vectors; idf = ln((1 + n) / (1 + df)) + 1, tf = 1 + ln(count)."""
    count = len(documents)
    frequency: Counter[str] = Counter()
    for document in documents:
        frequency.update(set(document))
    vectors = []
    for document in documents:
        weights = {term: (1 + math.log(tf)) * (math.log((1 + count) / (1 + frequency[term])) + 1)
                   for term, tf in Counter(document).items()}
        norm = math.sqrt(sum(weight * weight for weight in weights.values())) or 1.0
        vectors.append({term: weight / norm for term, weight in weights.items()})
    return vectors


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(weight * b.get(term, 0.0) for term, weight in a.items())


def rank(topic: TopicText, position: int) -> tuple[int, int, int]:
    return (-topic.modelability, -topic.usefulness, position)


def deduplicate(topics: list[TopicText], *, method: str = "tfidf",
                threshold: float = 0.5) -> tuple[list[TopicText], list[tuple[str, str]]]:
    """The topics kept (in input order) and ``(item, reason)`` for each one removed."""
    order = sorted(range(len(topics)), key=lambda index: rank(topics[index], index))
    drops: list[tuple[str, str]] = []
    by_summary: dict[str, TopicText] = {}
    distinct: list[int] = []
    for index in order:
        topic = topics[index]
        key = " ".join(topic.summary.lower().split())
        if key in by_summary:
            reason = f"same summary as {by_summary[key].item} ({topic.summary!r})"
            drops.append((topic.item, reason))
            continue
        by_summary[key] = topic
        distinct.append(index)
    texts = [tokens(f"{topics[i].summary} {topics[i].introduction}") for i in distinct]
    vectors = tfidf_vectors(texts) if method == "tfidf" else []
    kept: list[int] = []  # positions in ``distinct``
    for position, index in enumerate(distinct):
        best, best_score = None, 0.0
        for other in kept:
            score = cosine(vectors[position], vectors[other]) if method == "tfidf" else \
                jaccard(texts[position], texts[other])
            if score > best_score:
                best, best_score = other, score
        if best is not None and best_score >= threshold:
            reason = (f"near-duplicate of {topics[distinct[best]].item} "
                      f"({method} similarity {best_score:.2f} >= {threshold:g})")
            drops.append((topics[index].item, reason))
            continue
        kept.append(position)
    survivors = sorted(distinct[position] for position in kept)
    return [topics[index] for index in survivors], drops
