"""Every failure a user can cause: one line naming the field (or file) and the fix, the documented exit
code (2: configuration, 1: runtime, 130: Ctrl-C), no traceback, nothing a resume would trust.

The cases run the command line's own `main` in this process (`memexp_here`: what it prints at the
descriptors, what it returns; an exception it lets out fails the test); Ctrl-C, which is about the
process and its signal handling, runs `python -m memexp` in its own."""

import functools
import json
import math
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers.memexp_process import ENV, TINY, command, error_lines, memexp, memexp_here

from memexp.benchmarks import datasets, skipped_rows
from memexp.core.compose import load_config
from memexp.core.schema import ASSETS_DIR
from memexp.run.records import format_table, run_folder, summarize

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
    # issue 45: never a silent wrong result
    ("a task listed twice", ["run", *TINY, "bench.tasks=[niah_single_1,niah_single_1]"], 2,
     "bench.tasks=[niah_single_1, niah_single_1]: niah_single_1 is listed twice; list each value once"),
    ("a length listed twice", ["run", *TINY, "bench.lengths=[512,1024,512]"], 2,
     "bench.lengths=[512, 1024, 512]: 512 is listed twice"),
    ("an unset variable in a path", ["run", *TINY, "output_dir=$MEMEXP_NO_SUCH_VAR/runs"], 2,
     "output_dir='$MEMEXP_NO_SUCH_VAR/runs': the environment variable MEMEXP_NO_SUCH_VAR is not set"),
    ("a YAML syntax error in a user's file", ["run", "--config-dir", "{confs}/bad_yaml", *TINY], 2,
     "{confs}/bad_yaml/local/default.yaml:3:9: not valid YAML (while parsing a flow sequence; expected ','"),
    ("an experiment without @package _global_", ["run", "--config-dir", "{confs}/no_package", *TINY,
                                                  "experiment=mine"], 2,
     "experiment: experiment/mine.yaml does not start with `# @package _global_`; add it"),
    ("an experiment without @package _global_ nor defaults", ["run", "--config-dir", "{confs}/no_package_fields",
                                                                *TINY, "experiment=mine"], 2,
     "experiment: the experiment file does not start with `# @package _global_`"),
    ("a wrong type in a user's YAML", ["run", "--config-dir", "{confs}/wrong_type", *TINY, "backbone=mine"], 2,
     "backbone.prefill_chunk: Value 'abc' of type 'str' could not be converted to Integer (set in backbone/mine.yaml)"),
    ("an override the lexer refuses", ["run", *TINY, "bench.lengths=[4096"], 2,
     "bench.lengths=[4096: not a valid override (no viable alternative at input '[4096')"),
    ("output_dir that reads as a float", ["run", *TINY, "output_dir=1e3"], 2,
     "output_dir=1000.0: reads as a number, not a folder name; quote it"),
    ("replay budget beyond every note", ["run", *TINY, "method=notebank", "method.chunk_size=128",
                                         "method.replay_budget=1000"], 2,
     "method.replay_budget=1000: more notes than this run can write (bench.lengths: at most 512 tokens, 4 chunks"),
    ("report over a truncated summary", ["report", "{confs}/report"], 1,
     "report: {confs}/report/ruler/b/plain/bad/summary.json: unreadable (Unterminated string"),
]
# user config folders the cases above name as {confs}/<folder>
USER_CONFIGS = {
    "bad_yaml/local/default.yaml": "# @package _global_\npaths:\n  root: [unclosed\n",
    "no_package/experiment/mine.yaml": "defaults:\n  - override /method: plain\nbench:\n  num_samples: 2\n",
    "no_package_fields/experiment/mine.yaml": "bench:\n  num_samples: 2\n",
    "wrong_type/backbone/mine.yaml": "defaults:\n  - tiny_gdn_random\n  - _self_\nprefill_chunk: abc\n",
    # two run folders, one with a summary cut short: the other's table is printed, exit 1
    "report/ruler/b/plain/good/config.yaml": "bench: {name: ruler}\nbackbone: {name: b}\nmethod: {name: plain}\n",
    "report/ruler/b/plain/good/summary.json": '{"scores": {"t": {"512": 37.5}}, "by_length": {"512": 37.5}, '
                                              '"by_task": {"t": 37.5}, "overall": 37.5, "num_questions": 2}\n',
    "report/ruler/b/plain/bad/config.yaml": "bench: {name: ruler}\nbackbone: {name: b}\nmethod: {name: plain}\n",
    "report/ruler/b/plain/bad/summary.json": '{"scores": {"t',
}


