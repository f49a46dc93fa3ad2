"""One writer per run folder, corrupt records never dropped in silence, stale weights never resumed."""

import json
import shutil
import subprocess
import time

import pytest
from helpers.memexp_process import ENV, TINY, command, error_lines, memexp, memexp_here

from memexp.core.schema import ASSETS_DIR
from memexp.run.lock import RunLock, RunLockedError


def folders(out):
    return sorted(p.parent for p in out.rglob("config.yaml"))


def records(folder):
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def keys(recs):
    return [(r["example_id"], r["question_id"]) for r in recs]


def test_replaced_weights_at_the_same_path_are_never_resumed(tmp_path, capfd):
    ckpt = tmp_path / "tiny_gdn"
    shutil.copytree(ASSETS_DIR / "tiny_gdn", ckpt)
    args = [*TINY, "backbone=tiny_gdn", f"backbone.pretrained={ckpt}", "bench.num_samples=1",
            f"output_dir={tmp_path / 'runs'}"]
    first = memexp_here(capfd, "run", *args)
    assert first.returncode == 0, first.stderr
    f = ckpt / "model.safetensors"
    raw = bytearray(f.read_bytes())
    raw[8 + int.from_bytes(raw[:8], "little") + 7] ^= 0xFF  # new weights, same size and header
    f.write_bytes(bytes(raw))
    second = memexp_here(capfd, "run", *args)
    assert second.returncode == 0, second.stderr
    assert "(0 questions already recorded)" in second.stderr
    assert len(folders(tmp_path / "runs")) == 2


def test_a_held_folder_stops_a_second_process_with_one_line(tmp_path, capfd):
    out = tmp_path / "runs"
    first = memexp_here(capfd, "run", *TINY, f"output_dir={out}", "max_examples=1")
    assert first.returncode == 0, first.stderr
    (folder,) = folders(out)
    before = (folder / "records.jsonl").read_bytes()
    import os

    with RunLock(folder):
        blocked = memexp("run", *TINY, f"output_dir={out}")
    lines = error_lines(blocked.stderr)
    assert blocked.returncode == 1, blocked.stderr
    assert len(lines) == 1 and f"is in use by pid {os.getpid()}" in lines[0] and "wait_for_lock=true" in lines[0]
    assert "Traceback" not in blocked.stderr
    assert (folder / "records.jsonl").read_bytes() == before  # it wrote nothing


def test_two_processes_started_together_one_runs_the_other_stops(tmp_path):
    out = tmp_path / "runs"
    # 100 examples (about 3 s): the winner still holds the folder when the other arrives; 3 took
    # less time than two processes' starts can differ by on a loaded machine
    args = [*TINY, "bench.num_samples=100", f"output_dir={out}"]
    procs = [subprocess.Popen(command("run", *args), env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    loser = next(err for code, err in results if code == 1)
    assert len(error_lines(loser)) == 1 and "is in use by pid" in loser
    (folder,) = folders(out)
    recs = records(folder)
    assert len(recs) == 100 and len(set(keys(recs))) == 100  # no duplicate record


def test_a_process_that_finds_the_lock_before_its_holder_wrote_it_still_names_the_holder(tmp_path):
    """Two processes started together: the loser can try the lock in the microseconds between the
    winner's flock and its write of who it is (CI, 2026-12-05: "in use by another process")."""
    import fcntl
    import os
    import threading

    path = tmp_path / "run.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, not yet written
    info = json.dumps({"pid": 4242, "host": "node7", "started": "2026-12-05T00:00:00+0000"})
    writer = threading.Timer(0.3, lambda: os.pwrite(fd, (info + "\n").encode(), 0))
    writer.start()
    try:
        with pytest.raises(RunLockedError, match="is in use by pid 4242 on node7"):
            RunLock(tmp_path).acquire()
    finally:
        writer.join()
        os.close(fd)


def test_wait_for_lock_waits_then_resumes(tmp_path, capfd):
    out = tmp_path / "runs"
    first = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
    assert first.returncode == 0, first.stderr
    (folder,) = folders(out)
    lock = RunLock(folder)
    lock.acquire()
    waiting = subprocess.Popen(command("run", *TINY, f"output_dir={out}", "wait_for_lock=true"), env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # long enough to reach the lock (imports take a few seconds)
    assert waiting.poll() is None, waiting.stderr.read()
    lock.release()
    assert waiting.wait(timeout=300) == 0
    assert "(3 questions already recorded)" in waiting.stderr.read()


def test_a_corrupt_middle_line_stops_the_run_and_repair_keeps_every_good_record(tmp_path, capfd):
    out = tmp_path / "runs"
    first = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
    assert first.returncode == 0, first.stderr
    (folder,) = folders(out)
    path = folder / "records.jsonl"
    good = path.read_text().splitlines(keepends=True)
    path.write_text(good[0] + '{"example_id": "oops"\n' + good[1] + good[2])

    stopped = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
    lines = error_lines(stopped.stderr)
    assert stopped.returncode == 1 and len(lines) == 1, stopped.stderr
    assert f"{path}:2: not a record" in lines[0] and "records_repair=true" in lines[0]
    assert path.read_text() == good[0] + '{"example_id": "oops"\n' + good[1] + good[2]

    repaired = memexp_here(capfd, "run", *TINY, f"output_dir={out}", "records_repair=true")
    assert repaired.returncode == 0, repaired.stderr
    assert "(3 questions already recorded)" in repaired.stderr  # nothing recomputed, nothing lost
    assert path.read_text() == "".join(good)
    assert (folder / "records.bad.jsonl").read_text() == '{"example_id": "oops"\n'


def test_report_shows_a_run_killed_before_its_first_summary_as_incomplete(tmp_path, capsys):
    """SIGKILL before the first summary.json: the report lists the recorded questions, marked
    incomplete, instead of leaving the run out."""
    from memexp.cli.main import main

    folder = tmp_path / "runs" / "ruler" / "tiny_gdn_random" / "plain" / "abc"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("backbone: {name: tiny_gdn_random}\nmethod: {name: plain}\n"
                                        "bench: {name: ruler}\n")
    rec = {"task": "niah_single_1", "length": 512, "question_id": "0"}
    (folder / "records.jsonl").write_text("".join(json.dumps({**rec, "example_id": str(i), "score": s}) + "\n"
                                                  for i, s in enumerate([100.0, 0.0])))
    assert main(["report", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("tiny_gdn_random / plain"))
    assert row.split() == ["tiny_gdn_random", "/", "plain", "(incomplete)", "50.0", "(n=2)", "50.0", "(n=2)"]
    assert "no summary.json" in out
