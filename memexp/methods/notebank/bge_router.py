"""`method.router=bge`: the NoteBank paper's external-encoder control (Tables 3 and 8, "BGE").

Each note's decoded text and the question prompt (the text BM25 reads) are embedded by a BGE
encoder: the [CLS] vector of the last hidden layer, L2-normalised, as BGE's model card pools; a
note's score is the cosine with the question, the R best win, ties to the earlier note. The paper
names no checkpoint (only "BGE"), so the default is `BAAI/bge-base-en-v1.5`; `method.router_model`
points at another hub id or a local directory. The question (never a note) is embedded after
`method.router_query_instruction`, by default BGE v1.5's "Represent this sentence for searching
relevant passages: ", which its model card recommends for short-query-to-passage retrieval (the
paper states none; `""` embeds the bare question); the instruction used is recorded per answer
(`router_query_instruction`).

The bank is encoded once per archive; its seconds are recorded with every answer
(`router_bank_encoding_ms`, Table 8's "full-bank encoding" column), beside the question's own.
"""

from __future__ import annotations

from pathlib import Path

import torch

from memexp.backbones.base import Stopwatch
from memexp.backbones.loading import BackboneLoadError, resolve_pretrained
from memexp.methods.notebank.archive import Archive
from memexp.methods.notebank.config import BGE_QUERY_INSTRUCTION
from memexp.methods.notebank.router import RouteRequest, Selection, _selection, top_r

ENCODER_FIELD = "method.router_model"
BATCH = 32  # texts per encoder call
MAX_TOKENS = 512  # BGE's input limit; a longer note is truncated (notes are at most B = 64 tokens by default)


class BGERouter:
    needs_probe = False

    def __init__(self, replay_budget: int, encoder: str, query_instruction: str = BGE_QUERY_INSTRUCTION) -> None:
        self.replay_budget, self.source, self.query_instruction = replay_budget, encoder, query_instruction
        self.model = self.tokenizer = None
        self.device = torch.device("cpu")

    def prepare(self, device: torch.device, dtype: torch.dtype) -> None:
        """Load the encoder onto the backbone's device and compute dtype (once)."""
        if self.model is not None:
            return
        directory = resolve_pretrained(self.source, patterns=["*.json", "*.txt", "*.safetensors", "*.model"],
                                       field=ENCODER_FIELD)
        self.tokenizer, self.model = load_encoder(directory)
        self.model.to(device=device, dtype=dtype).eval()
        self.device = device
        self.max_tokens = min(MAX_TOKENS, getattr(self.model.config, "max_position_embeddings", MAX_TOKENS))

    def route(self, archive: Archive, request: RouteRequest) -> Selection:
        if self.model is None:
            self.prepare(torch.device("cpu"), torch.float32)
        notes = self._note_vectors(archive, request)
        watch = Stopwatch()
        with watch.stage("query"):
            question = self.encode([self.query_instruction + request.question.prompt])[0]
        scores = (notes @ question).cpu()  # unit vectors: the dot product is the cosine
        selection = _selection(archive, top_r(scores, self.replay_budget), scores)
        selection.stats = {"router_bank_encoding_ms": 1000 * archive.derived["bge_seconds"],
                           "router_query_encoding_ms": 1000 * watch.seconds["query"],
                           "router_bank_notes": len(archive),
                           "router_query_instruction": self.query_instruction}
        return selection

    @torch.no_grad()
    def encode(self, texts: list[str]) -> torch.Tensor:
        """[len(texts), hidden] fp32 unit vectors: the [CLS] output of each text."""
        rows = []
        for i in range(0, len(texts), BATCH):
            batch = self.tokenizer(texts[i : i + BATCH], padding=True, truncation=True, max_length=self.max_tokens,
                                   return_tensors="pt").to(self.device)
            cls = self.model(**batch).last_hidden_state[:, 0].float()
            rows.append(torch.nn.functional.normalize(cls, dim=-1))
        return torch.cat(rows)

    def _note_vectors(self, archive: Archive, request: RouteRequest) -> torch.Tensor:
        """The bank's vectors [N, hidden], encoded once per archive and timed."""
        if "bge" not in archive.derived:
            watch = Stopwatch()
            with watch.stage("bank"):
                archive.derived["bge"] = self.encode(archive.texts(request.tokenizer))
            archive.derived["bge_seconds"] = watch.seconds["bank"]
        return archive.derived["bge"]


def load_encoder(directory: Path):
    """(tokenizer, model) of a BERT-style encoder directory through transformers; any failure is
    one line naming `method.router_model`."""
    from transformers import AutoModel, AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(directory), AutoModel.from_pretrained(directory)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackboneLoadError(f"{ENCODER_FIELD}={str(directory)!r}: not a loadable encoder ({first}); give a "
                                f"local directory holding a BGE (BERT) checkpoint and its tokenizer") from None
