"""Every NB-LoRA row of the NoteBank paper (Tables 1, 3, 4, 5; Figs. 5c, 12) runs from its preset with
`method.adapter=<dir>`: the header's training commands make the adapters at the table's R, its run
commands compose with them (at every point of their sweeps), and without the adapter a run stops
with one line naming it.

NB_LORA below is written from the paper (App. C.4, D.2 and the tables' captions), not from the presets:
which preset holds each NB-LoRA row and the replay budget the table reads with."""

from __future__ import annotations

import json
import shlex

import pytest
from omegaconf import OmegaConf

from memexp.cli.train import load_recipe
from memexp.core.compose import load_config, sweep_jobs
from memexp.core.paths import CONF_DIR
from memexp.core.schema import ConfigError, without_file_checks
from memexp.methods.read_adapter import ADAPTER_FILES, META_FILE, check_backbone

EXPERIMENTS = CONF_DIR / "experiment"
# preset -> (the paper's tables with NB-LoRA rows there, R the NB-LoRA reader replays with; None: swept)
NB_LORA = {
    "paper_longbench_gdn": ("Table 1", 1),  # Tables 1, 4, 5: GDN top-1 (Table 4 adds Plain + LoRA)
    "paper_longbench_mamba2": ("Table 1", 4),  # Tables 1, 5: Mamba-2 read at top-4
    "paper_routers_longbench": ("Table 3", 1),  # LoRA readers fixed across routers, top-1
    "paper_routers_ruler": ("Table 3", 1),
    "paper_oracle_longbench": ("Fig. 5c", 1),
    "paper_lora_budgets_longbench": ("Fig. 12", None),  # R in {1, 2, 4}
}


def header(name: str) -> list[str]:
    lines = []
    for line in (EXPERIMENTS / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def commands(name: str, verb: str) -> list[list[str]]:
    """The header's `python -m memexp <verb> ...` commands, as argument lists after the verb."""
    prefix = f"#   python -m memexp {verb} "
    return [shlex.split(line[len(prefix):]) for line in header(name) if line.startswith(prefix)]


def make_adapter(folder, backbone: str, arch: str) -> None:
    """The three files of an adapter folder, recording the backbone it was trained on."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ADAPTER_FILES:
        (folder / name).write_text("{}")
    (folder / META_FILE).write_text(json.dumps({"backbone": {"name": backbone, "arch": arch, "shape": {},
                                                             "weights": None}}))


def points(argv: list[str]) -> list[list[str]]:
    """Every job of a run command: its own sweep and the preset's (hydra.sweeper.params)."""
    argv = [a for a in argv if a != "-m"]
    preset = next(a.split("=", 1)[1] for a in argv if a.startswith("experiment="))
    params = OmegaConf.load(EXPERIMENTS / f"{preset}.yaml").get("hydra", {}).get("sweeper", {}).get("params", {})
    given = {a.split("=", 1)[0].lstrip("+") for a in argv}
    swept = [f"{k}={v}" for k, v in params.items() if k.lstrip("+") not in given]
    return sweep_jobs([*argv, *swept])


def test_every_preset_with_nb_lora_rows_is_covered():
    found = {p.stem for p in EXPERIMENTS.glob("paper_*.yaml") if not p.name.endswith(".paper.yaml")
             and any("method.adapter" in line for line in header(p.stem))}
    assert found == set(NB_LORA)


@pytest.mark.parametrize("name", sorted(NB_LORA))
def test_the_headers_commands_train_at_the_tables_r_and_run_with_the_adapter(name, tmp_path, monkeypatch):
    source, R = NB_LORA[name]
    assert source in "\n".join(header(name))
    monkeypatch.chdir(tmp_path)
    for argv in commands(name, "train"):
        recipe, _ = load_recipe(argv)
        assert recipe.output.startswith("outputs/adapters/")
        if recipe.replay:
            trained_r = recipe.notebank["replay_budget"]
            assert recipe.output.endswith(f"notebank_r{trained_r}") and trained_r in (1, 2)  # App. C.4: R in {1, 2}
            if R == 1:
                assert trained_r == 1  # the top-1 tables read with the top-1 adapter
        else:
            assert recipe.output.endswith("/plain")  # Table 4's Plain + LoRA
    runs = commands(name, "run") if name != "paper_lora_budgets_longbench" else [[f"experiment={name}"]]
    runs = [argv for argv in runs if any("adapter" in a for a in argv) or name == "paper_lora_budgets_longbench"]
    assert runs
    essay = tmp_path / "essays.json"  # the RULER presets' essay file, named by the user
    essay.write_text("{}")
    for argv in runs:
        for point in points(argv):
            point = [f"bench.essay_path={essay}" if a.startswith("bench.essay_path=") else a for a in point]
            with without_file_checks():
                cfg = load_config(point)
            if not (tmp_path / cfg.method.adapter).exists():  # (points that share an adapter: the first)
                with pytest.raises(ConfigError, match=r"^method\.adapter='outputs/adapters/[\w/]+': not an adapter folder"):
                    load_config(point)  # before the adapter exists: one line naming it
                make_adapter(tmp_path / cfg.method.adapter, cfg.backbone.name, cfg.backbone.arch)
            cfg = load_config(point)
            check_backbone(cfg.method.adapter, cfg.backbone)
            assert cfg.method.adapter.startswith(f"outputs/adapters/{cfg.backbone.name}/")
            if cfg.method.name == "notebank":
                if R is not None:
                    assert cfg.method.replay_budget == R
                else:
                    assert cfg.method.adapter.endswith(f"notebank_r{cfg.method.replay_budget}")
