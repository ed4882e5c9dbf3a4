"""Shared by tests/python: crossover's seed is process-wide, so each test starts at 0; the thread
counts a first fit measures are saved in a temporary folder, never in the real HOME."""

import os
import tempfile

import pytest

from crossover import _precision, _seed
from crossover.keras import backend, mixed_precision

# CROSSOVER_PROFILE_DIR: where fit keeps its measured thread counts (perf::threads_choice_path);
# also passed on to the commands the tests run.
_PROFILES = tempfile.TemporaryDirectory(prefix="crossover-test-profiles-")
os.environ["CROSSOVER_PROFILE_DIR"] = _PROFILES.name


@pytest.fixture(autouse=True)
def seed_zero():
    """Each test starts with the global seed 0 and Keras's automatic names from the start."""
    _seed.set_seed(0)
    backend.clear_session()
    yield
    _seed.set_seed(0)


@pytest.fixture(autouse=True)
def float32_policy():
    """Each test starts, and leaves, with Keras's default dtype policy and TF32 off."""
    mixed_precision.set_global_policy("float32")
    _precision.enable_tensor_float_32_execution(False)
    yield
    mixed_precision.set_global_policy("float32")
    _precision.enable_tensor_float_32_execution(False)
