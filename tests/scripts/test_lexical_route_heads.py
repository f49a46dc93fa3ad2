"""scripts/probe/lexical_route_heads.py: its token counts, and the checkpoint it writes."""

import json

import torch
from safetensors.torch import load_file
from script_module import load_script


def test_token_counts_count_every_token_of_the_examples():
    """The counts add up to the examples' lengths, drawn from the recipe generator's training stream."""
    from memexp.backbones.loading import load_tokenizer
    from memexp.core.schema import ASSETS_DIR
    from memexp.embedded import niah_words
    from memexp.embedded.lexical_heads import TEXT_STREAM

    probe = load_script("lexical_route_heads")
    shipped = ASSETS_DIR / "tiny_gdn_words"
    tokenizer = load_tokenizer(str(shipped), shipped)
    counts = probe.token_counts(tokenizer, tokenizer.vocab_size, examples=2)
    lengths = sum(len(niah_words.example(tokenizer, niah_words.SIX_TASKS[i], 1024,
                                         niah_words.stream(TEXT_STREAM, i)).ids) for i in range(2))
    assert counts.sum().item() == lengths
    assert counts[tokenizer.bos_id].item() == 2


def test_the_written_checkpoint_changes_only_the_listed_heads_q_and_k(tmp_path, monkeypatch):
    """--heads 1 3 on the shipped model: layer 0's heads 1 and 3 get bag taps and q_proj = k_proj
    (different for the two heads); every other tensor is the shipped one (convs widened with zeros)."""
    import sys

    from memexp.core.schema import ASSETS_DIR

    probe = load_script("lexical_route_heads")
    shipped = ASSETS_DIR / "tiny_gdn_words"
    monkeypatch.setattr(sys, "argv", ["x", "--out", str(tmp_path), "--heads", "1", "3", "--examples", "2"])
    probe.main()
    new, old = load_file(str(tmp_path / "model.safetensors")), load_file(str(shipped / "model.safetensors"))
    assert json.loads((tmp_path / "config.json").read_text())["conv_size"] == 10
    p = "model.layers.0.attn."
    heads = torch.zeros(128, dtype=torch.bool)
    heads[32:64] = heads[96:128] = True
    for name, tensor in new.items():
        if name.endswith(("q_proj.weight", "k_proj.weight")) and name.startswith(p):
            assert torch.equal(tensor[~heads], old[name][~heads]), name
            assert not torch.equal(tensor[heads], old[name][heads]), name
        elif name.startswith(p) and name.endswith(("q_conv1d.weight", "k_conv1d.weight")):
            taps = old[name].shape[-1]  # widened to 10 with zeros on the older taps (none if it had 10)
            assert torch.equal(tensor[~heads, :, 10 - taps:], old[name][~heads])
            assert (tensor[~heads, :, :10 - taps] == 0).all()
            assert torch.allclose(tensor[heads].sum(-1), torch.ones(64))
        elif "conv1d" in name:
            taps = old[name].shape[-1]
            assert torch.equal(tensor[..., 10 - taps:], old[name]) and (tensor[..., :10 - taps] == 0).all(), name
        else:
            assert torch.equal(tensor, old[name]), name
    assert torch.equal(new[p + "q_proj.weight"][heads], new[p + "k_proj.weight"][heads])
    assert not torch.equal(new[p + "k_proj.weight"][32:64], new[p + "k_proj.weight"][96:128])


def test_a_huge_whitening_floor_is_no_whitening(tmp_path, monkeypatch):
    """--whiten-eps reaches the whitening: with a floor of 1e9 x the mean eigenvalue the text's
    second moment is a multiple of the identity, so the whitened heads equal the unwhitened ones
    (the projection is rescaled to the same std); at the recipe's 1e-3 they differ."""
    import sys

    probe = load_script("lexical_route_heads")

    def heads(*flags: str) -> torch.Tensor:
        out = tmp_path / "_".join(flags or ("plain",))
        monkeypatch.setattr(sys, "argv", ["x", "--out", str(out), "--heads", "1", "--examples", "2", *flags])
        probe.main()
        return load_file(str(out / "model.safetensors"))["model.layers.0.attn.q_proj.weight"][32:64]

    plain = heads()
    assert torch.allclose(heads("--whiten", "--whiten-eps", "1e9"), plain, atol=1e-5 * plain.abs().max())
    assert not torch.allclose(heads("--whiten"), plain, atol=0.1 * plain.abs().max())


