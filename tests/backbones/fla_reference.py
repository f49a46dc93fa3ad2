"""Runs FLA's own GatedDeltaNetForCausalLM on CPU and writes its logits (a subprocess of
test_gdn_fla_parity.py: FLA's Triton kernels need TRITON_INTERPRET=1 set before import).

    python fla_reference.py OUT_DIR '{"hidden_size": 64, ...}' SEED LENGTH SPLIT [OUT_DIR CONFIG SEED LENGTH SPLIT ...]

For each group of five arguments, saves the FLA checkpoint to OUT_DIR/ckpt (save_pretrained) and
OUT_DIR/logits.pt holding the ids, FLA's logits over the whole sequence in one call, and the last
logits after feeding ids[:SPLIT] then ids[SPLIT:] through FLA's cache. Several models in one
process import FLA once (about 8 s).
"""

import json
import os
import sys
import warnings

os.environ["TRITON_INTERPRET"] = "1"
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from triton.runtime import autotuner  # noqa: E402

# The interpreter has no benchmarker: keep the first candidate config of every autotuned kernel.
_prune = autotuner.Autotuner.prune_configs
autotuner.Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM  # noqa: E402


def main(out: str, config: str, seed: str, length: str, split: str) -> None:
    torch.manual_seed(int(seed))
    model = GatedDeltaNetForCausalLM(GatedDeltaNetConfig(**json.loads(config))).eval()
    model.save_pretrained(os.path.join(out, "ckpt"))
    ids = torch.randint(0, model.config.vocab_size, (1, int(length)))
    s = int(split)
    with torch.no_grad():
        full = model(input_ids=ids, use_cache=True).logits[0]
        first = model(input_ids=ids[:, :s], use_cache=True)
        cont = model(input_ids=ids[:, s:], past_key_values=first.past_key_values, use_cache=True).logits[0, -1]
    torch.save({"ids": ids[0], "full": full, "continued": cont}, os.path.join(out, "logits.pt"))


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or len(args) % 5:
        sys.exit("usage: fla_reference.py OUT_DIR CONFIG_JSON SEED LENGTH SPLIT [...]")
    for i in range(0, len(args), 5):
        main(*args[i:i + 5])
