"""Sweeps whose jobs run elsewhere (SLURM through Hydra's submitit launcher, or local processes):
what a failed job leaves in its job folder, the sweep's one-line account of its failed jobs, the
one line for a submission the scheduler refuses, and `memexp status` over a sweep folder."""
