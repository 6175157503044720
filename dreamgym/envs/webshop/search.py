"""WebShop search: BM25 (bm25s, Lucene variant, k1=0.9, b=0.4) over one document per product.

Mirrors upstream's pyserini index: a product's document is the lower-cased ``title + " " + description
+ " " + bullets[0] + " " + option_text`` where ``option_text`` is ``"name: v1, v2, and name2: ..."``.
Analysis is Lucene-EnglishAnalyzer-like: lower-case, ``\\w+`` tokens, possessive ``'s`` dropped,
Lucene's 33 English stop words removed, Porter stemming (PyStemmer). The query is a bag-of-words OR
query; only documents with a positive score are returned, best first, ties in catalog order; at most
``SEARCH_RETURN_N`` (50) hits. Indexes are cached on the catalog, so building one happens once per
process and data directory.
"""

from __future__ import annotations

import random
import re

import bm25s
import numpy as np
import Stemmer

from dreamgym.envs.webshop.catalog import Catalog, Product

__all__ = [
    "SEARCH_RETURN_N",
    "PRODUCT_WINDOW",
    "BM25Index",
    "SearchEngine",
    "analyze",
    "product_document",
    "get_search_engine",
]

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
_TOKEN = re.compile(r"\w+")
_STEMMER = Stemmer.Stemmer("porter")


def analyze(text: str) -> list[str]:
    """Lucene-like English analysis: lower-case, tokens, no possessives, no stop words, Porter stems."""
    text = text.lower().replace("'s ", " ").replace("\u2019s ", " ")
    toks = [t for t in _TOKEN.findall(text) if t not in LUCENE_STOPWORDS]
    return _STEMMER.stemWords(toks)


def product_document(p: Product) -> str:
    """The indexed text of a product (upstream ``convert_product_file_format``)."""
    option_text = ", and ".join(f"{name}: {', '.join(vals)}" for name, vals in p.options.items())
    first_bullet = p.bullets[0] if p.bullets else ""
    return f"{p.title} {p.description} {first_bullet} {option_text}".lower()


class BM25Index:
    """BM25 (Lucene variant) over ``texts`` analysed as the engine analyses them (:func:`analyze`).

    Args:
        ids: one id per text (what :meth:`search` returns).
        texts: the documents, in ``ids`` order (ties rank in this order).
        k1, b: BM25 parameters (Anserini defaults).
    """

    def __init__(self, ids: list[str], texts: list[str], k1: float = 0.9, b: float = 0.4):
        self.ids = list(ids)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        corpus = [analyze(t) or ["__empty__"] for t in texts]
        self._bm25.index(corpus, show_progress=False)
        self._vocab = {t for doc in corpus for t in doc}  # unknown query tokens cannot score

    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Ids of the top ``k`` documents with a positive score for the bag-of-words ``keywords``, best first."""
        tokens = [t for t in analyze(keywords) if t in self._vocab]
        if not tokens or not self.ids:
            return []
        scores = np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


class SearchEngine:
    """BM25 over a catalog's products (:class:`BM25Index` of :func:`product_document`).

    Args:
        catalog: the loaded catalog.
        k1, b: BM25 parameters (Anserini defaults).
    """

    def __init__(self, catalog: Catalog, k1: float = 0.9, b: float = 0.4):
        self.asins = list(catalog.products)
        self._products = catalog.products
        self._index = BM25Index(self.asins, [product_document(p) for p in catalog.products.values()], k1, b)

    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """ASINs of the top ``k`` products for ``keywords``, best first.

        Upstream's special first keywords work too: ``<r>`` gives ``k`` random products (seeded by the
        keywords, so reproducible), ``<c> cat`` the products of category ``cat`` and ``<q> query`` those
        scraped with ``query`` (catalog order).
        """
        words = keywords.split(" ")
        if words[0] == "<r>":
            return random.Random(keywords).sample(self.asins, min(k, len(self.asins)))
        if words[0] in ("<c>", "<q>"):
            want = " ".join(words[1:]).strip()
            field = "category" if words[0] == "<c>" else "query"
            return [a for a in self.asins if getattr(self._products[a], field) == want][:k]
        return self._index.search(keywords, k)


def get_search_engine(catalog: Catalog) -> SearchEngine:
    """The catalog's search engine, built once and cached on the catalog."""
    return catalog.memo("search", lambda: SearchEngine(catalog))
