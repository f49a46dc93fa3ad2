"""`python -m memexp train recipe=tiny_gdn_words` end to end in a few tiny steps, and its config errors."""

import json

import pytest
import torch

from memexp.backbones import load_backbone
from memexp.cli.train import load_recipe, main
from memexp.core.schema import ConfigError


def test_a_few_tiny_steps_write_a_checkpoint_with_its_word_tokenizer(tmp_path):
    out = tmp_path / "ckpt"
    steps = ("[{name: c, steps: 2, batch_size: 2, lr: 1.0e-3, min_tokens: 64, max_tokens: 96, form: copy},"
             " {name: s, steps: 3, batch_size: 2, lr: 1.0e-3, min_tokens: 128, max_tokens: 256}]")
    rc = main(["recipe=tiny_gdn_words", f"output={out}", f"stages={steps}", "eval_samples=0", "threads=1",
               "tokenizer_examples=20", "model.hidden_size=32", "model.head_dim=8", "model.num_hidden_layers=2"])
    assert rc == 0
    record = json.loads((out / "recipe.json").read_text())
    assert record["train_length"] == 1024 and record["steps"] == 5
    assert record["tokens"] == sum(s["tokens"] for s in record["stages"]) > 0 and record["train_seconds"] >= 0
    assert record["recipe"]["seed"] == 0 and "replay" in record["data"]["form"]
    bb = load_backbone({"name": "tiny_gdn_words", "arch": "gdn", "pretrained": str(out)})
    assert bb.config.hidden_size == 32 and len(bb.channels) == 2 * 4
    assert bb.tokenizer.vocab_size == record["tokenizer"]["vocab_size"] == bb.config.vocab_size
    ids = bb.tokenizer.encode("One of the special magic numbers for quiet-river is: 12.")
    assert len(ids) == 15  # One ▁of ▁the ▁special ▁magic ▁numbers ▁for ▁quiet - river ▁is : ▁ 12 .
    assert bb.model.lm_head.weight is bb.model.model.embeddings.weight  # tied, as the recipe sets
    assert torch.isfinite(bb.forward(bb.init_state(), ids)).all()


def test_the_same_seed_draws_the_same_batches():
    from memexp.embedded.niah_words import tokenizer_corpus
    from memexp.embedded.tiny_gdn_words import step_examples
    from memexp.embedded.words_tokenizer import train_tokenizer

    recipe, _ = load_recipe(["recipe=tiny_gdn_words"])
    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    first = [e.ids for e in step_examples(recipe, recipe.stages[1], 5, tok)]
    again = [e.ids for e in step_examples(recipe, recipe.stages[1], 5, tok)]
    other = [e.ids for e in step_examples(recipe, recipe.stages[1], 6, tok)]
    assert first == again and first != other
    assert max(len(ids) for ids in first) <= recipe.train_length


def test_induction_init_makes_a_tokens_query_match_the_key_written_after_it():
    """After induction_init, layer 0's key at t (before the feature map) is its query at t - 1:
    position t writes (previous token -> this token), and a later query for that token reads it."""
    from types import SimpleNamespace

    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import induction_init
    from memexp.kernels.short_conv import short_conv

    conf = {"hidden_size": 32, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 8, "vocab_size": 50}
    model = build_model(SimpleNamespace(model=conf, seed=0, init="torch", decay_min=1e-4, decay_max=1e-3,
                                        conv_init=0.5))
    induction_init(model, 1)
    x = torch.randn(1, 7, 32)
    for layer, induced in zip(model.model.layers, (True, False)):
        attn = layer.attn
        q, _ = short_conv(attn.q_proj(x), attn.q_conv1d.weight, activation=None)
        k, _ = short_conv(attn.k_proj(x), attn.k_conv1d.weight, activation=None)
        assert torch.allclose(k[:, 1:], q[:, :-1]) == induced


