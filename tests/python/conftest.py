"""Shared by tests/python: crossover's seed is process-wide, so each test starts at 0; the thread
counts a first fit measures are saved in a temporary folder, never in the real HOME."""

import os
import tempfile

import pytest

from crossover import _seed

# CROSSOVER_PROFILE_DIR: where fit keeps its measured thread counts (perf::threads_choice_path);
# also passed on to the commands the tests run.
_PROFILES = tempfile.TemporaryDirectory(prefix="crossover-test-profiles-")
os.environ["CROSSOVER_PROFILE_DIR"] = _PROFILES.name


@pytest.fixture(autouse=True)
def seed_zero():
    _seed.set_seed(0)
    yield
    _seed.set_seed(0)
