"""TensorFlow's TF32 switch (tf.config.experimental.enable_tensor_float_32_execution) for models
compiled from now on: on a GPU, a float32 policy then trains in the engine's tf32 (the dense
GEMMs' float32 operands rounded to TF32 inside the tensor cores). Off by default, where
TensorFlow's is on: crossover's float32 on a GPU follows the CPU's trajectory (docs/PYTHON.md)."""

_tensor_float_32 = False


def enable_tensor_float_32_execution(enabled: bool) -> None:
    """tf.config.experimental's: TF32 for the GPU's float32 matrix products (no effect on a CPU,
    which has no TF32, as in TensorFlow)."""
    global _tensor_float_32
    _tensor_float_32 = bool(enabled)


def tensor_float_32_execution_enabled() -> bool:
    return _tensor_float_32
