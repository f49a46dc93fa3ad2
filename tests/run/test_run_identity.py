"""The run folder is named by what determines the results: content, not paths; versions, not luck."""

import json
import shutil

import pytest

from memexp.core.compose import load_config
from memexp.core.registry import BENCHES
from memexp.core.schema import ASSETS_DIR
from memexp.run.identity import hub_fingerprint, run_key

TINY = ASSETS_DIR / "tiny_gdn"


def key(*overrides):
    return run_key(load_config(["backbone=tiny_gdn", "method=plain", "bench=ruler", *overrides]))[0]


def copy_checkpoint(dst):
    shutil.copytree(TINY, dst)
    return dst


def flip_a_weight_byte(checkpoint):
    """New weights, same file size and safetensors header (what retraining the same recipe does)."""
    f = checkpoint / "model.safetensors"
    raw = bytearray(f.read_bytes())
    start = 8 + int.from_bytes(raw[:8], "little")
    raw[start + 100] ^= 0xFF
    f.write_bytes(bytes(raw))


def test_the_same_checkpoint_in_two_clones_gives_the_same_folder(tmp_path):
    a = copy_checkpoint(tmp_path / "clone_a" / "memexp" / "assets" / "tiny_gdn")
    b = copy_checkpoint(tmp_path / "elsewhere" / "b" / "tiny_gdn")
    assert key(f"backbone.pretrained={a}") == key(f"backbone.pretrained={b}")
    assert key(f"backbone.pretrained={a}") == key()  # the shipped one: the same files


def test_the_key_holds_no_install_path():
    ident = run_key(load_config(["backbone=tiny_gdn"]))[1]
    assert str(ASSETS_DIR) not in json.dumps(ident)


def test_new_weights_at_the_same_path_give_a_new_folder(tmp_path):
    ckpt = copy_checkpoint(tmp_path / "tiny_gdn")
    before = key(f"backbone.pretrained={ckpt}")
    flip_a_weight_byte(ckpt)
    assert key(f"backbone.pretrained={ckpt}") != before


def test_an_edited_data_file_gives_a_new_folder(tmp_path):
    essays = tmp_path / "essays.json"
    essays.write_text(json.dumps({"text": "One essay. " * 50}))
    before = key(f"bench.essay_path={essays}")
    moved = tmp_path / "moved" / "essays.json"
    moved.parent.mkdir()
    shutil.copy(essays, moved)
    assert key(f"bench.essay_path={moved}") == before  # same content elsewhere: same folder
    essays.write_text(json.dumps({"text": "Another essay. " * 50}))
    assert key(f"bench.essay_path={essays}") != before


def test_a_new_benchmark_version_gives_a_new_folder(monkeypatch):
    before = key()
    monkeypatch.setitem(BENCHES.get("ruler").meta, "version", BENCHES.get("ruler").meta["version"] + 1)
    assert key() != before


def test_what_only_watches_or_schedules_a_run_keeps_its_folder(tmp_path):
    assert key() == key("progress=false", "threads=1", "max_examples=2", f"output_dir={tmp_path}",
                        "wait_for_lock=true", "records_repair=true", "strict_data=true",
                        f"bench.cache_dir={tmp_path / 'cache'}")
    assert key() != key("bench.seed=7")


def test_hub_ids_without_a_local_snapshot_are_named_by_id_and_revision(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    assert hub_fingerprint("no-such-org/no-such-model", "abc123") == {
        "hub": "no-such-org/no-such-model", "revision": "abc123"}


@pytest.mark.parametrize("name", ["ruler", "longbench", "longbench_v2", "memoryagentbench", "quality", "longhealth"])
def test_every_benchmark_declares_its_version(name):
    assert isinstance(BENCHES.get(name).meta.get("version"), int)


def test_the_same_command_in_two_clones_at_different_paths_names_the_same_folder(tmp_path):
    """Two copies of the package (two clones, or a clone and an installed wheel): the shipped
    checkpoint, the configs and every asset path differ by location only."""
    import subprocess
    import sys

    from helpers.memexp_process import ENV, ROOT

    code = ("from memexp.core.compose import load_config; from memexp.run.records import run_folder; "
            "print(run_folder(load_config(['backbone=tiny_gdn', 'method=notebank', 'bench=ruler', "
            "'output_dir=runs'])))")
    folders = []
    for clone in ("a", "elsewhere/b"):
        shutil.copytree(ROOT / "memexp", tmp_path / clone / "memexp", ignore=shutil.ignore_patterns("__pycache__"))
        out = subprocess.run([sys.executable, "-c", code + "; import memexp; print(memexp.__file__)"],
                             env={**ENV, "PYTHONPATH": str(tmp_path / clone)}, cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        folder, package = out.stdout.split()
        assert package.startswith(str(tmp_path / clone))  # this clone's memexp ran
        folders.append(folder)
    assert folders[0] == folders[1]
