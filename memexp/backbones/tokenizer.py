"""Concrete tokenizers behind `memexp.backbones.base.Tokenizer`.

- `HFTokenizer` wraps a `tokenizers.Tokenizer` (a tokenizer.json) or a transformers
  tokenizer; text is encoded without special tokens, BOS is prepended only on request.
- `ByteTokenizer` is memexp's built-in byte-level tokenizer: ids 0..255 are the UTF-8
  bytes, 256 is <s> (BOS) and 257 is </s> (EOS). It saves as a standard tokenizer.json
  (byte-level BPE without merges) that `HFTokenizer` reads back with the same ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from memexp.backbones.base import Tokenizer

BOS, EOS = "<s>", "</s>"


class HFTokenizer(Tokenizer):
    """A `tokenizers.Tokenizer` or a transformers tokenizer with explicit BOS/EOS ids."""

    def __init__(self, tok, bos_id: int | None, eos_id: int | None) -> None:
        self.tok = tok
        self.bos_id, self.eos_id = bos_id, eos_id
        self._fast = type(tok).__module__.startswith("tokenizers")

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        if self._fast:
            ids = self.tok.encode(text, add_special_tokens=False).ids
        else:
            ids = self.tok.encode(text, add_special_tokens=False)
        return ([self.bos_id] if add_bos and self.bos_id is not None else []) + list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size() if self._fast else len(self.tok)

    def save(self, directory: str | Path) -> None:
        """Write tokenizer.json (+ tokenizer_config.json naming BOS/EOS) to `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if not self._fast:
            self.tok.save_pretrained(str(directory))
            return
        self.tok.save(str(directory / "tokenizer.json"))
        _write_tokenizer_config(directory, self.tok.id_to_token(self.bos_id) if self.bos_id is not None else None,
                                self.tok.id_to_token(self.eos_id) if self.eos_id is not None else None)


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as ids 0..255, <s> = 256, </s> = 257 (vocab 258)."""

    vocab_size = 258

    def __init__(self) -> None:
        self.bos_id, self.eos_id = 256, 257

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        return ([self.bos_id] if add_bos else []) + list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def to_tokenizers(self):
        """The same tokenizer as a `tokenizers.Tokenizer` (byte-level BPE, no merges)."""
        from tokenizers import AddedToken, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as RustTokenizer

        by_byte = _bytes_to_unicode()
        vocab = {by_byte[b]: b for b in range(256)}
        tok = RustTokenizer(models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens([AddedToken(BOS, special=True), AddedToken(EOS, special=True)])  # ids 256, 257
        return tok

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.to_tokenizers().save(str(directory / "tokenizer.json"))
        _write_tokenizer_config(directory, BOS, EOS)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what ByteLevel uses)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def _write_tokenizer_config(directory: Path, bos: str | None, eos: str | None) -> None:
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