def test_induction_context_keys_each_head_on_its_number_of_preceding_tokens():
    """With induction_context [1, 2, 3], head h's query at t equals its key at i (before the feature
    map) exactly when the n_h tokens ending at t are the n_h tokens before i: here t = 7, i = 4, and
    the sequence repeats 1, 2 or 3 of the tokens 1-3 at 5-7."""
    from types import SimpleNamespace

    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import induction_init
    from memexp.kernels.short_conv import short_conv

    conf = {"hidden_size": 32, "num_hidden_layers": 1, "num_heads": 3, "head_dim": 6, "vocab_size": 50}
    model = build_model(SimpleNamespace(model=conf, seed=0, init="torch", decay_min=1e-4, decay_max=1e-3,
                                        conv_init=0.5))
    induction_init(model, 1, [1, 2, 3])
    attn = model.model.layers[0].attn
    for repeated in (1, 2, 3):
        x = torch.randn(1, 9, 32, generator=torch.Generator().manual_seed(repeated))
        x[0, 8 - repeated : 8] = x[0, 4 - repeated : 4]  # x7 = x3, then x6 = x2, then x5 = x1
        q, _ = short_conv(attn.q_proj(x), attn.q_conv1d.weight, activation=None)
        k, _ = short_conv(attn.k_proj(x), attn.k_conv1d.weight, activation=None)
        q7, k4 = q[0, 7].view(3, 6), k[0, 4].view(3, 6)
        assert [torch.allclose(q7[h], k4[h]) for h in range(3)] == [n <= repeated for n in (1, 2, 3)]
    v, _ = short_conv(attn.v_proj(x), attn.v_conv1d.weight, activation=None)
    assert torch.allclose(v, attn.v_proj(x))  # the value is the current token in every head


def test_carrier_heads_meet_their_own_key_and_carry_the_three_tokens_before():
    """With carrier_heads = 1 of 2, the last head's query at every t equals its key at t (before the
    feature map), and its value at t is v_proj of tokens t-1, t-2, t-3 summed (zero padding before
    the start); the first head stays a copy head (key at t = query at t - 1)."""
    from types import SimpleNamespace

    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import induction_init
    from memexp.kernels.short_conv import short_conv

    conf = {"hidden_size": 32, "num_hidden_layers": 1, "num_heads": 2, "head_dim": 8, "vocab_size": 50}
    model = build_model(SimpleNamespace(model=conf, seed=0, init="torch", decay_min=1e-4, decay_max=1e-3,
                                        conv_init=0.5))
    induction_init(model, 1, None, 1)
    attn = model.model.layers[0].attn
    x = torch.randn(1, 7, 32, generator=torch.Generator().manual_seed(0))
    q, _ = short_conv(attn.q_proj(x), attn.q_conv1d.weight, activation=None)
    k, _ = short_conv(attn.k_proj(x), attn.k_conv1d.weight, activation=None)
    v, _ = short_conv(attn.v_proj(x), attn.v_conv1d.weight, activation=None)
    assert torch.allclose(q[..., 8:], k[..., 8:]) and not torch.allclose(q[..., :8], k[..., :8])
    assert torch.allclose(k[:, 1:, :8], q[:, :-1, :8])
    dv = attn.c.head_v_dim
    projected = attn.v_proj(x)[0, :, dv:]
    for t in range(7):
        expected = sum(projected[s] for s in range(max(0, t - 3), t)) if t else torch.zeros(dv)
        assert torch.allclose(v[0, t, dv:], expected, atol=1e-6), t
    assert torch.allclose(v[0, :, :dv], attn.v_proj(x)[0, :, :dv])