@pytest.mark.parametrize("args,code,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_its_exit_code(tmp_path, capfd, args, code, expected):
    out = tmp_path / "runs"
    confs = tmp_path / "confs"
    for name, text in USER_CONFIGS.items():
        if not any(a.startswith("{confs}/" + name.split("/")[0]) for a in args):
            continue  # only the folder this case names: the others hold summaries the checks below refuse
        (confs / name).parent.mkdir(parents=True, exist_ok=True)
        (confs / name).write_text(text)
    args, expected = [a.replace("{confs}", str(confs)) for a in args], expected.replace("{confs}", str(confs))
    if args[0] == "run" and not any(a.startswith("output_dir=") for a in args):
        args = [*args, f"output_dir={out}"]
    result = memexp_here(capfd, *args, cwd=tmp_path if args[0] in ("train", "data") else None)
    lines = error_lines(result.stderr)
    assert result.returncode == code, result.stderr[-2000:]
    assert len(lines) == 1 and expected in lines[0], result.stderr[-2000:]
    assert lines[0].startswith("memexp: ") and "Traceback" not in result.stderr
    if args[0] == "report" and confs.is_dir():  # the folders it reads hold summaries; the readable one is reported
        assert "b / plain    37.5" in result.stdout, result.stdout
        return
    assert not list(tmp_path.rglob("records.jsonl")) and not list(tmp_path.rglob("summary.json*"))
    if code == 2:  # refused before anything is written: no run folder left behind (issue 45)
        assert not list(tmp_path.rglob("provenance.json")) and not list(tmp_path.rglob("config.yaml")), \
            "a run folder was created"


# a record line whose fields are the wrong type: read like a corrupt line (issue 45)
BAD_RECORDS = [
    ("score a string", {"score": "abc"}, 'score is "abc", not int or float'),
    ("score null", {"score": None}, "score is null, not int or float"),
    ("score true", {"score": True}, "score is true, not int or float"),
    ("score out of range", {"score": 1e9}, "score is 1000000000.0, not a finite number in [0, 100]"),
    ("score NaN", {"score": math.nan}, "score is nan, not a finite number in [0, 100]"),
    ("task a list", {"task": ["niah_single_1"]}, 'task is ["niah_single_1"], not str'),
    ("length a float", {"length": 512.5}, "length is 512.5, not int or str"),
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "runs"
    result = memexp("run", *TINY, f"output_dir={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def _copy_with_bad_lines(finished_run, out, changes):
    """The finished run's folder under `out`, its records' lines changed by `changes` (line 1 first)."""
    shutil.copytree(finished_run, out)
    (records,) = out.rglob("records.jsonl")
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    for line, change in zip(lines, changes):
        line.update(change)
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return records


@pytest.mark.parametrize("change,expected", [b[1:] for b in BAD_RECORDS], ids=[b[0] for b in BAD_RECORDS])
def test_a_record_of_the_wrong_type_stops_the_resume_naming_its_line(finished_run, tmp_path, capfd, change, expected):
    out = tmp_path / "runs"
    records = _copy_with_bad_lines(finished_run, out, [{}, change])
    result = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
    lines = error_lines(result.stderr)
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[0].startswith(f"memexp: {records}:2: not a record (") and expected in lines[0], lines[0]
    assert "records_repair=true" in lines[0]


def test_records_repair_moves_records_of_the_wrong_type_and_reruns_them(finished_run, tmp_path, capfd):
    out = tmp_path / "runs"
    records = _copy_with_bad_lines(finished_run, out, [{"score": "abc"}, {"score": math.nan}, {"task": [1]}])
    result = memexp_here(capfd, "run", *TINY, f"output_dir={out}", "records_repair=true")
    assert result.returncode == 0, result.stderr[-2000:]
    assert len((records.parent / "records.bad.jsonl").read_text().splitlines()) == 3
    kept = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(kept) == 3 and all(isinstance(r["score"], float) and 0 <= r["score"] <= 100 for r in kept)
    text = (records.parent / "summary.json").read_text()
    assert "NaN" not in text and json.loads(text)["complete"] is True


def test_a_full_disk_ends_in_one_line_and_leaves_no_summary(tmp_path, capfd):
    out = tmp_path / "runs"
    folder = run_folder(load_config([*TINY, f"output_dir={out}"]))
    folder.mkdir(parents=True)
    (folder / "summary.json.tmp").symlink_to("/dev/full")  # every write of the summary: ENOSPC
    result = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
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
    # the partial summary describes the records on disk, even when Ctrl-C fell between a record's
    # write and the runner's count of it; only a run whose first write the interrupt took back has none
    if n == 0:
        assert not (records.parent / "summary.json").exists()
    else:
        summary = json.loads((records.parent / "summary.json").read_text())
        assert summary["complete"] is False and summary["num_questions"] == n


# Ctrl-C at 10 instants spread over a run's first 3 seconds (imports, composition, model loading):
# exit 130, one line. The interpreter's own start (site, .pth files), before memexp's first line
# runs, is Python's: the instants begin after 1.5 times that start as measured here.
FRACTIONS = [i / 9 for i in range(10)]


@functools.cache
def _python_start() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=ENV, check=True)
    return time.perf_counter() - t0


def _interrupted(tmp_path, wait):
    out = tmp_path / "runs"
    # 200 examples: the run is still going at the last instant (it is interrupted, so they cost nothing)
    args = [*TINY, "bench.num_samples=200", f"output_dir={out}"]
    proc = subprocess.Popen(command("run", *args), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    before = wait(proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, before + stderr


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_ctrl_c_at_any_instant_of_the_start_is_one_line_and_130(tmp_path, fraction):
    start = 1.5 * _python_start()
    instant = start + fraction * max(3.0 - start, 0.0)
    code, stderr = _interrupted(tmp_path, lambda proc: time.sleep(instant) or "")
    lines = error_lines(stderr)
    assert code == 130 and len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert lines[0].startswith("memexp: interrupted"), lines[0]


def test_ctrl_c_as_the_run_folder_opens(tmp_path):
    """Inside the run's folder, before its first record: the line says so and how to resume."""
    code, stderr = _interrupted(tmp_path, lambda proc: proc.stderr.readline())
    lines = error_lines(stderr)
    assert code == 130 and len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert lines[0].startswith("memexp: interrupted with 0 questions recorded in ") and "resume with:" in lines[0]


def test_ctrl_c_inside_an_exec_still_exits_130(tmp_path):
    """`python -m memexp`'s exit code after an interrupt memexp handled, when the interrupt landed
    inside code exec() ran from a string (CPython then remembers it as unhandled and `-m` ends by
    SIGINT: exit -2; CI, 2026-12-05). The interrupt is raised there on purpose: memexp's own
    `__main__` runs, as `-m` runs it, with `run` replaced by a command that is interrupted so."""
    (tmp_path / "interrupted_in_exec").mkdir()
    (tmp_path / "interrupted_in_exec" / "__main__.py").write_text(
        "import runpy\n"
        "import memexp.cli.main\n"
        "def run(argv):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "memexp.cli.main.COMMANDS['run'] = run\n"
        "runpy.run_module('memexp', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.run([sys.executable, "-m", "interrupted_in_exec", "run"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (130, "memexp: interrupted before any question was recorded\n")


def test_max_examples_is_not_complete(tmp_path, capfd):
    out = tmp_path / "runs"
    short = memexp_here(capfd, "run", *TINY, f"output_dir={out}", "max_examples=2")
    assert short.returncode == 0, short.stderr
    (path,) = out.rglob("summary.json")
    s = json.loads(path.read_text())
    assert (s["complete"], s["num_examples"], s["expected_examples"], s["num_questions"]) == (False, 2, 3, 2)
    assert "incomplete: 2 examples of the benchmark's 3 read" in short.stdout
    whole = memexp_here(capfd, "run", *TINY, f"output_dir={out}")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(path.read_text())["complete"] is True
    # a smoke run over the finished folder leaves its summary complete (issue 45)
    before = path.read_text()
    again = memexp_here(capfd, "run", *TINY, f"output_dir={out}", "max_examples=1")
    assert again.returncode == 0, again.stderr
    assert path.read_text() == before and "incomplete" not in again.stdout


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
