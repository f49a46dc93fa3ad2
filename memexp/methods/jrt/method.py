"""JRT-Prompt (Arora et al., 2024), the NoteBank paper's read-twice baseline: the prompt,
context and question, is read twice before generation.

One prompt transform for every benchmark: context, question, separator, context again,
question again, then greedy generation. The context's first reading is the retained memory,
so a context with many questions is read once plus once per question. A leading BOS is not
repeated in the second reading. With `rescale` (lambda), the recurrent state is scaled after the
context's first reading, before everything after it (memexp.methods.rescale).
"""

from __future__ import annotations

from memexp.backbones.base import Backbone, Stopwatch
from memexp.core.types import Question
from memexp.methods.base import Answer, Memory, Method
from memexp.methods.jrt.config import JRTConfig
from memexp.methods.plain.method import prefill
from memexp.methods.rescale import apply_rescale


class JRT(Method[list[int]]):
    """Reads the context like Plain and keeps its ids for the second reading."""

    name = "jrt"

    def __init__(self, cfg: JRTConfig | None = None) -> None:
        self.cfg = cfg or JRTConfig()

    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[list[int]]:
        state, seconds = prefill(backbone, context_ids)
        return Memory(state=state, context_len=len(context_ids), seconds=seconds, extra=list(context_ids))

    def answer(self, backbone: Backbone, memory: Memory[list[int]], question_ids: list[int], question: Question,
               stop: list[int] | None = None) -> Answer:
        watch = Stopwatch()
        question_ids = list(question_ids)
        context = memory.extra
        bos = backbone.tokenizer.bos_id
        if context and bos is not None and context[0] == bos:
            context = context[1:]
        separator = backbone.tokenizer.encode(self.cfg.separator) if self.cfg.separator else []
        first_pass = question_ids + separator + context
        state = memory.state.clone()
        apply_rescale(state, self.cfg.rescale)
        with watch.stage("reread"):
            if first_pass:
                backbone.forward(state, first_pass)
        with watch.stage("generate"):
            ids = backbone.generate(state, question_ids, question.max_new_tokens, stop, question.min_new_tokens)
        tokens = {"question": 2 * len(question_ids), "reread": len(separator) + len(context), "generated": len(ids)}
        return Answer(ids=ids, seconds=watch.seconds, tokens=tokens)
