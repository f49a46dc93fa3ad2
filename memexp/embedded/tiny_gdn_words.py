"""The tiny_gdn_words recipe: a Gated DeltaNet with a word tokenizer, trained from scratch on
RULER's six NIAH tasks in their own format (memexp.embedded.niah_words), never on NoteBank's
replay form, so NoteBank-TF on it is training-free as in the paper.

Why a word tokenizer and 4 x 4 channels (tiny_gdn has bytes and 2 x 2): NoteBank's native
router compares a note's native queries with the question's, channel by channel, and lets
each channel vote. With byte tokens the most distinctive positions of a needle are its random
digits, which the question does not contain; with word tokens the key "{adjective}-{noun}" is
two rare tokens read in the same words in the needle ("... for {key} is:") and in the question
("... for {key} mentioned ..."), so the first layer's queries there match across the two.
More channels give the vote more voters that can see that match.

The model and initialisation follow tiny_gdn (memexp.embedded.tiny_gdn: PyTorch's default
init, long-memory gates at init) with two changes without which it did not learn to copy a value
on this machine (docs/benchmarks.md): the embedding and LM head are tied (a copied token's
embedding is its own output row, which matters for 9.5K rarely seen tokens), and the first
layer starts as a copy layer (induction_init). The first stage is a copy warm-up
(niah_words.copy_example), never a replayed note. The loss is the answer tokens' cross-entropy plus a small
weight on a random sample of the other positions (the LM head runs at those positions only:
with an 8K-word vocabulary the full head would cost as much as the model), and, where a stage
sets `question_weight`, that weight on the question's tokens. The tokenizer is
trained first, on the recipe's own text, and saved beside the weights.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from memexp.backbones.gdn.model import GDNBackbone, GDNConfig
from memexp.core.schema import ASSETS_DIR, ConfigError, portable_assets
from memexp.embedded.lexical_heads import LexicalHeads
from memexp.embedded.niah_eval import plain_accuracy
from memexp.embedded.niah_words import (
    FORMS,
    QUESTIONS,
    SIX_TASKS,
    STREAM_PREFIX,
    VARIANTS,
    WordsExample,
    copy_example,
    copy_vocabulary,
    example,
    pick_task,
    stream,
    tokenizer_corpus,
)
from memexp.embedded.tiny_gdn import Progress, build_model, schedule
from memexp.embedded.words_tokenizer import train_tokenizer
from memexp.training.loop import Plan, train

NAME = "tiny_gdn_words"
CHECKPOINT_DIR = ASSETS_DIR / NAME


@dataclass
class WordsStage:
    """One stage; each step draws a context budget in [min_tokens, max_tokens] for its batch."""

    name: str = "stage"  # the stage's name in the log and recipe.json
    steps: int = 100  # optimizer steps
    batch_size: int = 16  # sequences per step
    lr: float = 3e-3  # peak learning rate: 10-step warmup, then cosine to 10 % of it
    min_tokens: int = 128  # the shortest context budget drawn
    max_tokens: int = 1024  # the training length bounds every stage's max_tokens
    # the tasks drawn (uniformly), a subset of niah_words.SIX_TASKS and VARIANTS; empty = all six
    # (plus variant_share of word-valued variants). One needle and one value first, so the model
    # learns to copy before it must list four values.
    tasks: list[str] = field(default_factory=list)
    # ruler: RULER's question and answer prefix; prefix: the answer prefix alone (curriculum start:
    # the value a dozen tokens back when the needle ends the haystack). Both read the whole document.
    question: str = "ruler"
    # ruler: RULER's NIAH examples; copy: the copying warm-up (niah_words.copy_example), tasks and
    # question unused
    form: str = "ruler"
    # copy form only: draw each passage from this many tokens (a new choice per passage) instead of the
    # whole vocabulary, so that the copy must be keyed on several preceding tokens (niah_words.copy_example);
    # 0 = the whole vocabulary
    copy_alphabet: int = 0
    # the LM loss weight on every token of the question (after the context, before the answer); 0 = off,
    # as in every shipped stage. Meant to make the model write at the needle's key tokens (predicting
    # "... number for" -> the key), so that NoteBank's representative token (Eq. 4) lands on them; a
    # 500-step stage did not (docs/benchmarks.md, "why native routing misses the needle"). The
    # question is RULER's own input, so this is no replay form.
    question_weight: float = 0.0
    # deep supervision of one layer's read: `lens_weight` x the answer tokens' cross-entropy of layer
    # `lens_layer`'s attention output read through the final norm and the LM head, as if no later
    # layer followed. Meant for the lexical layer, whose keys find the asked needle (docs/benchmarks.md,
    # "the key is found and not read") while its output does not name the needle's value. 0 = off.
    lens_layer: int = 0
    lens_weight: float = 0.0  # the weight of that lens loss (see lens_layer); 0 = off
    # layers whose query becomes their key from this stage on (q_proj and q_conv1d take k_proj's and
    # k_conv1d's weights and share them, so q_t = k_t at every token; see tie_queries_to_keys). The
    # checkpoint stores both, equal, in FLA's format. Empty = no change (every shipped stage; tried:
    # docs/benchmarks.md, "q = k and key-deciding variants").
    tied_qk_layers: list[int] = field(default_factory=list)
    # layers whose q_proj and k_proj rows are kept orthogonal to the running mean of the layer's
    # attention input (see CenteredQK): the trained model's keys of different words otherwise share
    # one direction (30-60 % of their squared norm), so no key tells words apart. Empty = off.
    centered_qk_layers: list[int] = field(default_factory=list)


@dataclass
class TinyGDNWordsRecipe:
    seed: int = 0  # model init, tokenizer text and every training stream
    output: Optional[str] = None  # checkpoint directory; null = a new outputs/train/tiny_gdn_words/<time>
    replace_assets: bool = False  # write the shipped model, memexp/assets/tiny_gdn_words
    # continue from this checkpoint (weights and tokenizer) instead of a new tokenizer and random init;
    # recipe.json records it beside the stages run here
    init_from: Optional[str] = None
    model: dict = field(default_factory=lambda: {
        "hidden_size": 128, "num_hidden_layers": 4, "num_heads": 4, "head_dim": 32, "expand_v": 1.0,
        "hidden_ratio": 4})  # FLA GatedDeltaNetConfig fields; vocab_size comes from the trained tokenizer
    init: str = "torch"  # torch | fla (see memexp.embedded.tiny_gdn)
    decay_min: float = 1e-4  # initial per-token forgetting 1 - exp(g), log-uniform over heads
    decay_max: float = 1e-3  # the largest initial per-token forgetting
    conv_init: float = 0.5  # short-conv taps ~ U(-conv_init, conv_init)
    embed_std: float = 0.1  # the std of the initial embeddings when they are tied to the LM head
    # the first `induction_layers` layers start as copy (induction) layers (see induction_init)
    induction_layers: int = 1  # the init of a tied embedding / LM head (model.tie_word_embeddings)
    # per head of each induction layer, how many preceding tokens its copy is keyed on (1 to
    # model.conv_size - 1, the short conv's reach: 3 at FLA's default); [] = 1 for every head.
    # In every UUID some token ("-", a hex letter) is followed by two different ones, so a copy
    # keyed on one token cannot follow it; keyed on two tokens 34 % of UUIDs still have such a
    # context, on three 1.8 % (scripts/probe/uuid_copy_ambiguity.py)
    induction_context: list[int] = field(default_factory=list)
    # the last `carrier_heads` heads of each induction layer start as carriers instead of copies
    # (see induction_init): they pass the conv_size - 1 tokens before t on to t, so that a later
    # layer's conv reaches a needle's key word from its value ("X is: V") and the question's
    # ("X mentioned in the provided text is"), the reach a key-conditioned read needs
    carrier_heads: int = 0
    # the last `lexical_heads` heads of layer 0 are held as lexical bag heads (see
    # memexp.embedded.lexical_heads): query and key a bag of the words around t, a fixed random
    # projection orthogonal to the text's mean direction, std `lexical_scale`; a channel NoteBank's
    # native router can match the question's words on. A bag spans model.conv_size tokens
    lexical_heads: int = 0
    lexical_scale: float = 0.3  # the std of the lexical heads' fixed random projection (see lexical_heads)
    # whiten their inputs by the text's second moment first (lexical_heads.text_whitening): an
    # IDF-like weight that training cannot undo by moving the embeddings
    lexical_whiten: bool = False
    train_length: int = 1024  # tokens: no training sequence is longer
    tokenizer_examples: int = 400  # training-stream examples the tokenizer is trained on
    variant_share: float = 0.15  # share of word-valued examples (niah_words.WORD_VARIANTS)
    other_positions: int = 64  # non-answer positions per sequence that get the LM loss
    other_weight: float = 0.1  # their loss weight (answer tokens weigh 1)
    stages: list[WordsStage] = field(default_factory=list)  # the curriculum, run in order
    threads: int = 2  # torch CPU threads
    log_every: int = 25  # steps between progress lines
    eval_seed: int = 7  # the validation seed of the final check (never RULER's 42 nor a reported seed)
    eval_samples: int = 10  # examples per task in the final check at train_length; 0 = skip

    def __post_init__(self) -> None:
        if not self.stages:
            raise ConfigError("recipe.stages is empty: give at least one stage")
        for i, s in enumerate(self.stages):
            where = f"recipe.stages.{i}"
            if not 64 <= s.min_tokens <= s.max_tokens <= self.train_length:
                raise ConfigError(f"{where}: need 64 <= min_tokens <= max_tokens <= recipe.train_length "
                                  f"({self.train_length}), got {s.min_tokens}, {s.max_tokens}")
            unknown = [t for t in s.tasks if t not in SIX_TASKS and t not in VARIANTS]
            if unknown:
                raise ConfigError(f"{where}.tasks: {unknown[0]!r} is not one of {', '.join(SIX_TASKS + tuple(VARIANTS))}")
            if s.form not in FORMS:
                raise ConfigError(f"{where}.form={s.form!r}: allowed values are {', '.join(FORMS)}")
            if s.question not in QUESTIONS:
                raise ConfigError(f"{where}.question={s.question!r}: allowed values are {', '.join(QUESTIONS)}")
            if s.steps < 0 or s.batch_size < 1 or s.lr <= 0:
                raise ConfigError(f"{where}: steps >= 0, batch_size >= 1 and lr > 0 are required")
            if s.copy_alphabet and (s.form != "copy" or s.copy_alphabet < 2):
                raise ConfigError(f"{where}.copy_alphabet={s.copy_alphabet}: 0, or >= 2 in a stage with form: copy")
            if s.lens_weight < 0:
                raise ConfigError(f"{where}.lens_weight={s.lens_weight}: must be >= 0")
            if s.question_weight < 0:
                raise ConfigError(f"{where}.question_weight={s.question_weight}: must be >= 0")
        if self.init not in ("torch", "fla"):
            raise ConfigError(f"recipe.init={self.init!r}: allowed values are torch, fla")
        if "vocab_size" in self.model:
            raise ConfigError("recipe.model.vocab_size: set by the trained tokenizer; drop the field")
        if not 0.0 <= self.variant_share <= 1.0:
            raise ConfigError(f"recipe.variant_share={self.variant_share!r}: must be in [0, 1]")
        if not 0 <= self.induction_layers <= self.model.get("num_hidden_layers", 0):
            raise ConfigError(f"recipe.induction_layers={self.induction_layers}: allowed values are 0 to "
                              f"recipe.model.num_hidden_layers ({self.model.get('num_hidden_layers')})")
        heads = self.model.get("num_heads", 0)
        reach = self.model.get("conv_size", GDNConfig.conv_size) - 1
        if self.induction_context and (len(self.induction_context) != heads
                                       or any(not 1 <= n <= reach for n in self.induction_context)):
            raise ConfigError(f"recipe.induction_context={self.induction_context}: one of 1 to {reach} "
                              f"(recipe.model.conv_size - 1) per head (recipe.model.num_heads = {heads}), "
                              f"or [] for 1 everywhere")
        if not 0 <= self.carrier_heads <= heads:
            raise ConfigError(f"recipe.carrier_heads={self.carrier_heads}: allowed values are 0 to "
                              f"recipe.model.num_heads ({heads})")
        if not 0 <= self.lexical_heads <= heads - self.carrier_heads:
            raise ConfigError(f"recipe.lexical_heads={self.lexical_heads}: allowed values are 0 to "
                              f"recipe.model.num_heads - recipe.carrier_heads ({heads - self.carrier_heads}); "
                              "both take the last heads of layer 0")
        if self.lexical_scale <= 0:
            raise ConfigError(f"recipe.lexical_scale={self.lexical_scale}: must be > 0")
        layers = self.model.get("num_hidden_layers", 0)
        for i, s in enumerate(self.stages):
            for name in ("tied_qk_layers", "centered_qk_layers"):
                listed = getattr(s, name)
                if any(not 0 <= t < layers for t in listed) or len(set(listed)) != len(listed):
                    raise ConfigError(f"recipe.stages.{i}.{name}={listed}: distinct layer indices from 0 to "
                                      f"{layers - 1} (recipe.model.num_hidden_layers = {layers})")
            if s.lens_weight and not 0 <= s.lens_layer < layers:
                raise ConfigError(f"recipe.stages.{i}.lens_layer={s.lens_layer}: allowed values are 0 to {layers - 1} "
                                  f"(recipe.model.num_hidden_layers = {layers})")
            tied = s.tied_qk_layers
            if self.lexical_heads and 0 in tied:
                raise ConfigError(f"recipe.stages.{i}.tied_qk_layers: layer 0 holds recipe.lexical_heads="
                                  f"{self.lexical_heads} lexical heads, whose query and key convs differ")
            copying = [t for t in tied if t < self.induction_layers]
            if copying:
                raise ConfigError(f"recipe.stages.{i}.tied_qk_layers: layer {copying[0]} is an induction layer "
                                  f"(recipe.induction_layers={self.induction_layers}), whose query and key differ")
        if self.embed_std <= 0:
            raise ConfigError(f"recipe.embed_std={self.embed_std}: must be > 0")
        if self.conv_init <= 0 or not 0 < self.decay_min <= self.decay_max < 1:
            raise ConfigError("recipe.conv_init > 0 and 0 < decay_min <= decay_max < 1 are required")
        if self.other_positions < 0 or self.other_weight < 0:
            raise ConfigError("recipe.other_positions and recipe.other_weight must be >= 0")


def step_examples(recipe: TinyGDNWordsRecipe, stage: WordsStage, step: int, tokenizer) -> list[WordsExample]:
    """The batch of one step: deterministic in (seed, stage name, step)."""
    rng = stream(recipe.seed, stage.name, step)
    budget = rng.randint(stage.min_tokens, stage.max_tokens)
    texts = []
    vocab = copy_vocabulary(tokenizer) if stage.form == "copy" else None
    for i in range(stage.batch_size):
        own = stream(recipe.seed, stage.name, step, i)
        if vocab:
            texts.append(copy_example(vocab, budget, own, tokenizer.bos_id, tokenizer.eos_id, stage.copy_alphabet))
            continue
        task = own.choice(stage.tasks) if stage.tasks else pick_task(own, recipe.variant_share)
        texts.append(example(tokenizer, task, budget, own, stage.question))
    return texts


def batch(texts: list[WordsExample], pad_id: int, other_positions: int, generator: torch.Generator):
    """(inputs [B, T], targets [B, T], answer mask [B, T], other mask [B, T], question mask [B, T]),
    right-padded; `other` marks up to `other_positions` random positions per row before the answer,
    `question` the positions that predict a question token (none for a copy passage)."""
    T = max(len(t.ids) for t in texts) - 1
    inputs = torch.full((len(texts), T), pad_id, dtype=torch.long)
    targets = torch.full((len(texts), T), pad_id, dtype=torch.long)
    answer = torch.zeros(len(texts), T, dtype=torch.bool)
    other = torch.zeros(len(texts), T, dtype=torch.bool)
    question = torch.zeros(len(texts), T, dtype=torch.bool)
    for b, t in enumerate(texts):
        n = len(t.ids) - 1
        inputs[b, :n] = torch.tensor(t.ids[:-1])
        targets[b, :n] = torch.tensor(t.ids[1:])
        answer[b, t.answer_start - 1:n] = True  # position i predicts ids[i + 1]
        before = t.answer_start - 1
        pick = torch.randperm(before, generator=generator)[:other_positions]
        other[b, pick] = True
        question[b, t.question_start - 1:before] = True
    return inputs, targets, answer, other, question


def step_loss(backbone: GDNBackbone, recipe: TinyGDNWordsRecipe, inputs, targets, answer, other,
              question=None, question_weight: float = 0.0, lens: tuple[int, float] | None = None):
    """(loss, answer-token hits [n_answer], per-row all-answer-tokens-right [B]). `lens` = (layer,
    weight) adds weight x the answer tokens' cross-entropy of that layer's attention output read
    through the final norm and the LM head."""
    head = backbone.model.lm_head
    read = {}
    hook = None
    if lens is not None and lens[1]:
        attn = backbone.model.model.layers[lens[0]].attn
        hook = attn.register_forward_hook(lambda module, args, out: read.update(out=out[0]))
    try:
        hidden = backbone.train_hidden(inputs)
    finally:
        if hook is not None:
            hook.remove()
    answer_logits = head(hidden[answer])
    hits = answer_logits.argmax(-1) == targets[answer]
    loss = F.cross_entropy(answer_logits, targets[answer])
    if other.any() and recipe.other_weight:
        loss = loss + recipe.other_weight * F.cross_entropy(head(hidden[other]), targets[other])
    if question_weight and question is not None and question.any():
        loss = loss + question_weight * F.cross_entropy(head(hidden[question]), targets[question])
    if read:
        lens_logits = head(backbone._final_norm(read["out"][answer]))
        loss = loss + lens[1] * F.cross_entropy(lens_logits, targets[answer])
    wrong = torch.zeros_like(answer)
    wrong[answer] = ~hits
    return loss, hits, ~wrong.any(-1)


def train_stage(backbone: GDNBackbone, recipe: TinyGDNWordsRecipe, stage: WordsStage, log=print,
                lexical: LexicalHeads | None = None) -> dict:
    model, tokenizer = backbone.model, backbone.tokenizer
    generator = torch.Generator().manual_seed(recipe.seed)
    centering = CenteredQK(model, stage.centered_qk_layers)
    read = []  # the last batch's inputs, which the lexical heads' statistics follow

    def batches():
        for step in range(stage.steps):
            yield batch(step_examples(recipe, stage, step, tokenizer), tokenizer.eos_id, recipe.other_positions,
                        generator)

    def loss(b):
        inputs, targets, answer, other, question = b
        read[:] = [inputs]
        value, hits, whole = step_loss(backbone, recipe, inputs, targets, answer, other, question,
                                       stage.question_weight, (stage.lens_layer, stage.lens_weight))
        return value, inputs.numel(), {"answers": whole.float().mean().item(),
                                       "answer_tokens": hits.float().mean().item()}

    def constrain() -> None:
        centering.project()
        if lexical is not None:
            lexical.observe(read[0])
            lexical.apply()

    model.train()
    t0 = time.perf_counter()
    progress = Progress(stage, recipe.log_every, log)
    train(Plan(list(model.parameters()), schedule(stage), batches(), loss, betas=(0.9, 0.98), after_step=constrain,
               on_step=progress))
    centering.close()
    model.eval()
    return {"name": stage.name, "steps": stage.steps, "tokens": progress.tokens,
            "seconds": round(time.perf_counter() - t0, 1)}


def run(recipe: TinyGDNWordsRecipe, log=print) -> dict:
    """Train the tokenizer and the model, save both with recipe.json, return what it records."""
    torch.set_num_threads(recipe.threads)
    if not recipe.replace_assets and not recipe.output:
        raise ConfigError("recipe.output is null: name a folder (the CLI picks outputs/train/tiny_gdn_words/<time>), "
                          "or pass replace_assets=true to write memexp/assets/tiny_gdn_words")
    out = CHECKPOINT_DIR if recipe.replace_assets else Path(recipe.output)
    t0 = time.perf_counter()
    if recipe.init_from:
        from memexp.backbones import load_backbone

        loaded = load_backbone({"name": NAME, "arch": "gdn", "pretrained": str(Path(recipe.init_from).resolve()),
                                "device": "cpu", "dtype": "float32"})
        model, tokenizer = loaded.model, loaded.tokenizer
        previous = json.loads((Path(recipe.init_from) / "recipe.json").read_text())
    else:
        tokenizer = train_tokenizer(tokenizer_corpus(recipe.seed, recipe.tokenizer_examples))
        model, previous = build_model(_with_vocab(recipe, tokenizer.vocab_size)), None
        if model.config.tie_word_embeddings:
            # the shared matrix is also the LM head: PyTorch's N(0, 1) embedding would give logits
            # of std ~sqrt(hidden_size) at init, so it starts at embed_std instead
            torch.nn.init.normal_(model.model.embeddings.weight, std=recipe.embed_std,
                                  generator=torch.Generator().manual_seed(recipe.seed + 3))
        induction_init(model, recipe.induction_layers, recipe.induction_context, recipe.carrier_heads)
    log(f"tokenizer: {tokenizer.vocab_size} tokens")
    backbone = GDNBackbone(model, tokenizer, NAME, prefill_chunk=2048)
    lexical = LexicalHeads(model, recipe.lexical_heads, recipe.lexical_scale, seed=recipe.seed + 5,
                           whiten=recipe.lexical_whiten)
    lexical.apply()
    stages = []
    for stage in recipe.stages:
        tie_queries_to_keys(model, stage.tied_qk_layers)
        stages.append(train_stage(backbone, recipe, stage, log, lexical))
        save_untied(backbone, out)  # an interrupted run keeps its last finished stage
    train_seconds = time.perf_counter() - t0
    metrics = {}
    for task in SIX_TASKS if recipe.eval_samples else ():
        key = f"plain_{task}_{recipe.train_length}_seed{recipe.eval_seed}"
        metrics[key] = plain_accuracy(backbone, task, recipe.train_length, recipe.eval_samples, seed=recipe.eval_seed,
                                      essay_standin=True)
        log(f"plain {task} at {recipe.train_length} (validation seed {recipe.eval_seed}): {metrics[key]:.1f}%")
    record = {
        "recipe": asdict(recipe),
        "train_length": recipe.train_length,
        "data": {"tasks": list(SIX_TASKS), "form": "RULER's full input only (no replay form)",
                 "essay_haystack": "memexp.benchmarks.ruler.standin, seeds drawn per example (never 0, the eval text)",
                 "train_streams": f"{STREAM_PREFIX}/{recipe.seed}/<stage>/<step>/<i>",
                 "eval_streams": "<task>/<seed>/<index> (RULER's); final check on seed "
                                 f"{recipe.eval_seed}"},
        "tokenizer": {"vocab_size": tokenizer.vocab_size, "kind": "words (BPE without merges, ignore_merges)"},
        "stages": stages,
        # from scratch: this run's stages; continued (init_from): the checkpoint's record comes along
        "init_from": previous,
        "tokens": sum(s["tokens"] for s in stages) + (previous["tokens"] if previous else 0),
        "steps": sum(s["steps"] for s in stages) + (previous["steps"] if previous else 0),
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(train_seconds + (previous["train_seconds"] if previous else 0), 1),
        "metrics": metrics,
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {recipe.threads} threads",
    }
    (out / "recipe.json").write_text(json.dumps(portable_assets(record), indent=2) + "\n")
    log(f"saved {out} ({record['parameters']} parameters, {train_seconds:.0f} s of training)")
    return record


@torch.no_grad()
def induction_init(model, layers: int, context: list[int] | None = None, carriers: int = 0) -> None:
    """Start the first `layers` GDN layers as induction layers: the key's short conv passes the
    previous token, the query's and value's the current one, and q_proj starts equal to k_proj.
    Position t then writes (key of token t-1 -> value of token t), and a later query for a token
    reads what followed it: copying, which from PyTorch's init these small models do not find
    in the few hundred steps this machine affords (`python scripts/bench/induction_init.py`,
    docs/benchmarks.md). Training moves every weight from there.

    `context[h]` = n keys head h on the n tokens before t instead: its d_k dimensions split into
    n contiguous groups, group g's key tap passes token t-1-g and its query tap token t-g, so
    q_t . k_i sums n per-token matches and peaks where the n tokens before i are the n tokens
    ending at t. Empty or None: n = 1 for every head.

    The last `carriers` heads start as carriers: query and key both the current token, the value
    the sum of the c - 1 tokens before it (c = conv_size, 4 by default). Each token's query meets
    its own key (q_t . k_t = 1 with q_proj = k_proj), so the head's output at t holds the tokens
    t-1..t-c+1 (plus what earlier occurrences of token t wrote), and the next layer's conv over
    t-c+1..t sees back to t-2c+2 (t-6 at c = 4)."""
    for layer in model.model.layers[:layers]:
        attn = layer.attn
        per_head = context or [1] * attn.c.num_heads
        for conv in (attn.q_conv1d, attn.k_conv1d, attn.v_conv1d):
            conv.weight.zero_()
        attn.v_conv1d.weight[:, 0, -1] = 1.0  # the causal conv's last tap is the current token
        for head, n in enumerate(per_head):
            start = head * attn.c.head_dim
            bounds = [start + attn.c.head_dim * g // n for g in range(n + 1)]
            for g in range(n):
                attn.q_conv1d.weight[bounds[g]:bounds[g + 1], 0, -1 - g] = 1.0
                attn.k_conv1d.weight[bounds[g]:bounds[g + 1], 0, -2 - g] = 1.0
        for head in range(attn.c.num_heads - carriers, attn.c.num_heads):
            keys = slice(head * attn.c.head_dim, (head + 1) * attn.c.head_dim)
            values = slice(head * attn.c.head_v_dim, (head + 1) * attn.c.head_v_dim)
            attn.q_conv1d.weight[keys] = 0.0
            attn.k_conv1d.weight[keys] = 0.0
            attn.v_conv1d.weight[values] = 0.0
            attn.q_conv1d.weight[keys, 0, -1] = 1.0
            attn.k_conv1d.weight[keys, 0, -1] = 1.0
            attn.v_conv1d.weight[values, 0, :-1] = 1.0
        attn.q_proj.weight.copy_(attn.k_proj.weight)


@torch.no_grad()
def tie_queries_to_keys(model, layers: list[int]) -> None:
    """Make each listed layer's query its key: q_proj and q_conv1d become k_proj's and k_conv1d's
    parameters (k's current values; q's are dropped), so q_t = k_t at every token from here on.

    Why it was tried: NoteBank's address for a note is a channel's query at the note's most
    distinctive key (Eq. 4), which on this model lies at the value and the template words before
    it (docs/benchmarks.md); an untied query there is whatever the model computes before an
    unpredictable value, while with q = k it is the key the layer wrote, which a clean key-value
    read would meet with the question's query. Measured: it did not move the router, as a
    fine-tune or from scratch (docs/benchmarks.md, "q = k and key-deciding variants"); the
    shipped recipe ties nothing. It is an architecture constraint like any other weight tying:
    no training step sees a note, a replay or the router.
    """
    for index in layers:
        attn = model.model.layers[index].attn
        attn.q_proj.weight = attn.k_proj.weight
        attn.q_conv1d.weight = attn.k_conv1d.weight


class CenteredQK:
    """Keep the listed layers' q_proj and k_proj rows orthogonal to the mean of the layer's
    attention input: after every optimizer step, W <- W - (W u) u^T with u the unit running mean.

    Why: every token's normalised input shares a mean direction (about 20 % of its squared norm
    in the shipped tiny_gdn_words), and training grows the projections' gain along it (2-3x their
    average), so the keys of different words point nearly the same way and a key-conditioned read
    or NoteBank's cosine routing cannot tell them apart (docs/benchmarks.md). With W u = 0 a key
    holds only what distinguishes its token from the mean. The checkpoint is a plain GDN; this
    only constrains where training may move the weights.

    The running mean is an average over the batches' positions (padding included), updated
    0.9 / 0.1 per step from a forward pre-hook on q_proj, so it follows the residual stream as
    training changes it."""

    def __init__(self, model, layers: list[int], momentum: float = 0.9) -> None:
        self.momentum = momentum
        self.attns = [model.model.layers[i].attn for i in layers]
        self.means: list[torch.Tensor | None] = [None] * len(self.attns)
        self.hooks = [attn.q_proj.register_forward_pre_hook(self._hook(j)) for j, attn in enumerate(self.attns)]

    def _hook(self, j: int):
        def record(module, args):
            batch_mean = args[0].detach().reshape(-1, args[0].shape[-1]).mean(0)
            old = self.means[j]
            self.means[j] = batch_mean if old is None else self.momentum * old + (1 - self.momentum) * batch_mean
        return record

    @torch.no_grad()
    def project(self) -> None:
        for attn, mean in zip(self.attns, self.means):
            if mean is None:
                continue
            u = mean / mean.norm().clamp_min(1e-12)
            for proj in {id(p): p for p in (attn.q_proj.weight, attn.k_proj.weight)}.values():
                proj.sub_(torch.outer(proj @ u, u))

    def close(self) -> None:
        for hook in self.hooks:
            hook.remove()


def save_untied(backbone: GDNBackbone, out: Path) -> None:
    """save_pretrained with every shared query parameter written under its own name too: the
    checkpoint is a plain FLA GDN whose tied layers hold equal q and k weights."""
    tied = [(layer.attn, name) for layer in backbone.model.model.layers for name in ("q_proj", "q_conv1d")
            if getattr(layer.attn, name).weight is getattr(layer.attn, "k" + name[1:]).weight]
    for attn, name in tied:
        getattr(attn, name).weight = torch.nn.Parameter(getattr(attn, "k" + name[1:]).weight.detach().clone())
    try:
        backbone.save_pretrained(out)
    finally:
        for attn, name in tied:
            getattr(attn, name).weight = getattr(attn, "k" + name[1:]).weight


def _with_vocab(recipe: TinyGDNWordsRecipe, vocab_size: int):
    """What tiny_gdn.build_model reads (model fields, seed, init, gates, conv), with the tokenizer's vocabulary."""
    from types import SimpleNamespace

    return SimpleNamespace(model={**recipe.model, "vocab_size": vocab_size}, seed=recipe.seed, init=recipe.init,
                           decay_min=recipe.decay_min, decay_max=recipe.decay_max, conv_init=recipe.conv_init)
