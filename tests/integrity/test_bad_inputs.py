"""Every failure a user can cause: one line naming the field (or file) and the fix, the documented exit
code (2: configuration, 1: runtime, 130: Ctrl-C), no traceback, nothing a resume would trust."""

import json
import shlex
import signal
import subprocess
import time

import pytest
from memexp_cli import ENV, TINY, command, error_lines, memexp

from memexp.app import load_config
from memexp.benchmarks import datasets, skipped_rows
from memexp.config import ASSETS_DIR
from memexp.records import format_table, run_folder, summarize

# (case id, arguments after `python -m memexp`, exit code, text the one line must hold)
BAD = [
    ("read-only output", ["run", *TINY, "output_dir=/sys/memexp-out"], 2, "output_dir=/sys/memexp-out: cannot write"),
    ("output under a file", ["run", *TINY, "output_dir=/dev/null/runs"], 2, "output_dir=/dev/null/runs: cannot write"),
    ("cache not writable", ["run", *TINY, "bench.cache_dir=/sys/memexp-cache"], 2, "bench.cache_dir=/sys/memexp-cache"),
    ("triton on cpu", ["run", *TINY, "kernels=triton"], 2, "kernels=triton: the Triton kernels need a CUDA GPU"),
    ("float16 on cpu", ["run", *TINY, "backbone.dtype=float16"], 2, "backbone.dtype=float16: not supported on the CPU"),
    ("address_dim too wide", ["run", *TINY, "method=notebank", "method.address_dim=64", "method.chunk_size=128"], 2,
     "method.address_dim=64: larger than the backbone's query width 32"),
    ("chunk longer than every context", ["run", *TINY, "method=notebank", "method.chunk_size=4096"], 2,
     "method.chunk_size=4096: longer than every context of this run (bench.lengths: at most 512 tokens)"),
    ("span longer than every context", ["run", *TINY, "method=notebank", "method.chunk_size=128",
                                        "method.span_budget=1000"], 2, "method.span_budget=1000: longer than every"),
    ("window longer than every context", ["run", *TINY, "method=notebank", "method.chunk_size=128",
                                          "method.window=600"], 2, "method.window=600: longer than every"),
    ("heads do not divide width", ["run", *TINY, "backbone=tiny_llama_random",
                                   "backbone.model.num_attention_heads=3"], 2,
     "backbone.model.num_attention_heads=3: does not divide backbone.model.hidden_size=64"),
    ("kv heads do not divide heads", ["run", *TINY, "backbone=tiny_llama_random",
                                      "backbone.model.num_key_value_heads=3"], 2,
     "backbone.model.num_key_value_heads=3: does not divide"),
    ("launcher without -m", ["run", *TINY, "hydra/launcher=slurm"], 2,
     "hydra/launcher=slurm: a launcher runs the jobs of a sweep; add -m (--multirun)"),
    ("scalar for a list", ["run", *TINY[:4], "bench.lengths=4096"], 2, "write bench.lengths=[4096]"),
    ("negative cost length", ["cost", "backbone=tiny_gdn_random", "method=plain", "length=-5"], 2,
     "length=-5: must be a number >= 1"),
    ("negative question tokens", ["cost", "backbone=tiny_gdn_random", "method=plain", "question_tokens=-1"], 2,
     "question_tokens=-1"),
    ("latency zero repeats", ["latency", "backbone=tiny_gdn_random", "repeats=0"], 2, "repeats=0: must be an integer"),
    ("not a bool", ["run", *TINY, "strict_data=maybe"], 2, "strict_data='maybe': expected bool"),
    ("train into the assets", ["train", "recipe=tiny_gdn", f"output={ASSETS_DIR / 'tiny_gdn'}"], 2,
     "recipe.replace_assets=true"),
    ("ship Titan modules nowhere", ["train", "recipe=titan_llama", "replace_assets=true"], 2,
     "recipe.replace_assets=true: name recipe.asset"),
    # found trying every field (beyond the list)
    ("unknown top-level field", ["run", *TINY, "foo=1"], 2, "foo: unknown field; allowed top-level fields are"),
    ("unknown paths field", ["run", *TINY, "paths.foo=1"], 2, "paths.foo: unknown field; allowed paths fields"),
    ("scalar for a list given last", ["run", *TINY, "bench.lengths=4096"], 2, "write bench.lengths=[4096]"),
    ("list without brackets", ["run", *TINY, "bench.lengths=512,1024"], 2,
     "add -m (--multirun) to run each value, or write bench.lengths=[512,1024] for a list"),
    ("empty output_dir", ["run", *TINY, "output_dir="], 2, "output_dir is empty"),
    ("empty paths.root", ["run", *TINY, "paths.root="], 2, "paths.root is empty"),
    ("random-init size below 1", ["run", *TINY, "backbone.model.hidden_size=-1"], 2,
     "backbone.model.hidden_size=-1: must be an integer >= 1"),
    ("random-init without layers", ["run", *TINY, "backbone.model.num_hidden_layers=0"], 2,
     "backbone.model.num_hidden_layers=0: must be an integer >= 1"),
    ("a data file that is not there", ["run", *TINY, "bench.cwe_words_path=/no/such/words.json"], 2,
     "bench.cwe_words_path='/no/such/words.json': no such file or directory"),
    ("a data folder that is not there", ["run", "backbone=tiny_gdn_random", "method=plain", "bench=longbench",
                                         "bench.data_path=/no/such/longbench"], 2,
     "bench.data_path='/no/such/longbench': no such file or directory"),
    ("revision of a local checkpoint", ["run", *TINY, "backbone=tiny_gdn", "backbone.revision=main"], 2,
     "backbone.revision='main': only a hub id has revisions"),
    ("metric the summary has not", ["run", *TINY, "metric=accuracy"], 2, "metric=accuracy: not a number of the summary"),
    ("metric at a length the run has not", ["run", *TINY, "metric=by_length/4096"], 2,
     "metric=by_length/4096: '4096' is not one of this run's bench.lengths (512)"),
    ("fractional cost length", ["cost", "backbone=tiny_gdn_random", "method=plain", "length=1.5"], 2,
     "length='1.5': must be an integer"),
    ("mistyped cost flag", ["cost", "backbone=tiny_gdn_random", "method=plain", "--jsn"], 2,
     "--jsn: not an option of cost (its options: --json"),
    ("latency lengths not numbers", ["latency", "backbone=tiny_gdn_random", "lengths=abc"], 2,
     "lengths='abc': must be integers separated by commas"),
    ("latency triton on cpu", ["latency", "backbone=tiny_gdn_random", "kernels=triton"], 2,
     "kernels=triton: the Triton kernels need a CUDA GPU"),
    ("data cache not writable", ["data", "bench=longbench", "bench.cache_dir=/sys/memexp-cache"], 2,
     "bench.cache_dir=/sys/memexp-cache: cannot write there"),
    ("ls with an argument", ["ls", "backbone"], 2, "ls takes no arguments"),
    ("report of a missing folder", ["report", "/no/such/runs"], 2, "report: /no/such/runs: no such folder"),
    ("train zero threads", ["train", "threads=0"], 2, "recipe.threads=0: must be an integer >= 1"),
    ("train size below 1", ["train", "model.hidden_size=-3"], 2, "recipe.model.hidden_size=-3: must be an integer"),
    ("train from a missing checkpoint", ["train", "init_from=/no/such/ckpt"], 2,
     "recipe.init_from='/no/such/ckpt': no such checkpoint folder"),
    ("train output not writable", ["train", "output=/sys/memexp-train"], 2,
     "recipe.output=/sys/memexp-train: cannot write there"),
]


