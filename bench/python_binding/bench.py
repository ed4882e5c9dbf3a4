"""Per-call overhead of nanobind vs pybind11 (docs/PYTHON.md): best of 7 runs of 1e6 calls."""
import timeit

import numpy as np

import bind_nb
import bind_pb

x = np.zeros((32, 784), np.float32)
for name, mod in (("nanobind", bind_nb), ("pybind11", bind_pb)):
    model = mod.Model()
    assert model.count_params() == 7850
    n = 1_000_000
    env = {"model": model, "first": mod.first, "x": x}
    method = min(timeit.repeat("model.count_params()", globals=env, number=n, repeat=7)) / n
    array = min(timeit.repeat("first(x)", globals=env, number=n, repeat=7)) / n
    print(f"{name}: method {method * 1e9:.0f} ns/call, float32 array view {array * 1e9:.0f} ns/call")
