"""tiny_gdn_words' tokenizer: whole words as tokens, digits one per token, characters as fallback.

Trained with the `tokenizers` library on the recipe's own text (niah_words.tokenizer_corpus):
a word-level trainer collects every word of that text, and the saved model is a BPE without
merges that looks words up whole first (`ignore_merges`), so a word outside the vocabulary
(a UUID's hex run, a rare word) falls back to its characters instead of an unknown token.
Spaces are Metaspace's "▁" glued to the next word; digits are split off in groups of three and
punctuation alone, so a 7-digit value is 3 tokens and "blue-eyed" is "▁blue", "-", "eyed". The result is a standard
tokenizer.json, read back by `backbone=tiny_gdn_words` like any other.
"""

from __future__ import annotations

from memexp.backbones.tokenizer import BOS, EOS, HFTokenizer

UNK = "<unk>"
SPACE = "\u2581"
ALPHABET = [chr(c) for c in range(32, 127)] + ["\n", "\t", SPACE]
DIGIT_GROUPS = [f"{n:0{w}d}" for w in (1, 2, 3) for n in range(10 ** w)]  # every piece the digit split makes


def _pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\n"), "isolated"),
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never"),
        # digits in groups of three from the left, as Llama 3's tokenizer splits numbers: a 7-digit
        # value is 3 tokens, each of 1,110 distinct ones, so copying it is a lookup of the previous token
        pre_tokenizers.Split(Regex(r"[0-9]{1,3}"), "isolated"),
        pre_tokenizers.Punctuation("isolated"),
    ])


def train_tokenizer(corpus) -> HFTokenizer:
    """A word tokenizer over every word of `corpus` (an iterable of strings)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, trainers

    counter = Tokenizer(models.WordLevel(unk_token=UNK))
    counter.pre_tokenizer = _pre_tokenizer()
    counter.train_from_iterator(corpus, trainer=trainers.WordLevelTrainer(special_tokens=[UNK, BOS, EOS],
                                                                          min_frequency=1, show_progress=False))
    vocab = counter.get_vocab()
    for piece in ALPHABET + DIGIT_GROUPS:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK, ignore_merges=True))
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="never")
    tok.add_special_tokens([AddedToken(BOS, special=True), AddedToken(EOS, special=True)])
    return HFTokenizer(tok, tok.token_to_id(BOS), tok.token_to_id(EOS))
