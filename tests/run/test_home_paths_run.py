"""The README's place for machine settings, `paths: {root: ~/memexp}` in local/default.yaml, puts
runs under the home folder, not into a literal `./~/memexp/` under the current folder."""

import subprocess

from helpers.memexp_process import ENV, TINY, command


def test_a_root_under_home_in_local_yaml_runs_there(tmp_path):
    home, work, conf = tmp_path / "home", tmp_path / "work", tmp_path / "conf" / "local"
    for folder in (home, work, conf):
        folder.mkdir(parents=True)
    (conf / "default.yaml").write_text("# @package _global_\npaths:\n  root: ~/memexp\n")
    result = subprocess.run(command("run", "--config-dir", str(conf.parent), *TINY), cwd=work,
                            env={**ENV, "HOME": str(home)}, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (records,) = (home / "memexp" / "outputs" / "runs").rglob("records.jsonl")
    assert len(records.read_text().splitlines()) == 3
    assert not list(work.iterdir())  # nothing written where the command was started
