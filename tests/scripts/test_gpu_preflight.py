"""scripts/check/gpu_preflight.py compiles memexp's dispatched Triton kernels for real CUDA targets
here, without a GPU (issue 51), and fails on what the real compiler or the target refuses, which the
interpreter the kernel tests run under (TRITON_INTERPRET=1) lets through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.memexp_process import ROOT, python

SCRIPT = ROOT / "scripts" / "check" / "gpu_preflight.py"
ROUTING = ROOT / "kernels" / "routing" / "triton.py"
# the 1.3B GDN's routing, distinctiveness and FLA decode kernels for sm_90: a few compiles
QUICK = ["--targets", "90", "--backbones", "gdn", "--dtypes", "bf16", "--no-backward",
         "--ops", "routing,distinctiveness,fused_recurrent"]


def preflight(tmp_path: Path, *args: str, timeout: int = 300) -> tuple[int, str]:
    """(exit code, table) of a run with its own triton cache, so every kernel is really compiled."""
    out = tmp_path / "table.md"
    result = python(SCRIPT, *args, "--out", out, timeout=timeout,
                    env={"TRITON_CACHE_DIR": str(tmp_path / "triton-cache"), "TRITON_INTERPRET": "0"})
    assert out.is_file(), result.stdout + result.stderr
    return result.returncode, out.read_text()


def rows(table: str, kernel: str) -> list[str]:
    return [ln for ln in table.splitlines() if f"| {kernel} |" in ln]


def test_gdn_kernels_compile_for_sm90(tmp_path):
    rc, table = preflight(tmp_path, *QUICK)
    assert rc == 0, table
    for kernel in ("_note_scores_kernel", "_channel_vote_kernel", "_unit_key_sums_kernel", "_distinctiveness_kernel",
                   "fused_recurrent_gated_delta_rule_fwd_kernel"):
        (found, *rest) = rows(table, kernel)
        assert "| sm_90 |" in found and "| ok |" in found, found
    # d_rho = 16 (NoteBank's default addresses) and identity addresses at the 1.3B GDN's d_k = 256
    assert {m for m in re.findall(r"\| routing d=(\d+) \|", table)} == {"16", "256"}
    # the resources come from the cubin: registers per thread are counted, shared memory is under the limit
    regs = [int(ln.split("|")[-3]) for ln in rows(table, "_note_scores_kernel")]
    assert all(0 < r <= 255 for r in regs), regs
    assert "sm_90: 7 of 7 rows compiled, 0 failed" in table, table


PLANTS = {
    # 256 question rows of 256 fp32 channels: a 256 KiB operand tile, over sm_90's 227 KiB per block;
    # triton compiles it and only the launch on the GPU refuses it (the preflight's own check)
    "shared memory": ("    block_t = 16", "    block_t = 256"),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_planted_error_fails_the_preflight(tmp_path, plant):
    old, new = PLANTS[plant]
    source = ROUTING.read_text()
    assert source.count(old) == 1
    copy = tmp_path / "routing_triton.py"
    copy.write_text(source.replace(old, new))
    # the interpreter accepts the planted kernel and matches the reference: only compiling catches it
    interpreted = python("-c", INTERPRET.format(path=str(copy)), env={"TRITON_INTERPRET": "1"}, timeout=300)
    assert interpreted.returncode == 0 and "interpreter ok" in interpreted.stdout, interpreted.stderr
    rc, table = preflight(tmp_path, "--targets", "90", "--backbones", "gdn", "--dtypes", "bf16", "--ops", "routing",
                          f"--replace=memexp.kernels.routing.triton={copy}")
    assert rc == 1, table
    failed = [ln for ln in rows(table, "_note_scores_kernel") if "FAIL" in ln]
    assert failed, table
    assert all("FAIL: shared memory" in ln and "232448 B" in ln for ln in failed), failed
    assert rows(table, "_channel_vote_kernel") and all("| ok |" in ln for ln in rows(table, "_channel_vote_kernel"))


INTERPRET = """
import importlib.util, torch
from memexp.kernels.routing.reference import route_votes_reference
spec = importlib.util.spec_from_file_location("planted", {path!r})
planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(planted)
torch.manual_seed(0)
a, q = torch.randn(40, 3, 256), torch.randn(5, 3, 256)
votes, best, scores = planted.route_votes_triton(a, q)
ref_votes, ref_best, ref_scores = route_votes_reference(a, q)
assert torch.allclose(scores, ref_scores, atol=1e-5) and torch.equal(best, ref_best)
print("interpreter ok")
"""