def test_question_mask_marks_the_question_tokens_and_its_weight_adds_their_mean_lm_loss():
    """`batch`'s question mask selects the positions predicting RULER's prompt tokens (re-encoded
    here from the sample), and question_weight w adds w x their mean NLL, computed here from the
    full-vocabulary logits of train_forward."""
    from memexp.backbones.gdn.model import GDNBackbone
    from memexp.embedded.niah_words import copy_example, copy_vocabulary, example, stream, tokenizer_corpus
    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import _with_vocab, batch, step_loss
    from memexp.embedded.words_tokenizer import train_tokenizer

    recipe, _ = load_recipe(["recipe=tiny_gdn_words", "model.hidden_size=32", "model.head_dim=8",
                             "model.num_hidden_layers=2"])
    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    texts = [example(tok, "niah_single_2", 300, stream(0, "q", 1)), example(tok, "niah_multikey_1", 300, stream(0, "q", 2)),
             copy_example(copy_vocabulary(tok), 96, stream(0, "q", 3), tok.bos_id, tok.eos_id)]
    inputs, targets, answer, other, question = batch(texts, tok.eos_id, 8, torch.Generator().manual_seed(0))
    for row, text in enumerate(texts[:2]):
        assert targets[row][question[row]].tolist() == tok.encode(text.sample.prompt)
    assert not question[2].any()  # a copy passage has no question
    model = build_model(_with_vocab(recipe, tok.vocab_size))
    backbone = GDNBackbone(model, tok, "tiny_gdn_words", prefill_chunk=2048)
    torch.manual_seed(0)
    base, _, _ = step_loss(backbone, recipe, inputs, targets, answer, other, question, 0.0)
    weighted, _, _ = step_loss(backbone, recipe, inputs, targets, answer, other, question, 2.5)
    nll = -torch.log_softmax(backbone.train_forward(inputs).float(), -1).gather(-1, targets[..., None])[..., 0]
    assert torch.allclose(weighted - base, 2.5 * nll[question].mean(), rtol=1e-4, atol=1e-5)


def test_the_lens_loss_adds_one_layers_read_through_the_lm_head_on_the_answer_tokens():
    """lens = (layer, w) adds w x the answer tokens' mean NLL of that layer's attention output through
    the final norm and the LM head; the output is computed here by running the layers by hand (embed,
    then each layer's norm and attention on the whole sequence), not by the loss's hook."""
    from memexp.backbones.gdn.model import GDNBackbone
    from memexp.embedded.niah_words import example, stream, tokenizer_corpus
    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import _with_vocab, batch, step_loss
    from memexp.embedded.words_tokenizer import train_tokenizer

    recipe, _ = load_recipe(["recipe=tiny_gdn_words", "model.hidden_size=32", "model.head_dim=8",
                             "model.num_hidden_layers=2"])
    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    texts = [example(tok, "niah_single_1", 200, stream(0, "l", 1)), example(tok, "niah_multikey_1", 200, stream(0, "l", 2))]
    inputs, targets, answer, other, question = batch(texts, tok.eos_id, 8, torch.Generator().manual_seed(0))
    backbone = GDNBackbone(build_model(_with_vocab(recipe, tok.vocab_size)), tok, "tiny_gdn_words", prefill_chunk=2048)
    base, _, _ = step_loss(backbone, recipe, inputs, targets, answer, other)
    assert torch.equal(step_loss(backbone, recipe, inputs, targets, answer, other, lens=(1, 0.0))[0], base)
    layers = backbone.model.model.layers
    with torch.no_grad():
        x = backbone.model.model.embeddings(inputs)
        out = layers[0].attn(layers[0].attn_norm(x), None, None)[0]
        x = layers[0](x, layers[0].init_state(backbone.state_spec(inputs.shape[0])), backbone._context(0, inputs.shape[1], 0, None).at(0))[0]
        read1 = layers[1].attn(layers[1].attn_norm(x), None, None)[0]
    for layer, read in ((0, out), (1, read1)):
        weighted, _, _ = step_loss(backbone, recipe, inputs, targets, answer, other, lens=(layer, 0.5))
        logits = backbone.model.lm_head(backbone.model.model.norm(read))
        nll = -torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None])[..., 0]
        assert torch.allclose(weighted - base, 0.5 * nll[answer].mean(), rtol=1e-4, atol=1e-5), layer


