"""Records survive a kill at any byte; summaries are the papers' task x length tables."""

import json

from memexp.run.records import RunFolder, config_hash, format_table, summarize


def _rec(ex, q, task="t", length=256, score=100.0):
    return {"example_id": ex, "question_id": q, "task": task, "length": length, "score": score}


def test_partial_last_line_is_dropped_and_cut_from_the_file(tmp_path):
    folder = RunFolder(tmp_path)
    folder.append(_rec("a", "0"))
    folder.append(_rec("b", "0"))
    whole = folder.records_path.read_bytes()
    line = (json.dumps(_rec("c", "0")) + "\n").encode()
    for cut in range(1, len(line)):  # a kill after every possible prefix of the third record
        folder.records_path.write_bytes(whole + line[:cut])
        records = folder.load_records()
        assert [r["example_id"] for r in records] == ["a", "b"]
        assert folder.records_path.read_bytes() == whole
    folder.append(_rec("c", "0"))
    assert [r["example_id"] for r in folder.load_records()] == ["a", "b", "c"]


def test_duplicate_records_are_read_once(tmp_path):
    folder = RunFolder(tmp_path)
    folder.append(_rec("a", "0", score=100.0))
    folder.append(_rec("a", "0", score=0.0))
    folder.append(_rec("a", "1"))
    records = folder.load_records()
    assert [(r["example_id"], r["question_id"], r["score"]) for r in records] == [("a", "0", 100.0), ("a", "1", 100.0)]


def test_summary_by_task_and_length():
    recs = [_rec("a", "0", "x", 256, 100.0), _rec("b", "0", "x", 256, 0.0), _rec("c", "0", "x", 1024, 50.0),
            _rec("d", "0", "y", 256, 100.0)]
    s = summarize(recs)
    assert s["scores"] == {"x": {"256": 50.0, "1024": 50.0}, "y": {"256": 100.0}}
    assert s["by_length"] == {"256": 66.67, "1024": 50.0}
    assert s["by_task"] == {"x": 50.0, "y": 100.0}
    assert s["overall"] == 62.5 and s["num_questions"] == 4
    table = format_table(s)
    assert "x" in table and "62.50" in table and table.index("256") < table.index("1024")


def test_config_hash_ignores_how_a_run_is_watched_not_what_it_computes():
    base = {"backbone": {"name": "b"}, "method": {"name": "m", "replay_budget": 2}, "bench": {"name": "r"},
            "logger": {"name": "none"}, "progress": True, "output_dir": "x"}
    watched = dict(base, logger={"name": "wandb"}, progress=False, output_dir="y")
    other = dict(base, method={"name": "m", "replay_budget": 4})
    assert config_hash(base) == config_hash(watched)
    assert config_hash(base) != config_hash(other)


def _lines(folder):
    return folder.records_path.read_bytes().splitlines(keepends=True)


def test_a_corrupt_middle_line_stops_loading_naming_the_file_and_line(tmp_path):
    import pytest

    from memexp.run.records import RecordsCorruptError

    folder = RunFolder(tmp_path)
    for ex in "abcd":
        folder.append(_rec(ex, "0"))
    lines = _lines(folder)
    for bad in (b'{"example_id": "b", "quest\n', b"[1, 2]\n", b'{"example_id": "b"}\n', b"\x00\x00\x00\n"):
        folder.records_path.write_bytes(b"".join([lines[0], bad, *lines[2:]]))
        before = folder.records_path.read_bytes()
        with pytest.raises(RecordsCorruptError) as err:
            folder.load_records()
        message = str(err.value)
        assert message.startswith(f"{folder.records_path}:2: ") and "records_repair=true" in message
        assert "\n" not in message
        assert folder.records_path.read_bytes() == before  # nothing dropped on the way


def test_repair_moves_bad_lines_aside_and_keeps_every_good_record(tmp_path):
    folder = RunFolder(tmp_path)
    for ex in "abcde":
        folder.append(_rec(ex, "0"))
    lines = _lines(folder)
    bad1, bad2 = b"not json\n", b'{"example_id": "x", "question_id": "0", "task": "t", "length": 1, "score": 1, "zz": 1}\n'
    torn = b'{"example_id": "f", "que'
    folder.records_path.write_bytes(b"".join([lines[0], bad1, lines[1], lines[2], bad2, lines[3], lines[4]]) + torn)
    records = folder.load_records(repair=True)
    assert [r["example_id"] for r in records] == list("abcde")
    assert folder.bad_path.read_bytes() == bad1 + bad2
    assert folder.records_path.read_bytes() == b"".join(lines)  # the torn tail is cut as before
    assert [r["example_id"] for r in folder.load_records()] == list("abcde")  # clean now, no repair needed
    folder.append(_rec("f", "0"))
    assert [r["example_id"] for r in folder.load_records()] == list("abcdef")


def test_a_failed_summary_write_leaves_no_temporary_file(tmp_path):
    import errno
    import os

    import pytest

    folder = RunFolder(tmp_path)
    tmp = tmp_path / "summary.json.tmp"
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full to simulate a full disk")
    tmp.symlink_to("/dev/full")
    with pytest.raises(OSError) as err:
        folder.write_summary({"overall": 1})
    assert err.value.errno == errno.ENOSPC
    assert not tmp.exists() and not tmp.is_symlink() and not folder.summary_path.exists()


def test_a_record_the_disk_cuts_short_is_taken_back_and_the_error_names_the_file(tmp_path, monkeypatch):
    """A full disk lets a write through in part (a short write), then refuses the rest: the file
    must still end in the last complete record, so that the next append never glues onto half a line."""
    import errno
    import os

    import pytest

    from memexp.run import records
    folder = RunFolder(tmp_path)
    folder.append(_rec("a", "0"))
    before = folder.records_path.read_bytes()
    real_write = os.write
    calls = []

    def full_disk(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[: len(data) // 2])  # half of the line fits
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records.os, "write", full_disk)
    with pytest.raises(OSError) as err:
        folder.append(_rec("b", "0"))
    monkeypatch.undo()
    assert len(calls) == 2  # the short write was followed up, not taken for the whole line
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(folder.records_path)
    assert folder.records_path.read_bytes() == before
    folder.append(_rec("b", "0"))
    assert [r["example_id"] for r in folder.load_records()] == ["a", "b"]


def test_a_short_write_the_disk_completes_is_one_whole_line(tmp_path, monkeypatch):
    import os

    from memexp.run import records
    folder = RunFolder(tmp_path)
    real_write = os.write
    monkeypatch.setattr(records.os, "write", lambda fd, data: real_write(fd, data[:7]))  # 7 bytes per call
    folder.append(_rec("a", "0"))
    monkeypatch.undo()
    assert folder.records_path.read_text() == json.dumps(_rec("a", "0")) + "\n"