@pytest.mark.parametrize("args,code,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_its_exit_code(tmp_path, args, code, expected):
    out = tmp_path / "runs"
    if args[0] == "run" and not any(a.startswith("output_dir=") for a in args):
        args = [*args, f"output_dir={out}"]
    result = memexp(*args, cwd=tmp_path if args[0] in ("train", "data") else None)
    lines = error_lines(result.stderr)
    assert result.returncode == code, result.stderr[-2000:]
    assert len(lines) == 1 and expected in lines[0], result.stderr[-2000:]
    assert lines[0].startswith("memexp: ") and "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("records.jsonl")) and not list(tmp_path.rglob("summary.json*"))


def test_a_full_disk_ends_in_one_line_and_leaves_no_summary(tmp_path):
    out = tmp_path / "runs"
    folder = run_folder(load_config([*TINY, f"output_dir={out}"]))
    folder.mkdir(parents=True)
    (folder / "summary.json.tmp").symlink_to("/dev/full")  # every write of the summary: ENOSPC
    result = memexp("run", *TINY, f"output_dir={out}")
    lines = error_lines(result.stderr)
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and "No space left on device" in lines[0] and "output_dir" in lines[0], result.stderr
    assert not (folder / "summary.json.tmp").exists() and not (folder / "summary.json.tmp").is_symlink()
    assert len((folder / "records.jsonl").read_text().splitlines()) == 3  # the records themselves are kept
    # the first failed write removed the stand-in for the full disk, so the failure path's summary
    # may land: then it describes exactly the records on disk
    if (folder / "summary.json").exists():
        assert json.loads((folder / "summary.json").read_text())["num_questions"] == 3


def test_ctrl_c_says_what_was_recorded_and_how_to_resume(tmp_path):
    out = tmp_path / "runs"
    args = [*TINY, "bench.num_samples=40", f"output_dir={out}"]
    # a child inherits an ignored SIGINT (Python then never raises KeyboardInterrupt): whatever the
    # test process's own disposition, the run starts as a terminal user's would, with the default
    proc = subprocess.Popen(command("run", *args), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and not any(p.stat().st_size for p in out.rglob("records.jsonl")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    lines = error_lines(stderr)
    assert proc.returncode == 130, stderr
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    (records,) = out.rglob("records.jsonl")
    n = len(records.read_text().splitlines())
    assert f"interrupted with {n} questions recorded in {records.parent}" in lines[0]
    assert lines[0].endswith("resume with: " + shlex.join(["python", "-m", "memexp", "run", *args]))
    summary = json.loads((records.parent / "summary.json").read_text())
    assert summary["complete"] is False and summary["num_questions"] == n


def test_max_examples_is_not_complete(tmp_path):
    out = tmp_path / "runs"
    short = memexp("run", *TINY, f"output_dir={out}", "max_examples=2")
    assert short.returncode == 0, short.stderr
    (path,) = out.rglob("summary.json")
    s = json.loads(path.read_text())
    assert (s["complete"], s["num_examples"], s["expected_examples"], s["num_questions"]) == (False, 2, 3, 2)
    assert "incomplete: 2 examples of the benchmark's 3 read" in short.stdout
    whole = memexp("run", *TINY, f"output_dir={out}")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(path.read_text())["complete"] is True


def _rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": \n\n{"b": 2}\n')
    return path


def test_skipped_rows_are_counted_with_their_1_based_line(tmp_path):
    path = _rows(tmp_path)
    with skipped_rows.collecting() as skipped:
        rows = datasets.valid_rows(datasets.read_rows(path), {"a": int})
    assert [r.data for r in rows] == [{"a": 1}]
    summary = skipped.summary()
    assert summary["total"] == 2
    assert [(r["file"], r["row"]) for r in summary["by_reason"]["not valid JSON"]["rows"]] == [(str(path), 2)]
    assert [(r["file"], r["row"]) for r in summary["by_reason"]["missing field 'a'"]["rows"]] == [(str(path), 4)]
    table = format_table({**summarize([{"example_id": "e", "question_id": "q", "task": "t", "length": 1,
                                        "score": 100.0}]), "skipped_rows": summary})
    assert "skipped data rows: 2 (missing field 'a' (1); not valid JSON (1))" in table


def test_strict_data_turns_a_skipped_row_into_an_error(tmp_path, caplog):
    path = _rows(tmp_path)
    with skipped_rows.collecting(strict=True), pytest.raises(skipped_rows.StrictDataError) as err:
        datasets.read_rows(path)
    assert str(err.value).startswith(f"{path} row 2: not valid JSON") and "strict_data" in str(err.value)
    assert not skipped_rows._active  # the collector left no state behind
    assert "(skipped)" not in caplog.text  # the row stopped the run: no line says it was skipped


def test_slurm_without_slurm_is_one_line(tmp_path):
    """A SLURM sweep from a machine without sbatch: one line, before anything is written (PATH
    without sbatch, whether or not this machine has SLURM installed)."""
    result = subprocess.run(command("run", "-m", *TINY, "hydra/launcher=slurm", f"paths.root={tmp_path}"),
                            env={**ENV, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    lines = error_lines(result.stderr)
    assert result.returncode == 2, result.stderr[-2000:]
    assert lines == ["memexp: hydra/launcher=slurm: SLURM is not available here (no sbatch on PATH); run from a "
                     "SLURM login node, or use hydra/launcher=processes for local parallel jobs"], result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists()
