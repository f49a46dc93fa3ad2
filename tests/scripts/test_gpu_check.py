"""scripts/check/gpu_check.py: stops at once without CUDA; with CUDA (faked here) every step's result,
including a timed-out one, lands in one report under the total budget."""

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _gone(pid: int) -> bool:
    """The process has exited (absent, or a zombie waiting for a reaper that is not us)."""
    time.sleep(0.2)
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_without_cuda_it_exits_2_with_one_line_and_writes_nothing(tmp_path):
    default_dir = ROOT / "outputs" / "gpu_check"
    before = sorted(default_dir.iterdir()) if default_dir.exists() else None
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).splitlines()
    assert lines == ["gpu-check: no CUDA device visible to torch on this machine; nothing checked, nothing written"]
    assert not out.exists() and list(tmp_path.iterdir()) == []
    after = sorted(default_dir.iterdir()) if default_dir.exists() else None
    assert after == before


def test_steps_report_figures_and_a_timeout_within_the_budget(tmp_path, monkeypatch, capsys):
    gc = _module()
    py = sys.executable
    steps = [
        gc.Step("test-gpu", [py, "-c", "print('collected 3 items'); print('== 2 passed, 1 skipped in 0.1s ==')"], 20),
        # a child that outlives its parent must die with it: the whole process group is killed
        gc.Step("bench: slow", [py, "-c", "import subprocess, sys, time; print('figure 1.23', flush=True); "
                                          "open(sys.argv[1], 'w').write(str(subprocess.Popen(['sleep', '60']).pid)); "
                                          "time.sleep(60)", str(tmp_path / "child.pid")], 6),
        gc.Step("bench: fast", [py, "-c", "print('| ratio | 0.99 |')"]),
    ]
    monkeypatch.setattr(gc, "cuda_device", lambda: "Fake GPU")
    monkeypatch.setattr(gc, "plan", lambda work: steps)
    t0 = time.monotonic()
    rc = gc.main(["--budget", "12", "--out", str(tmp_path)])
    assert time.monotonic() - t0 < 30
    assert rc == 1
    child = int((tmp_path / "child.pid").read_text())
    [path] = list(tmp_path.glob("*.md"))
    assert path.name == "report.md"
    text = path.read_text()
    assert "- GPU: Fake GPU" in text
    assert "**test-gpu summary:** 2 passed, 1 skipped in 0.1s" in text
    assert "| bench: slow | TIMED OUT after" in text and "figure 1.23" in text
    assert "| bench: fast | ok |" in text and "| ratio | 0.99 |" in text
    assert text in capsys.readouterr().out
    assert _gone(child)
