"""Fixtures for tests/methods/test_infllm_parity.py, generated once from the official InfLLM code.

    python scripts/check/infllm_parity_fixtures.py /path/to/InfLLM [--out tests/methods/data/infllm_parity]

/path/to/InfLLM is a checkout of thunlp/InfLLM (tested at 12b7079); its code is imported from there,
never copied. Its patch.py reads attributes transformers removed after 4.37 (the attention's
`rotary_emb`, `num_heads`, a decoder layer that returns a tuple), so run this with
transformers 4.37.x (the repository's requirements.txt pins >=4.37.2; 4.37.2 was used), e.g. in a
virtual environment made with --system-site-packages and `pip install transformers==4.37.2`.

What it does: a tiny random Hugging Face Llama (2 layers, 4 query / 2 KV heads of 16, fp32, seed 0)
is patched as the official patch.py patches a model (`patch_hf(model, "inf-llm", ...)`, the torch
attention path) and answers with the official GreedySearch (inf_llm/utils/greedy_search.py, as
benchmark/pred.py runs it: the whole prompt, context + question, but its last token in pieces of
`chunk_size`, the last token alone, then one token per step). Written to --out: the model
(config.json, model.safetensors, loadable by memexp as backbone.pretrained), and expected.json:
- the settings, the context and question, the ids of every model call GreedySearch made, the fp32
  logits after each call, the greedy tokens, and, per layer, the blocks each query chunk retrieved
  (the official `calc_block_topk`, sorted) and the blocks made;
- `answers`: the greedy tokens of more whole-prompt runs (other questions after the same context,
  the question after a context that ends on a query-chunk boundary), for read-once-answer-many;
- `separate_question`: the greedy tokens when the context is fed on its own first (in `chunk_size`
  pieces) and GreedySearch then reads only the question: memexp's order before issue 52, kept to
  show that the fixtures tell the two orders apart.

The official code allocates on "cuda" and uses CUDA streams and events. On a machine without a GPU
(where these fixtures were made) a torch function mode turns every "cuda" placement into the CPU
and `Tensor.is_cuda` reads True, and streams and events become no-ops; the arithmetic is the
official code's own, in fp32 on the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

SETTINGS = {"block_size": 4, "n_init": 3, "n_local": 8, "topk": 2, "repr_topk": 2, "exc_block_size": 4,
            "max_cached_block": 3, "chunk_size": 8, "base": 10000.0, "distance_scale": 1.0}
MODEL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 128, "vocab_size": 258, "rope_theta": 10000.0, "max_position_embeddings": 4096,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
CONTEXT, QUESTION, NEW_TOKENS = 61, 7, 6
# more questions after the CONTEXT-token context: one token (the prompt's last token is the question's
# only one), twelve (the prompt's prefill crosses a chunk_size piece); then the question after a
# context of a multiple of exc_block_size (no context tail)
MORE_QUESTIONS, BOUNDARY_CONTEXT = (1, 12), 60


class CudaOnCpu(TorchFunctionMode):
    """Every tensor the official code places on "cuda" is made on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cuda":
            kwargs["device"] = "cpu"
        if func in (torch.Tensor.cuda,):
            return args[0]
        return func(*args, **kwargs)


class _NoStream:
    def wait_stream(self, other) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _NoEvent:
    def record(self, stream=None) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass


@contextlib.contextmanager
def cuda_shims():
    saved = {name: getattr(torch.cuda, name) for name in ("Stream", "Event", "stream", "current_stream")}
    torch.cuda.Stream = lambda *a, **k: _NoStream()
    torch.cuda.Event = lambda *a, **k: _NoEvent()
    torch.cuda.stream = lambda stream=None: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a, **k: _NoStream()
    torch.Tensor.is_cuda = property(lambda self: True)  # ContextManager.init asserts its inputs are on CUDA
    try:
        with CudaOnCpu():
            yield
    finally:
        del torch.Tensor.is_cuda
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def import_official(root: Path):
    """The checkout's `inf_llm` package, imported from its folder (sys.path untouched)."""
    init = root / "inf_llm" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"{root}: not a thunlp/InfLLM checkout (no inf_llm/__init__.py)")
    spec = importlib.util.spec_from_file_location("inf_llm", init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules["inf_llm"] = module  # the package's own relative imports resolve through it
    spec.loader.exec_module(module)
    return module


class NoTokenizer:
    """What GreedySearch asks of a tokenizer when it is given ids: an eos id (none here, so it runs
    its max_length steps) and decode (the ids themselves)."""

    eos_token_id = -1

    def decode(self, ids: torch.Tensor) -> list[int]:
        return [int(i) for i in ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("official", type=Path, help="a checkout of thunlp/InfLLM")
    parser.add_argument("--out", type=Path, default=Path("tests/methods/data/infllm_parity"))
    args = parser.parse_args()

    import transformers

    if not transformers.__version__.startswith("4.37."):
        raise SystemExit(f"transformers {transformers.__version__}: the official patch.py needs 4.37.x (see --help)")
    from transformers import LlamaConfig, LlamaForCausalLM

    inf_llm = import_official(args.official)
    from inf_llm.attention import context_manager

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**MODEL)).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    (args.out / "generation_config.json").unlink(missing_ok=True)  # memexp reads config.json and the weights

    # which ContextManager is which layer: a run's managers are made in layer order on its first call
    managers: list = []
    retrieved: dict[int, list[list[int]]] = {}
    original_init, original_topk = context_manager.ContextManager.__init__, context_manager.ContextManager.calc_block_topk

    def init(self, *a, **k):
        original_init(self, *a, **k)
        self._parity_layer = len(managers) % MODEL["num_hidden_layers"]
        managers.append(self)

    def calc_block_topk(self, global_h_q):
        picked = original_topk(self, global_h_q)
        retrieved.setdefault(self._parity_layer, []).append(sorted(int(i) for i in picked[0]))
        return picked

    context_manager.ContextManager.__init__ = init
    context_manager.ContextManager.calc_block_topk = calc_block_topk

    calls, logits = [], []

    def record_call(module, call_args, call_kwargs, out) -> None:
        calls.append(call_kwargs["input_ids"][0].tolist())
        logits.append(out.logits[0, -1].float().tolist())

    def greedy(prompt: list[int], past=None) -> list[int]:
        """The official GreedySearch on `prompt` (after `past`, the official cache, if given)."""
        searcher = inf_llm.GreedySearch(model, NoTokenizer())
        searcher.past_kv = past
        return searcher.generate(input_ids=torch.tensor([prompt]), max_length=NEW_TOKENS,
                                 chunk_size=SETTINGS["chunk_size"])[0]

    def context_alone(context: list[int]):
        """The official cache after the context is fed on its own, in chunk_size pieces."""
        past = None
        for st in range(0, len(context), SETTINGS["chunk_size"]):
            past = model(input_ids=torch.tensor([context[st : st + SETTINGS["chunk_size"]]]), use_cache=True,
                         return_dict=True, past_key_values=past).past_key_values
        return past

    kwargs = {k: SETTINGS[k] for k in ("block_size", "n_init", "n_local", "topk", "repr_topk", "max_cached_block",
                                       "exc_block_size")}
    generator = torch.Generator().manual_seed(1)
    context = torch.randint(3, 258, (CONTEXT,), generator=generator).tolist()
    question = torch.randint(3, 258, (QUESTION,), generator=generator).tolist()
    more = [torch.randint(3, 258, (n,), generator=generator).tolist() for n in MORE_QUESTIONS]
    with cuda_shims(), torch.no_grad():
        inf_llm.patch_hf(model, "inf-llm", base=SETTINGS["base"], distance_scale=SETTINGS["distance_scale"],
                         fattn=False, **kwargs)
        hook = model.register_forward_hook(record_call, with_kwargs=True)
        generated = greedy(context + question)  # the run every call, logit and retrieval is recorded of
        blocks = [len(m.global_blocks[0]) for m in managers]
        prompt_retrieved = [retrieved.get(layer, []) for layer in range(MODEL["num_hidden_layers"])]
        hook.remove()
        retrieved = {}  # the other runs' retrievals are not kept
        answers = [{"context": len(context), "question": q, "generated": greedy(context + q)} for q in more]
        answers.append({"context": BOUNDARY_CONTEXT, "question": question,
                        "generated": greedy(context[:BOUNDARY_CONTEXT] + question)})
        separate = greedy(question, past=context_alone(context))

    expected = {"source": "thunlp/InfLLM torch path (inf_llm/utils/patch.py patch_hf, inf-llm; "
                          f"inf_llm/utils/greedy_search.py GreedySearch), transformers {transformers.__version__}, "
                          "fp32 on CPU",
                "settings": SETTINGS, "model": MODEL, "context": context, "question": question, "calls": calls,
                "logits": logits, "generated": generated,
                "retrieved": prompt_retrieved,
                "blocks": blocks, "answers": answers, "separate_question": {"generated": separate}}
    (args.out / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {args.out}: {len(calls)} calls, blocks per layer {blocks}, "
          f"{sum(len(r) for r in expected['retrieved'])} retrievals; greedy {generated}, "
          f"context read on its own {separate}")


if __name__ == "__main__":
    main()