def test_common_key_row_by_hand():
    """Rows (1, 0) and (0, 1) counted 3 and 1 times: the unit mean is (3, 1) / sqrt(10), the rows
    read 3 / sqrt(10) and 1 / sqrt(10) along it, their count-weighted average (9 + 1) / (4 sqrt(10))
    = sqrt(10) / 4; a level of 2 needs the mean direction times 8 / sqrt(10), i.e. (2.4, 0.8)."""
    probe = load_script("lexical_route_heads")
    x, counts = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([3.0, 1.0])
    row = probe.common_key_row(x, counts, torch.tensor([3.0, 1.0]) / 10 ** 0.5, level=2.0)
    assert torch.allclose(row, torch.tensor([2.4, 0.8]))


def test_common_key_takes_each_heads_first_coordinate(tmp_path, monkeypatch):
    """--common-key 1 on head 1: its query's first row is 0, its key's first row reads 1 on the
    text's count-weighted average input (layer 0's normalised embeddings, the counts of the same 2
    examples); the other 31 rows are the run without the option."""
    import sys

    from memexp.backbones.loading import load_tokenizer
    from memexp.backbones.norms import rms_norm
    from memexp.core.schema import ASSETS_DIR

    probe = load_script("lexical_route_heads")

    def rows(*flags: str) -> dict:
        out = tmp_path / "_".join(flags or ("plain",))
        monkeypatch.setattr(sys, "argv", ["x", "--out", str(out), "--heads", "1", "--examples", "2", *flags])
        probe.main()
        w = load_file(str(out / "model.safetensors"))
        return {n: w[f"model.layers.0.attn.{n}_proj.weight"][32:64] for n in ("q", "k")}

    plain, common = rows(), rows("--common-key", "1")
    assert torch.equal(common["q"][0], torch.zeros(128)) and not torch.equal(plain["q"][0], torch.zeros(128))
    shipped = ASSETS_DIR / "tiny_gdn_words"
    w = load_file(str(shipped / "model.safetensors"))
    eps = json.loads((shipped / "config.json").read_text())["norm_eps"]
    x = rms_norm(w["model.embeddings.weight"], w["model.layers.0.attn_norm.weight"], eps)
    counts = probe.token_counts(load_tokenizer(str(shipped), shipped), x.shape[0], examples=2)
    assert abs((counts @ (x @ common["k"][0])).item() / counts.sum().item() - 1.0) < 1e-4
    for n in ("q", "k"):
        assert torch.equal(common[n][1:], plain[n][1:])


def test_key_taps_keep_only_the_last_k_tokens_before_t(tmp_path, monkeypatch):
    """--key-taps 3 on head 1: its key taps are 1/3 on t-3 .. t-1 and 0 on t and on the six older
    taps (10 in all, oldest first); its query taps stay the 10-token bag."""
    import sys

    probe = load_script("lexical_route_heads")
    monkeypatch.setattr(sys, "argv", ["x", "--out", str(tmp_path), "--heads", "1", "--examples", "2", "--key-taps", "3"])
    probe.main()
    w = load_file(str(tmp_path / "model.safetensors"))
    k, q = w["model.layers.0.attn.k_conv1d.weight"][32:64, 0], w["model.layers.0.attn.q_conv1d.weight"][32:64, 0]
    assert torch.equal(k, torch.tensor([[0.0] * 6 + [1 / 3] * 3 + [0.0]] * 32))
    assert torch.equal(q, torch.full((32, 10), 0.1))


def test_document_frequency_counts_each_example_once():
    """With documents=True a token counts 1 per example it occurs in: the counts add up to the
    examples' distinct tokens, and the BOS every example starts with counts once per example."""
    from memexp.backbones.loading import load_tokenizer
    from memexp.core.schema import ASSETS_DIR
    from memexp.embedded import niah_words
    from memexp.embedded.lexical_heads import TEXT_STREAM

    probe = load_script("lexical_route_heads")
    shipped = ASSETS_DIR / "tiny_gdn_words"
    tokenizer = load_tokenizer(str(shipped), shipped)
    counts = probe.token_counts(tokenizer, tokenizer.vocab_size, examples=3, documents=True)
    distinct = sum(len(set(niah_words.example(tokenizer, niah_words.SIX_TASKS[i], 1024,
                                              niah_words.stream(TEXT_STREAM, i)).ids)) for i in range(3))
    assert counts.sum().item() == distinct
    assert counts.max().item() == 3 and counts[tokenizer.bos_id].item() == 3
