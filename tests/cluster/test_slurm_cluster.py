"""The fixture's cluster itself: the node is idle and a batch job runs on it."""

import time


def test_a_batch_job_runs_on_the_private_cluster(cluster, tmp_path):
    assert cluster.node_state() == "idle"
    out = tmp_path / "job.out"
    submitted = cluster.run("sbatch", "--parsable", "-o", str(out), "--wrap", "echo ran on $SLURM_JOB_NODELIST")
    job_id = submitted.stdout.strip()
    deadline = time.monotonic() + 60
    while any(j == job_id for j, _ in cluster.queue()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert out.read_text().startswith("ran on ")
