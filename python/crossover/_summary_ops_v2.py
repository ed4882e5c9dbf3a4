"""tensorflow.python.ops.summary_ops_v2, TensorFlow's private module behind tf.summary, which
scripts of the TensorFlow 2.0 days import for its writer (`summary_ops_v2.create_file_writer_v2`,
`with writer.as_default(), summary_ops_v2.always_record_summaries(): summary_ops_v2.scalar(...)`).
Served by crossover.summary (see there). Its own `scalar` and `histogram` keep their older
signatures (name, tensor, family=None, step=None) and write what they write in TensorFlow: the
legacy values (a simple_value; a HistogramProto with TensorFlow's exponential buckets), tagged
`family/family/name` with a family, and only inside `always_record_summaries()` or
`record_if(True)`. A name it lacks points to tf.summary."""

from typing import Any, Optional

import numpy as np

from . import summary as _summary
from .summary import (  # noqa: F401  (this module's public names)
    SummaryWriter,
    create_noop_writer,
    flush,
    get_step,
    record_if,
    set_step,
    should_record_summaries,
)
from .summary import create_file_writer as create_file_writer_v2


def create_file_writer(
    logdir: Any,
    max_queue: Optional[int] = None,
    flush_millis: Optional[int] = None,
    filename_suffix: Optional[str] = None,
    name: Optional[str] = None,
) -> SummaryWriter:
    """summary_ops_v2.create_file_writer (TensorFlow 1's): without a logdir, a writer that writes
    nothing; else create_file_writer_v2's."""
    if logdir is None:
        return create_noop_writer()
    return create_file_writer_v2(logdir, max_queue, flush_millis, filename_suffix, name)


def always_record_summaries() -> Any:
    """Records the legacy summaries (scalar, histogram here) inside the block."""
    return record_if(True)


def never_record_summaries() -> Any:
    return record_if(False)


def has_default_writer() -> bool:
    return _summary._state.writer is not None


def _tensorflow_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket limits (core/lib/histogram/histogram.cc):
    -+1e-12 * 1.1^k up to 1e20, 0, and DBL_MAX last."""
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return np.array([-e for e in reversed(edges)] + [0.0] + edges + [np.finfo(np.float64).max])


def _histogram_proto(values: np.ndarray) -> Any:
    """A HistogramProto as TensorFlow's Histogram::EncodeToProto writes it: each value in the
    bucket whose limit is the first above it, and each run of empty buckets as one (its last
    limit, count 0)."""
    from tensorboardX.proto import summary_pb2

    limits = _tensorflow_limits()
    counts = np.bincount(np.searchsorted(limits, values, side="right"), minlength=limits.size)
    bucket_limit, bucket = [], []
    i = 0
    while i < limits.size:
        end, count = limits[i], counts[i]
        i += 1
        if count <= 0:
            while i < limits.size and counts[i] <= 0:
                end, count = limits[i], counts[i]
                i += 1
        bucket_limit.append(float(end))
        bucket.append(float(count))
    empty = values.size == 0
    return summary_pb2.HistogramProto(
        min=float(limits[-1]) if empty else float(values.min()),
        max=-float(limits[-1]) if empty else float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float(np.square(values).sum()),
        bucket_limit=bucket_limit,
        bucket=bucket,
    )


def _legacy(name: str, family: Optional[str], step: Any, make: Any) -> bool:
    if not _summary._recording(False):
        return False
    at = _summary._step(step)
    tag = name.lstrip("/") if family is None else f"{family}/{family}/{name}".lstrip("/")
    writer = _summary._state.writer
    assert writer is not None
    writer._add(make(tag), at)
    return True


def scalar(name: str, tensor: Any, family: Optional[str] = None, step: Any = None) -> bool:
    """A scalar as TensorFlow 1's summaries wrote it (simple_value)."""
    value = np.asarray(tensor)
    if value.ndim != 0:
        raise ValueError(f"summary_ops_v2.scalar: tensor must be a scalar, got shape {value.shape}")

    def make(tag: str) -> Any:
        from tensorboardX.proto import summary_pb2

        return summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))]
        )

    return _legacy(name, family, step, make)


def histogram(name: str, tensor: Any, family: Optional[str] = None, step: Any = None) -> bool:
    """A histogram as TensorFlow 1's summaries wrote it (HistogramProto)."""
    values = np.asarray(tensor, dtype=np.float64).reshape(-1)

    def make(tag: str) -> Any:
        from tensorboardX.proto import summary_pb2

        return summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, histo=_histogram_proto(values))]
        )

    return _legacy(name, family, step, make)


__all__ = [
    "SummaryWriter",
    "always_record_summaries",
    "create_file_writer",
    "create_file_writer_v2",
    "create_noop_writer",
    "flush",
    "get_step",
    "has_default_writer",
    "histogram",
    "never_record_summaries",
    "record_if",
    "scalar",
    "set_step",
    "should_record_summaries",
]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise AttributeError(
        f"tensorflow.python.ops.summary_ops_v2.{name} is not supported by crossover, which serves "
        f"this private module's {', '.join(__all__)}; use the public tf.summary"
    )
