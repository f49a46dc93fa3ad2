"""Fixtures for tests/methods/test_infllm_parity.py, generated once from the official InfLLM code.

    python scripts/check/infllm_parity_fixtures.py /path/to/InfLLM [--out tests/methods/data/infllm_parity]

/path/to/InfLLM is a checkout of thunlp/InfLLM (tested at 12b7079); its code is imported from there,
never copied. Its patch.py reads attributes transformers removed after 4.37 (the attention's
`rotary_emb`, `num_heads`, a decoder layer that returns a tuple), so run this with
transformers 4.37.x (the repository's requirements.txt pins >=4.37.2; 4.37.2 was used), e.g. in a
virtual environment made with --system-site-packages and `pip install transformers==4.37.2`.

What it does: a tiny random Hugging Face Llama (2 layers, 4 query / 2 KV heads of 16, fp32, seed 0)
is patched as the official patch.py patches a model (`patch_hf(model, "inf-llm", ...)`, the torch
attention path) and fed the calls memexp's `method=infllm` makes: the context in prefill chunks of
`chunk_size`, the question but its last token, its last token, then greedily one token per step
(the official GreedySearch order, with the context read on its own first). Written to --out: the
model (config.json, model.safetensors, loadable by memexp as backbone.pretrained), and
expected.json: the settings, the ids fed, the fp32 logits after each call, and, per layer, the
blocks each query chunk retrieved (the official `calc_block_topk`, sorted).

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

    # which ContextManager is which layer: they are made in layer order on the first call
    managers: list = []
    retrieved: dict[int, list[list[int]]] = {}
    original_init, original_topk = context_manager.ContextManager.__init__, context_manager.ContextManager.calc_block_topk

    def init(self, *a, **k):
        original_init(self, *a, **k)
        self._parity_layer = len(managers)
        managers.append(self)

    def calc_block_topk(self, global_h_q):
        picked = original_topk(self, global_h_q)
        retrieved.setdefault(self._parity_layer, []).append(sorted(int(i) for i in picked[0]))
        return picked

    context_manager.ContextManager.__init__ = init
    context_manager.ContextManager.calc_block_topk = calc_block_topk

    kwargs = {k: SETTINGS[k] for k in ("block_size", "n_init", "n_local", "topk", "repr_topk", "max_cached_block",
                                       "exc_block_size")}
    generator = torch.Generator().manual_seed(1)
    context = torch.randint(3, 258, (CONTEXT,), generator=generator).tolist()
    question = torch.randint(3, 258, (QUESTION,), generator=generator).tolist()
    calls, logits = [], []
    with cuda_shims(), torch.no_grad():
        inf_llm.patch_hf(model, "inf-llm", base=SETTINGS["base"], distance_scale=SETTINGS["distance_scale"],
                         fattn=False, **kwargs)
        past = None

        def feed(ids: list[int]) -> torch.Tensor:
            nonlocal past
            out = model(input_ids=torch.tensor([ids]), use_cache=True, return_dict=True, past_key_values=past)
            past = out.past_key_values
            calls.append(ids)
            logits.append(out.logits[0, -1].float().tolist())
            return out.logits[0, -1]

        for st in range(0, CONTEXT, SETTINGS["chunk_size"]):  # memexp's read: the context in prefill chunks
            feed(context[st : st + SETTINGS["chunk_size"]])
        feed(question[:-1])
        last = feed(question[-1:])
        generated = []
        for _ in range(NEW_TOKENS):
            token = int(last.argmax())
            generated.append(token)
            if len(generated) == NEW_TOKENS:
                break
            last = feed([token])

    expected = {"source": "thunlp/InfLLM torch path (inf_llm/utils/patch.py patch_hf, inf-llm), transformers "
                          f"{transformers.__version__}, fp32 on CPU",
                "settings": SETTINGS, "model": MODEL, "context": context, "question": question, "calls": calls,
                "logits": logits, "generated": generated,
                "retrieved": [retrieved.get(layer, []) for layer in range(MODEL["num_hidden_layers"])],
                "blocks": [len(m.global_blocks[0]) for m in managers]}
    (args.out / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {args.out}: {len(calls)} calls, blocks per layer {expected['blocks']}, "
          f"{sum(len(r) for r in expected['retrieved'])} retrievals")


if __name__ == "__main__":
    main()
