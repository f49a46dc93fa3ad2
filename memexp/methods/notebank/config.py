"""NoteBank-TF's schema and registration (light: no torch, so validating a config loads no model code)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from memexp.core.registry import METHODS, ROUTERS
from memexp.core.schema import ConfigError, MethodConfig, _at_least, _choice
from memexp.methods.read_adapter import check_adapter_field
from memexp.methods.rescale import check_rescale

# BGE v1.5's query instruction for retrieval (BAAI/bge-base-en-v1.5's model card, "query_instruction_for_retrieval")
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "


@dataclass
class NoteBankConfig(MethodConfig):
    """NoteBank-TF (NoteBank paper, Algorithm 1 and App. B)."""

    name: str = "notebank"
    write_budget: int = 2  # W: notes per chunk (1 or 2)
    replay_budget: int = 2  # R: notes replayed per question
    span_budget: int = 64  # B: max tokens per note
    chunk_size: int = 512  # C: tokens per write chunk
    window: int = 48  # scoring window (tokens)
    tail: int = 32  # tokens of the previous chunk added to the candidate region
    address_dim: Optional[int] = 16  # d_rho: coordinates kept per address; null = identity
    address_seed: int = 0  # seed of the fixed coordinate selection
    # L (Eq. 2-5): the recurrent layers whose heads are channels, for writing (the distinctiveness
    # average, Eq. 3) and addressing (Eq. 4-5); null = every recurrent layer, the paper's setting.
    # A backbone states its own only with a reason (tiny_gdn_words: its copy layer, see its file).
    layers: Optional[list[int]] = None
    rescale: Optional[float] = None  # lambda applied to the recurrent state before replay; null = none
    router: str = "native"  # a name in memexp.core.registry.ROUTERS: native | random | bm25 | embedding | oracle | bge
    router_seed: int = 0  # seed of the random router
    # the bge router's encoder: a hub id or a local directory (the paper names no checkpoint, only
    # "BGE", so memexp uses BAAI's English base v1.5); read only with router=bge
    router_model: str = "BAAI/bge-base-en-v1.5"
    # text put before the question (never before a note) when the bge router embeds it: BGE v1.5's
    # model card recommends this instruction for short-query-to-passage retrieval, which routing a
    # question to <= B-token notes is (the paper states none); "" embeds the bare question. Read only
    # by an encoder router; with any other router it is set to "" (nothing is prepended), so those
    # runs keep the folder keys they had before this field (memexp.run.identity.METHOD_FIELDS_ADDED)
    router_query_instruction: str = BGE_QUERY_INSTRUCTION
    # The paper replays the notes' own ids back to back, then the question (Eq. 6, App. B.4): nothing
    # between notes, nothing before the question. A backbone trained on another replay form (tiny_gdn)
    # states its own in conf/method_for_backbone/notebank_<backbone>.yaml.
    note_separator: str = ""  # text between replayed notes
    replay_suffix: str = ""  # text between the replayed notes and the question
    # NB-LoRA (App. B.4): a read-adapter folder (memexp train recipe=notebank_lora), off while
    # reading, writing, probing and routing, on for replay, question and answer; null = NB-TF
    adapter: Optional[str] = None
    # true: the final incomplete chunk (< C tokens, read into the state but otherwise never written)
    # is written as a last chunk's notes once the context ends, before any question or reset; off in
    # the paper's protocol, whose state keeps that tail (and in every paper preset)
    write_tail: bool = False

    def __post_init__(self) -> None:
        _choice("method.write_budget", self.write_budget, (1, 2))
        _at_least("method.replay_budget", self.replay_budget, 1)
        _at_least("method.span_budget", self.span_budget, 1)
        _at_least("method.chunk_size", self.chunk_size, 1)
        _at_least("method.window", self.window, 1)
        _at_least("method.tail", self.tail, 0)
        if self.address_dim is not None:
            _at_least("method.address_dim", self.address_dim, 1)
        if self.layers is not None:
            check_layers(self.layers)
        check_rescale(self.rescale)
        if self.router not in ROUTERS:
            raise ConfigError(ROUTERS.unknown_message(self.router))
        if not isinstance(self.router_query_instruction, str):
            raise ConfigError(f"method.router_query_instruction={self.router_query_instruction!r}: give a string "
                              f"(\"\" for none)")
        if ROUTERS.get(self.router).meta.get("encoder"):
            check_encoder_source(self.router_model)
        else:
            self.router_query_instruction = ""  # no encoder reads it: recorded as what happens, nothing
        check_adapter_field(self.adapter)


def check_encoder_source(source: str) -> None:
    """`method.router_model` is a hub id 'owner/name' or an existing directory (checked before any model loads)."""
    if not isinstance(source, str) or not source:
        raise ConfigError(f"method.router_model={source!r}: give a hub id 'owner/name' or a local directory")
    path = Path(source).expanduser()
    looks_like_path = source.startswith(("/", ".", "~")) or source.count("/") > 1
    if looks_like_path and not path.is_dir():
        raise ConfigError(f"method.router_model={source!r}: no such directory; give a local encoder directory "
                          f"or a hub id 'owner/name'")


def check_layers(layers: list[int]) -> None:
    """method.layers is a non-empty list of distinct layer indices (whether the backbone has them
    is checked against its config before it loads, memexp.run.checks)."""
    if not layers:
        raise ConfigError("method.layers=[]: name at least one recurrent layer (or null: every recurrent layer)")
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
            raise ConfigError(f"method.layers: {layer!r} is not a layer index; allowed values are integers >= 0")
    repeated = sorted({layer for layer in layers if layers.count(layer) > 1})
    if repeated:
        raise ConfigError(f"method.layers={layers}: layer {repeated[0]} is named twice; name each layer once")


def check_layers_present(layers: list[int] | None, recurrent: list[int] | tuple[int, ...], backbone: str) -> None:
    """Every layer of method.layers is one of the backbone's recurrent layers; `backbone` names it
    in the message ("backbone=gdn" before loading, "backbone 'gdn'" once loaded)."""
    missing = [layer for layer in layers or () if layer not in recurrent]
    if missing:
        raise ConfigError(f"method.layers={layers}: {backbone} has no recurrent layer {missing[0]}; "
                          f"allowed values are {', '.join(map(str, recurrent))}")


def check_backbone_layers(nb: NoteBankConfig, backbone_cfg) -> None:
    """Before the model loads: method.layers names recurrent layers of this backbone, read from its
    config without weights (ConfigError)."""
    if nb.layers is not None:
        from memexp.backbones.shapes import shapes_for

        check_layers_present(nb.layers, shapes_for(backbone_cfg).channel_layers, f"backbone={backbone_cfg.name}")


# Read identity (memexp.methods.read_identity): R, the router and everything after the context
# only answer; W, B, the window, the tail, the addresses and the layers written only change what
# each chunk's features are reduced to, so several writers share one pass (NoteBank.read_shared).
# C cuts the pass into forward calls and stays read-side, as does every field not named here.
ANSWER_FIELDS = ("replay_budget", "router", "router_seed", "router_model", "router_query_instruction", "rescale",
                 "note_separator", "replay_suffix", "adapter")
WRITER_FIELDS = ("write_budget", "span_budget", "window", "tail", "address_dim", "address_seed", "layers",
                 "write_tail")

# NoteBank writes and addresses notes in the backbone's recurrent channels (config.validate checks it).
METHODS.register(NoteBankConfig.name, "memexp.methods.notebank.method:NoteBank", schema=NoteBankConfig,
                 requires=("recurrent_channels",), costs="memexp.methods.notebank.costs:NoteBankCosts",
                 backbone_check="memexp.methods.notebank.config:check_backbone_layers",
                 answer_fields=ANSWER_FIELDS, writer_fields=WRITER_FIELDS, backbone_fields=("adapter",))
