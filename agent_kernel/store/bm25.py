"""Okapi BM25 ranking computed in SQL (DuckDB's fts extension is not bundled with the wheel).

:func:`terms` splits text into word tokens; :func:`ranked` scores the rows of a ``docs``
table expression against a query's terms. Memories and past sessions are ranked with it.
"""

from __future__ import annotations

# Words that say nothing about what a text is about; left out of queries.
_STOPWORDS_TEXT = (
    "a about an and any are as at be been but by can could did do does for from had has have "
    "he her his how i if in into is it its me my of on or our she should so than that the "
    "their them then there these they this those to us was we were what when where which who "
    "why will with would you your"
)
STOPWORDS = _STOPWORDS_TEXT.split()


def terms(text_sql: str) -> str:
    """SQL: the word tokens of ``text_sql``, lower-cased, a plural ``s`` dropped."""
    return (
        "list_transform(list_filter(regexp_split_to_array(lower(" + text_sql + "), "
        r"'[^\p{L}\p{N}]+'), lambda t: length(t) > 1), lambda t: CASE WHEN length(t) > 3 "
        "AND suffix(t, 's') AND NOT suffix(t, 'ss') THEN left(t, length(t) - 1) ELSE t END)"
    )


def ranked(docs_sql: str, *, then_by: str) -> str:
    """SQL ranking the rows of ``docs_sql`` against the query (the statement's first ``?``
    after those of ``docs_sql``), best first, at most the last ``?`` rows.

    ``docs_sql`` selects at least ``id`` (unique) and ``terms`` (from :func:`terms`). The
    result has ``docs_sql``'s other columns and ``score`` (k1 = 1.2, b = 0.75); equal scores
    are ordered by ``then_by`` (a column, descending); rows that match no query term are
    left out.
    """
    return f"""
WITH docs AS ({docs_sql}),
query_terms AS (
    SELECT DISTINCT term FROM (SELECT unnest({terms("?")}) AS term)
    WHERE NOT list_contains([{", ".join(f"'{w}'" for w in STOPWORDS)}], term)
),
stats AS (SELECT count(*)::DOUBLE AS n, greatest(avg(len(terms)), 1)::DOUBLE AS avgdl FROM docs),
hits AS (
    SELECT docs.id, query_terms.term,
           len(list_filter(docs.terms, lambda t: t = query_terms.term))::DOUBLE AS tf,
           len(docs.terms)::DOUBLE AS dl
    FROM docs, query_terms
),
frequency AS (SELECT term, count(*) FILTER (WHERE tf > 0)::DOUBLE AS df FROM hits GROUP BY term),
scores AS (
    SELECT hits.id,
           sum(ln(1 + (stats.n - frequency.df + 0.5) / (frequency.df + 0.5))
               * hits.tf * 2.2 / (hits.tf + 1.2 * (0.25 + 0.75 * hits.dl / stats.avgdl))) AS score
    FROM hits JOIN frequency USING (term), stats
    WHERE hits.tf > 0
    GROUP BY hits.id
)
SELECT docs.* EXCLUDE (terms), scores.score
FROM docs JOIN scores USING (id)
ORDER BY scores.score DESC, docs.{then_by} DESC
LIMIT ?
"""
