"""Importing crossover sets OpenMP's idle spin short (as the command does), keeping the user's."""

import os
import subprocess
import sys

SHOW = "import os, crossover; print(os.environ.get('GOMP_SPINCOUNT'))"


def spin_after_import(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    clean.update(env)
    out = subprocess.run([sys.executable, "-c", SHOW], env=clean, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_sets_a_short_spin_before_openmp_loads():
    assert spin_after_import() == "2000"


def test_a_spin_count_the_user_set_is_kept():
    assert spin_after_import(GOMP_SPINCOUNT="123") == "123"


def test_a_wait_policy_the_user_set_is_left_alone():
    assert spin_after_import(OMP_WAIT_POLICY="active") == "None"
