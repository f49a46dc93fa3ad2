"""memexp's GDN reproduces FLA's GatedDeltaNetForCausalLM on FLA's own checkpoints.

FLA runs in a subprocess (fla_reference.py) under TRITON_INTERPRET=1 with autotuning cut
to one config; the interpreter only runs FLA's fused_recurrent path, so sequences stay at
<= 64 tokens (longer inputs are pinned at op level against FLA's naive references).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.memexp_process import selected

from memexp.backbones import load_backbone

# found, not imported: FLA runs in the subprocess only, and importing it here would cost every
# pytest-xdist worker's collection about 8 s
pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("fla", "triton")),
                                reason="FLA and Triton are the reference here (pip install -e '.[dev]')")

CONFIGS = {
    "grouped_values": {"hidden_size": 64, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 32, "expand_v": 1.0,
                       "num_v_heads": 4, "vocab_size": 258, "initializer_range": 0.1},
    "expand_v2_tied": {"hidden_size": 48, "num_hidden_layers": 2, "num_heads": 3, "head_dim": 16, "expand_v": 2.0,
                       "vocab_size": 300, "tie_word_embeddings": True, "initializer_range": 0.1, "norm_eps": 1e-5},
}


LENGTH, SPLIT = 48, 19
SLOW = {"expand_v2_tied"}


@pytest.fixture(scope="module")
def references(request, tmp_path_factory) -> dict:
    """{config name: folder with FLA's checkpoint and logits}, for the configs this session tests,
    written by one FLA process."""
    wanted = [name for name in CONFIGS if selected(request, "test_logits_match_fla", f"[{name}]")]
    out = tmp_path_factory.mktemp("fla")
    args = [a for name in wanted for a in (str(out / name), json.dumps(CONFIGS[name]), "0", str(LENGTH), str(SPLIT))]
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("fla_reference.py")), *args],
                         env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return {name: out / name for name in wanted}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in CONFIGS])
def test_logits_match_fla(name, references):
    ref = torch.load(references[name] / "logits.pt")
    bb = load_backbone({"name": name, "arch": "gdn", "pretrained": str(references[name] / "ckpt"), "tokenizer": "byte",
                        "prefill_chunk": 16})
    ids = ref["ids"]
    for end in (1, 2, 5, 30, LENGTH):
        logits = bb.forward(bb.init_state(), ids[:end])
        torch.testing.assert_close(logits, ref["full"][end - 1], atol=2e-5, rtol=1e-4)
    state = bb.init_state()
    bb.forward(state, ids[:SPLIT])
    torch.testing.assert_close(bb.forward(state, ids[SPLIT:]), ref["continued"], atol=2e-5, rtol=1e-4)
