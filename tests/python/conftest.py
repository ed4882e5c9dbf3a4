"""Shared by tests/python: crossover's seed is process-wide, so each test starts at 0."""

import pytest

from crossover import _seed


@pytest.fixture(autouse=True)
def seed_zero():
    _seed.set_seed(0)
    yield
    _seed.set_seed(0)