def test_tied_layers_read_with_their_keys_train_one_weight_and_save_as_a_plain_gdn(tmp_path):
    """A tied layer's emitted queries equal its keys token for token (an untied layer's do not); the
    optimizer sees one parameter, whose gradient is the sum of a two-copy forward's q and k gradients; the saved
    checkpoint holds q_proj and k_proj under their own names, equal, and loads back with the same
    outputs while the training model stays tied."""
    from safetensors.torch import load_file

    from memexp.backbones.gdn.model import GDNBackbone
    from memexp.embedded.niah_words import tokenizer_corpus
    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import _with_vocab, save_untied, tie_queries_to_keys
    from memexp.embedded.words_tokenizer import train_tokenizer

    recipe, _ = load_recipe(["recipe=tiny_gdn_words", "model.hidden_size=32", "model.head_dim=8",
                             "model.num_hidden_layers=3"])
    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    model = build_model(_with_vocab(recipe, tok.vocab_size))
    k_before = model.model.layers[2].attn.k_proj.weight.detach().clone()
    tie_queries_to_keys(model, [2])
    attn = model.model.layers[2].attn
    assert attn.q_proj.weight is attn.k_proj.weight and attn.q_conv1d.weight is attn.k_conv1d.weight
    assert torch.equal(attn.k_proj.weight, k_before)  # the key's weights are kept, the query's dropped
    backbone = GDNBackbone(model, tok, "tiny_gdn_words", prefill_chunk=2048)
    ids = tok.encode("One of the special magic numbers for quiet-river is: 12.", add_bos=True)

    x = torch.randn(1, len(ids), 32, generator=torch.Generator().manual_seed(1))
    emitted = []
    for layer in model.model.layers:
        layer.attn(x, None, None, emit=lambda k, q: emitted.append(torch.allclose(k, q)))
    assert emitted == [False, False, True]

    params = list(model.parameters())
    assert sum(p is attn.k_proj.weight for p in params) == 1  # one parameter for the optimizer
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))
    attn(x, None, None)[0].sum().backward()
    grad = attn.k_proj.weight.grad.clone()
    attn.k_proj.weight.grad = None
    untied = torch.nn.Linear(32, 32, bias=False)  # the same forward with q and k as two copies
    untied.weight = torch.nn.Parameter(k_before.clone())
    attn.q_proj = untied
    attn(x, None, None)[0].sum().backward()
    assert torch.allclose(grad, attn.k_proj.weight.grad + untied.weight.grad, atol=1e-6)
    tie_queries_to_keys(model, [2])

    out = tmp_path / "ckpt"
    before = backbone.forward(backbone.init_state(), ids)
    save_untied(backbone, out)
    assert attn.q_proj.weight is attn.k_proj.weight  # still tied after saving
    tensors = load_file(str(out / "model.safetensors"))
    for name in ("q_proj", "q_conv1d"):
        q, k = (tensors[f"model.layers.2.attn.{p}{name[1:]}.weight"] for p in ("q", "k"))
        assert torch.equal(q, k)
    assert not torch.equal(tensors["model.layers.1.attn.q_proj.weight"], tensors["model.layers.1.attn.k_proj.weight"])
    loaded = load_backbone({"name": "tiny_gdn_words", "arch": "gdn", "pretrained": str(out)})
    assert torch.allclose(loaded.forward(loaded.init_state(), ids), before, atol=1e-5)


