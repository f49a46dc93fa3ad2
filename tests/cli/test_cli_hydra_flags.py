"""`memexp run` takes Hydra's own flags (the forms Hydra documents, space-separated values included),
user config folders and sweep syntax; a wrong value in any of them ends in one line naming the
field, before any model loads."""

import textwrap

import pytest
import yaml
from helpers.memexp_process import memexp_printed

import memexp.run.runner
from memexp.cli.app import preflight

cli = memexp_printed  # (exit code, stdout, stderr) of `python -m memexp <argv>`, in this process


@pytest.fixture
def user_conf(tmp_path):
    """A lab's own config folder: a backbone, a primary config and a machine-local file."""
    d = tmp_path / "my_conf"
    (d / "backbone").mkdir(parents=True)
    (d / "local").mkdir()
    (d / "backbone" / "my_gdn.yaml").write_text(textwrap.dedent("""\
        defaults:
          - /schema/backbone@_here_
          - _self_
        name: my_gdn
        arch: gdn
        pretrained: ${memexp_asset:tiny_gdn}
        prefill_chunk: 512
        """))
    (d / "backbone" / "my_bad.yaml").write_text("defaults:\n  - /schema/backbone@_here_\n  - _self_\n"
                                                "name: my_bad\nmax_len: 2048\n")
    (d / "lab.yaml").write_text("defaults:\n  - config\n  - override method: plain\n  - _self_\nmax_examples: 3\n")
    (d / "local" / "default.yaml").write_text(f"# @package _global_\npaths:\n  root: {tmp_path / 'scratch'}\n")
    return d


def job(stdout):
    return yaml.safe_load(stdout)


def test_cfg_job_with_a_space_prints_the_composed_run():
    rc, out, _ = cli(["run", "--cfg", "job", "method=plain", "max_examples=2"])
    assert rc == 0
    cfg = job(out)
    assert cfg["method"]["name"] == "plain" and cfg["max_examples"] == 2 and "hydra" not in cfg


def test_cfg_hydra_and_info_defaults():
    rc, out, _ = cli(["run", "--cfg", "hydra"])
    assert rc == 0 and job(out)["hydra"]["sweep"]["dir"].startswith("${memexp_path:${paths.multirun}}/")
    rc, out, _ = cli(["run", "--info", "defaults", "method=jrt"])
    assert rc == 0
    assert "method/jrt" in out and "paths/default" in out and "method/notebank " not in out


def test_config_dir_adds_a_backbone_and_its_local_config(user_conf, tmp_path):
    for flag in (["--config-dir", str(user_conf)], ["-cd", str(user_conf)], [f"hydra.searchpath=[file://{user_conf}]"]):
        rc, out, err = cli(["run", *flag, "backbone=my_gdn", "--cfg", "job", "--resolve"])
        assert rc == 0, err
        cfg = job(out)
        assert (cfg["backbone"]["name"], cfg["backbone"]["prefill_chunk"]) == ("my_gdn", 512)
        # local/default.yaml (machine-specific) moves every output under its root
        assert cfg["paths"]["root"] == str(tmp_path / "scratch")
        assert cfg["output_dir"] == f"{tmp_path / 'scratch'}/outputs/runs"


def test_config_name_picks_a_users_primary_config(user_conf):
    rc, out, err = cli(["run", "-cd", str(user_conf), "-cn", "lab", "--cfg", "job"])
    assert rc == 0, err
    cfg = job(out)
    assert cfg["method"]["name"] == "plain" and cfg["max_examples"] == 3
    assert cfg["backbone"]["name"] == "tiny_gdn_words"  # memexp's default, inherited from `config`


def test_shell_completion_installs_for_memexp_and_completes_options(monkeypatch):
    rc, out, _ = cli(["run", "-sc", "install=bash"])
    assert rc == 0 and out.rstrip().endswith("-F hydra_bash_completion memexp")
    # what the installed script runs on <TAB>: the app without a command, the line in COMP_LINE
    monkeypatch.setenv("COMP_LINE", "memexp run backbone=tiny_gdn_r")
    rc, out, _ = cli(["-sc", "query=bash"])
    assert rc == 0 and out.split() == ["backbone=tiny_gdn_random"]


def test_range_and_choice_expand_to_every_job():
    jobs = preflight(["method.replay_budget=range(1,3)", "method.span_budget=choice(16,32)"], multirun=True)
    assert sorted((j.method.replay_budget, j.method.span_budget) for j in jobs) == [(1, 16), (1, 32), (2, 16), (2, 32)]
    jobs = preflight(["method=plain,jrt"], multirun=True)
    assert [j.method.name for j in jobs] == ["plain", "jrt"]


def test_optuna_sweep_is_checked_with_a_value_of_each_swept_field():
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    (cfg,) = preflight(["hparams_search=notebank_optuna", "method.replay_budget=int(interval(3, 6))"], multirun=False)
    # the interval's start, and the first of the config's choice(16, 32, 64)
    assert (cfg.method.replay_budget, cfg.method.span_budget) == (3, 16)


BAD = [
    (["--cfg", "job", "backbone=nope"], "backbone=nope: allowed values are "),
    (["--info", "defaults", "bench=rulr"], "bench=rulr: did you mean ruler?"),
    (["method.replay_budget=abc"], "method.replay_budget: Value 'abc' of type 'str' could not be converted to Integer"),
    (["-m", "method=plain,notebank", "kernels=cuda"], "kernels='cuda': allowed values are auto, triton, torch"),
    (["-m", "method.replay_budget=range(1,3)", "bench.nope=1"], "bench.nope: unknown field; allowed fields are "),
    (["-m", "method.span_budget=choice(16,x)"], "method.span_budget: Value 'x' of type 'str' could not be converted"),
    (["hparams_search=notebank_optuna", "method.span_budget=interval(a,b)"], "method.span_budget=interval(a,b)"),
    (["method=plain,jrt"], "method=plain,jrt: a sweep; add -m (--multirun) to run each value"),
    (["-cn", "nothere"], "Cannot find primary config 'nothere'"),
    (["--config-dir", "/no/such/folder"], "--config-dir /no/such/folder: no such folder"),
    (["USERCONF", "backbone=my_bad"], "backbone.max_len: unknown field of BackboneConfig (set in backbone/my_bad.yaml)"),
    (["-m", "hydra/launcher=nope", "method=plain,jrt"], "hydra/launcher=nope: allowed values are basic, joblib, local, processes, slurm, slurm_local"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_end_in_one_line_before_any_model_loads(argv, message, user_conf, monkeypatch):
    if "hparams_search=notebank_optuna" in argv:
        pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")

    def no_run(*a, **k):
        raise AssertionError("a run started")

    monkeypatch.setattr(memexp.run.runner, "run", no_run)
    argv = [a for x in argv for a in (["--config-dir", str(user_conf)] if x == "USERCONF" else [x])]
    rc, out, err = cli(["run", *argv])
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memexp: ") and message in lines[0], err
