"""`method=titan`: Titan-Llama on a Llama-style backbone, on any benchmark.

`prepare` retrofits the backbone once (memexp.methods.titan.retrofit) and loads the trained
modules from `method.memory_path` when given; afterwards the method reads like Plain: the context
once (the Titan layers write their memories while reading it), then each question from a copy of
that state, generating greedily.
"""

from __future__ import annotations

from memexp.backbones.base import Backbone
from memexp.core.types import Question
from memexp.methods.base import Answer, Memory, Method
from memexp.methods.plain.method import Plain
from memexp.methods.titan.config import TitanConfig
from memexp.methods.titan.retrofit import TitanModules, retrofit


class Titan(Method[None]):
    name = "titan"

    def __init__(self, cfg: TitanConfig | None = None) -> None:
        self.cfg = cfg or TitanConfig()
        self.modules: TitanModules | None = None
        self._plain = Plain()

    def prepare(self, backbone: Backbone) -> None:
        if self.modules is not None:
            raise RuntimeError("Titan.prepare: this method already retrofitted a backbone")
        self.modules = retrofit(backbone, self.cfg)
        if self.cfg.memory_path is not None:
            self.modules.load(self.cfg.memory_path)

    def read(self, backbone: Backbone, context_ids: list[int]) -> Memory[None]:
        self._require_prepared()
        return self._plain.read(backbone, context_ids)

    def answer(self, backbone: Backbone, memory: Memory[None], question_ids: list[int], question: Question,
               stop: list[int] | None = None) -> Answer:
        self._require_prepared()
        return self._plain.answer(backbone, memory, question_ids, question, stop)

    def _require_prepared(self) -> None:
        if self.modules is None:
            raise RuntimeError("Titan: call prepare(backbone) first (the runner does)")