def test_centered_layers_keys_average_to_zero_over_the_batch_they_were_centred_on():
    """After one projection whose running mean is one batch's (the first step), the centred layer's
    pre-conv keys and queries over that batch average to zero (the mean input has no image under
    q_proj or k_proj), while an uncentred layer's do not; each projection changes q_proj and k_proj
    by a rank-one term, so the rest of the row space is kept; closing removes the hook."""
    from memexp.backbones.gdn.model import GDNBackbone
    from memexp.embedded.niah_words import tokenizer_corpus
    from memexp.embedded.tiny_gdn import build_model
    from memexp.embedded.tiny_gdn_words import CenteredQK, _with_vocab
    from memexp.embedded.words_tokenizer import train_tokenizer

    recipe, _ = load_recipe(["recipe=tiny_gdn_words", "model.hidden_size=32", "model.head_dim=8",
                             "model.num_hidden_layers=3"])
    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    model = build_model(_with_vocab(recipe, tok.vocab_size))
    backbone = GDNBackbone(model, tok, "tiny_gdn_words", prefill_chunk=2048)
    ids = torch.randint(0, tok.vocab_size, (3, 40), generator=torch.Generator().manual_seed(0))
    inputs = {}
    spies = [layer.attn.q_proj.register_forward_pre_hook(
        lambda m, a, i=i: inputs.__setitem__(i, a[0].detach().reshape(-1, 32))) for i, layer in enumerate(model.model.layers)]
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    centering = CenteredQK(model, [1])
    with torch.no_grad():
        backbone.train_hidden(ids)
    centering.project()
    centering.close()
    for spy in spies:
        spy.remove()
    for i, layer in enumerate(model.model.layers):
        for proj in (layer.attn.q_proj, layer.attn.k_proj):
            mean_key = proj(inputs[i]).mean(0)
            scale = proj(inputs[i]).abs().mean()
            assert (mean_key.abs().max() < 1e-5 * scale) == (i == 1)
    for name, p in model.named_parameters():
        changed = not torch.equal(p, before[name])
        assert changed == name.startswith(("model.layers.1.attn.q_proj", "model.layers.1.attn.k_proj")), name
        if changed:
            assert torch.linalg.matrix_rank(p - before[name]).item() == 1
    assert not model.model.layers[1].attn.q_proj._forward_pre_hooks


@pytest.mark.parametrize("override, field", [
    ("stages.1.max_tokens=2048", "recipe.stages.1"),
    ("model.vocab_size=300", "recipe.model.vocab_size"),
    ("variant_share=2", "recipe.variant_share"),
    ("bogus=1", "recipe.bogus"),
    ("stages.0.form=replay", "recipe.stages.0.form"),
    ("induction_layers=9", "recipe.induction_layers"),
    ("induction_context=[1,2]", "recipe.induction_context"),  # 4 heads
    ("induction_context=[1,2,4,10]", "recipe.induction_context"),  # beyond the 10-tap short conv's reach
    ("carrier_heads=5", "recipe.carrier_heads"),  # 4 heads
    ("lexical_heads=5", "recipe.lexical_heads"),  # 4 heads
    ("carrier_heads=2 lexical_heads=3", "recipe.lexical_heads"),  # both take the last heads of layer 0
    ("lexical_scale=0", "recipe.lexical_scale"),
    ("induction_layers=0 lexical_heads=1 stages.1.tied_qk_layers=[0]", "recipe.stages.1.tied_qk_layers"),
    ("embed_std=0", "recipe.embed_std"),
    ("stages.0.question_weight=-1", "recipe.stages.0.question_weight"),
    ("stages.1.tied_qk_layers=[4]", "recipe.stages.1.tied_qk_layers"),
    ("stages.1.tied_qk_layers=[2,2]", "recipe.stages.1.tied_qk_layers"),
    ("stages.1.tied_qk_layers=[0]", "recipe.stages.1.tied_qk_layers"),  # layer 0 is the induction layer
    ("stages.1.copy_alphabet=8", "recipe.stages.1.copy_alphabet"),  # stage 1 is not a copy stage
    ("stages.0.copy_alphabet=1", "recipe.stages.0.copy_alphabet"),
    ("stages.1.lens_weight=-1", "recipe.stages.1.lens_weight"),
    ("stages.1.lens_weight=1 stages.1.lens_layer=4", "recipe.stages.1.lens_layer"),
    ("stages.1.centered_qk_layers=[4]", "recipe.stages.1.centered_qk_layers"),
    ("stages.1.centered_qk_layers=[1,1]", "recipe.stages.1.centered_qk_layers"),
])
def test_a_wrong_value_names_its_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_recipe(["recipe=tiny_gdn_words", *override.split()])


