"""Plain: read the context, then the question, then generate greedily.

With `rescale` (lambda), the recurrent state is scaled right after the context, before the
question (memexp.methods.rescale); `method=clean_start` is Plain with lambda = 0 (App. C.3).
"""

from __future__ import annotations

from memexp.backbones.base import Backbone, State, Stopwatch
from memexp.core.types import Question
from memexp.methods.base import Answer, Memory, Method
from memexp.methods.plain.config import PlainConfig
from memexp.methods.read_adapter import AdapterSlot
from memexp.methods.rescale import apply_rescale


def prefill(backbone: Backbone, context_ids: list[int]) -> tuple[State, dict[str, float]]:
    """The state after reading `context_ids` from a fresh one, and the seconds of stage "prefill"."""
    watch = Stopwatch()
    state = backbone.init_state()
    with watch.stage("prefill"):
        if context_ids:
            backbone.forward(state, context_ids)
    return state, watch.seconds


class Plain(Method[None]):
    name = "plain"

    def __init__(self, cfg: PlainConfig | None = None) -> None:
        self.cfg = cfg or PlainConfig()
        self.adapter = AdapterSlot(self.cfg.adapter)

    def prepare(self, backbone: Backbone) -> None:
        self.adapter.prepare(backbone)

    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[None]:
        state, seconds = prefill(backbone, context_ids)
        return Memory(state=state, context_len=len(context_ids), seconds=seconds, extra=None)

    def answer(self, backbone: Backbone, memory: Memory[None], question_ids: list[int], question: Question,
               stop: list[int] | None = None) -> Answer:
        watch = Stopwatch()
        state = memory.state.clone()
        apply_rescale(state, self.cfg.rescale)
        with watch.stage("generate"), self.adapter.on(backbone):  # Plain + LoRA: on for question and answer
            ids = backbone.generate(state, question_ids, question.max_new_tokens, stop, question.min_new_tokens)
        return Answer(ids=ids, seconds=watch.seconds, stats=self.adapter.record(),
                      tokens={"question": len(question_ids), "generated": len(ids)})
