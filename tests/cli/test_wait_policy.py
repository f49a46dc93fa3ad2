"""`python -m memexp` makes torch's OpenMP threads sleep at barriers (passive wait) unless the
user chose a policy: the setting only takes effect if it is in the environment before torch
starts its thread pool, so the check runs in a fresh interpreter."""

import os
import subprocess
import sys

PROBE = ("import sys, os; import memexp.__main__; "
         "print('torch' in sys.modules, os.environ.get('OMP_WAIT_POLICY'))")


def _probe(env_policy):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_passive_wait_is_set_before_torch_is_imported():
    assert _probe(None) == ["False", "PASSIVE"]


def test_the_users_policy_wins():
    assert _probe("ACTIVE") == ["False", "ACTIVE"]