def test_induction_context_reaches_as_far_as_the_short_conv():
    """n taps back needs a conv of n + 1 taps: [1, 2, 4, 5] is allowed with model.conv_size = 6 and
    refused with 4 or 5 (its error names the field and the reach)."""
    recipe, _ = load_recipe(["recipe=tiny_gdn_words", "model.conv_size=6", "induction_context=[1,2,4,5]"])
    assert recipe.induction_context == [1, 2, 4, 5]
    for conv in ("4", "5"):
        with pytest.raises(ConfigError, match=rf"recipe\.induction_context=.*1 to {int(conv) - 1}"):
            load_recipe(["recipe=tiny_gdn_words", f"model.conv_size={conv}", "induction_context=[1,2,4,5]"])


def test_a_small_alphabet_copy_passage_needs_more_than_one_token_of_context():
    """copy_alphabet=k: each passage uses at most k distinct tokens, chosen anew per passage, and its
    target is the passage again. A one-token copy is lost at a position whose previous token is
    followed elsewhere in the passage by another token: counted here, most positions of an
    8-token-alphabet passage, few of a whole-vocabulary one of the same length."""
    from memexp.embedded.niah_words import copy_example, copy_vocabulary, stream, tokenizer_corpus
    from memexp.embedded.words_tokenizer import train_tokenizer

    tok = train_tokenizer(tokenizer_corpus(0, num_examples=20))
    vocab = copy_vocabulary(tok)

    def lost(passage):
        follows = {}
        for a, b in zip(passage, passage[1:]):
            follows.setdefault(a, set()).add(b)
        return sum(len(follows[a]) > 1 for a in passage[:-1]), len(passage) - 1

    alphabets, small, whole = set(), [0, 0], [0, 0]
    for i in range(40):
        ex = copy_example(vocab, 256, stream(0, "alphabet", i), tok.bos_id, tok.eos_id, alphabet=8)
        n = (len(ex.ids) - 3) // 2
        first, second = ex.ids[1:1 + n], ex.ids[ex.answer_start:-1]
        assert ex.ids[0] == tok.bos_id and ex.ids[1 + n] == vocab[0] and ex.ids[-1] == tok.eos_id
        assert first == second and len(set(first)) <= 8 and vocab[0] not in first
        alphabets.add(frozenset(first))
        small = [x + y for x, y in zip(small, lost(first))]
        plain = copy_example(vocab, 256, stream(0, "alphabet", i), tok.bos_id, tok.eos_id)
        whole = [x + y for x, y in zip(whole, lost(plain.ids[1:1 + (len(plain.ids) - 3) // 2]))]
    assert len(alphabets) == 40  # a new alphabet per passage
    assert small[0] / small[1] > 0.8 and whole[0] / whole[1] < 0.2, (small, whole)


def test_the_keys_tied_attempts_stages_file_loads_as_its_header_says():
    """docs/experiments/tiny_gdn_words_keys_tied_stages.yaml (docs/benchmarks.md) is the stage list its
    header's command passes: it validates, ties layers 1-3 from the first stage, and names the
    key-deciding variants."""
    from pathlib import Path

    from memexp.embedded.niah_words import SIX_TASKS

    path = Path(__file__).resolve().parents[2] / "docs" / "experiments" / "tiny_gdn_words_keys_tied_stages.yaml"
    text = path.read_text()
    assert '"stages=$(cat docs/experiments/tiny_gdn_words_keys_tied_stages.yaml)"' in text
    then = "model.conv_size=4 induction_layers=1 lexical_heads=0 lexical_whiten=false"  # the recipe of that date
    assert then in text
    recipe, _ = load_recipe(["recipe=tiny_gdn_words", f"stages={text}", *then.split()])
    assert recipe.stages[0].tied_qk_layers == [1, 2, 3]
    named = {t for s in recipe.stages for t in s.tasks}
    assert {"multikey_noise", "multikey_essay_2", "multiquery_half"} <= named and set(SIX_TASKS) <= named
