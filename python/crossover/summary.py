"""tf.summary: the TensorBoard event files a script's own loop writes (create_file_writer, then
scalar, histogram, image and text under `writer.as_default()`), through tensorboardX, the writer
keras.callbacks.TensorBoard uses. Each value is written as TensorFlow 2.21 with TensorBoard 2.21
writes it: the tag, the step, the plugin's metadata and the same tensor (a float32 scalar; a
histogram's [buckets, 3] float64 left edges, right edges and counts with TensorBoard's bucketing;
images as [width, height, PNG, ...] strings, floats scaled to uint8 as convert_image_dtype does;
text as a string tensor), so TensorBoard shows what it shows for TensorFlow's run. The event
file is named as TensorFlow names it (suffix `.v2`). Name scopes (tf.name_scope) are not
prefixed: crossover has none."""

import contextlib
import os
import struct
import threading
import time
import zlib
from typing import Any, Iterator, Optional

import numpy as np

from ._args import Namespace, unsupported_attribute


class _State(threading.local):
    """The default writer, step and recording condition, per thread as TensorFlow keeps them."""

    def __init__(self) -> None:
        self.writer: Optional["SummaryWriter"] = None
        self.step: Any = None
        self.is_recording: Any = None  # None: each API's own default (tf.summary's: True)


_state = _State()


class SummaryWriter:
    """tf.summary.SummaryWriter: what create_file_writer returns. `as_default(step=None)` makes it
    the writer the summary functions write to (flushed when the block ends); `set_as_default`
    does so for good; `flush`, `close`, `init`."""

    def set_as_default(self, step: Any = None) -> None:
        _state.writer = self
        if step is not None:
            _state.step = step

    @contextlib.contextmanager
    def as_default(self, step: Any = None) -> Iterator["SummaryWriter"]:
        old_writer, old_step = _state.writer, _state.step
        _state.writer = self
        if step is not None:
            _state.step = step
        try:
            yield self
        finally:
            _state.writer.flush()
            _state.writer = old_writer
            if step is not None:
                _state.step = old_step

    def init(self) -> None:
        """Nothing to do: the event file is open from create_file_writer on."""

    def flush(self) -> None:
        """Writes what is queued to the event file."""

    def close(self) -> None:
        """Flushes and closes the event file; the writer writes nothing more."""

    def _add(self, summary: Any, step: int) -> None:
        raise NotImplementedError


class _FileWriter(SummaryWriter):
    """One event file, written on this thread with tensorboardX's EventsWriter (its own
    SummaryWriter queues to a thread whose flush does not drain the queue; TensorFlow's flush
    writes everything written before it): flushed after `max_queue` summaries, at the first
    summary `flush_secs` after the last flush, at the end of an as_default block and at close."""

    _files_made = 0  # TensorFlow's file names end with the process id and a count

    def __init__(self, logdir: str, max_queue: int, flush_secs: float, suffix: str) -> None:
        try:
            from tensorboardX.event_file_writer import EventsWriter
        except ImportError:
            raise ImportError(
                "tf.summary needs the tensorboardX package, which crossover installs with "
                "itself: pip install tensorboardX"
            ) from None
        os.makedirs(logdir, exist_ok=True)
        _FileWriter._files_made += 1
        self._writer: Any = EventsWriter(
            os.path.join(logdir, "events"), f".{os.getpid()}.{_FileWriter._files_made}{suffix}"
        )
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._pending = 0
        self._last_flush = time.monotonic()
        self._closed = False

    def flush(self) -> None:
        if not self._closed:
            self._writer.flush()
            self._pending = 0
            self._last_flush = time.monotonic()

    def close(self) -> None:
        if not self._closed:
            self._writer.close()
            self._closed = True

    def _add(self, summary: Any, step: int) -> None:
        from tensorboardX.proto import event_pb2

        if self._closed:
            raise RuntimeError("tf.summary: this writer was closed; make a new one")
        self._writer.write_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        self._pending += 1
        waited = time.monotonic() - self._last_flush
        if self._pending >= self._max_queue or waited >= self._flush_secs:
            self.flush()


class _NoopWriter(SummaryWriter):
    def _add(self, summary: Any, step: int) -> None:
        pass


def create_file_writer(
    logdir: Any,
    max_queue: Optional[int] = None,
    flush_millis: Optional[int] = None,
    filename_suffix: Optional[str] = None,
    name: Optional[str] = None,
    experimental_trackable: bool = False,
    experimental_mesh: Any = None,
) -> SummaryWriter:
    """tf.summary.create_file_writer: a writer of one new event file in `logdir` (made if
    missing), flushed every `max_queue` (10) summaries and every `flush_millis` (120,000) ms."""
    if logdir is None:
        raise ValueError("Argument `logdir` cannot be None")
    if experimental_mesh is not None:
        raise ValueError(
            "create_file_writer: experimental_mesh is not supported by crossover (no DTensor)"
        )
    for arg, value in (("max_queue", max_queue), ("flush_millis", flush_millis)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"create_file_writer: {arg} must be an integer, got {value!r}")
        if value is not None and value < 0:
            raise ValueError(f"create_file_writer: {arg} must be >= 0, got {value}")
    return _FileWriter(
        os.fspath(logdir),
        10 if max_queue is None else max_queue,
        120.0 if flush_millis is None else flush_millis / 1000.0,
        ".v2" if filename_suffix is None else str(filename_suffix),
    )


def create_noop_writer() -> SummaryWriter:
    """tf.summary.create_noop_writer: a writer that writes nothing."""
    return _NoopWriter()


def flush(writer: Optional[SummaryWriter] = None, name: Optional[str] = None) -> None:
    """tf.summary.flush: flushes `writer`, else the default writer (if any)."""
    writer = writer if writer is not None else _state.writer
    if writer is not None:
        writer.flush()


@contextlib.contextmanager
def record_if(condition: Any) -> Iterator[None]:
    """tf.summary.record_if: summaries are written inside the block only where `condition` (a
    bool, or a callable returning one, called at each summary) is true."""
    old = _state.is_recording
    _state.is_recording = condition
    try:
        yield
    finally:
        _state.is_recording = old


def _recording(default: bool) -> bool:
    if _state.writer is None:
        return False
    condition = _state.is_recording
    if callable(condition):
        condition = condition()
    return default if condition is None else bool(np.asarray(condition))


def should_record_summaries() -> bool:
    """tf.summary.should_record_summaries: whether a summary written now would be written."""
    return _recording(True)


def get_step() -> Any:
    """tf.summary.experimental.get_step: the default step, or None."""
    return _state.step


def set_step(step: Any) -> None:
    """tf.summary.experimental.set_step: the step summaries written without one use."""
    _state.step = step


def _step(step: Any) -> int:
    step = _state.step if step is None else step
    if step is None:
        raise ValueError(
            "No step set. Please specify one either through the `step` argument or through "
            "tf.summary.experimental.set_step()"
        )
    value = np.asarray(step)
    if value.ndim != 0 or not np.issubdtype(value.dtype, np.number):
        raise ValueError(f"tf.summary: step must be an integer scalar, got {step!r}")
    return int(value)


def _proto() -> Any:
    from tensorboardX.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

    return summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2


def _write(
    tag: str, plugin: str, description: Optional[str], make_tensor: Any, step: Any
) -> bool:
    """Writes one TensorFlow 2 summary value (`make_tensor()` -> its TensorProto) to the default
    writer; False when there is none or recording is off."""
    if not _recording(True):
        return False
    at = _step(step)
    summary_pb2, _, _, _ = _proto()
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin),
        summary_description=description or "",
    )
    value = summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=make_tensor())
    assert _state.writer is not None
    _state.writer._add(summary_pb2.Summary(value=[value]), at)
    return True


def _tensor_proto(array: np.ndarray) -> Any:
    _, tensor_pb2, tensor_shape_pb2, types_pb2 = _proto()
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in array.shape]
    )
    if array.dtype == np.float32:
        return tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT, tensor_shape=shape, tensor_content=array.tobytes()
        )
    if array.dtype == np.float64:
        return tensor_pb2.TensorProto(
            dtype=types_pb2.DT_DOUBLE, tensor_shape=shape, tensor_content=array.tobytes()
        )
    return tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, tensor_shape=shape, string_val=list(array.reshape(-1))
    )


def _tag(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"tf.summary.{what}: name must be a non-empty string, got {name!r}")
    return name


def scalar(name: str, data: Any, step: Any = None, description: Optional[str] = None) -> bool:
    """tf.summary.scalar: `data` (a number or a scalar tensor) as float32 at `step`."""
    tag = _tag(name, "scalar")
    value = np.asarray(data)
    if value.ndim != 0:
        raise ValueError(f"tf.summary.scalar: data must be a scalar, got shape {value.shape}")
    as_float32 = value.astype(np.float32)
    return _write(tag, "scalars", description, lambda: _tensor_proto(as_float32), step)


def _buckets(data: Any, buckets: Optional[int] = None) -> np.ndarray:
    """TensorBoard 2.21's bucketing (tensorboard/plugins/histogram/summary_v2.py, `_buckets`):
    [buckets, 3] float64 rows (left edge, right edge, count) of equal width between the minimum
    and the maximum; all at the maximum with the count in the last when every value is the same;
    zeros when there is no data; none for buckets=0."""
    count = 30 if buckets is None else buckets
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"tf.summary.histogram: buckets must be an integer, got {buckets!r}")
    count = max(0, int(count))
    values = np.asarray(data, dtype=np.float64).reshape(-1)
    if values.size == 0 or count == 0:
        return np.zeros((count, 3), dtype=np.float64)
    low, high = values.min(), values.max()
    if high - low == 0:
        counts = np.zeros(count)
        counts[-1] = values.size
        return np.stack([np.full(count, high), np.full(count, high), counts], axis=1)
    width = (high - low) / count
    index = np.minimum(np.floor((values - low) / width).astype(np.int32), count - 1)
    counts = np.bincount(index, minlength=count).astype(np.float64)
    edges = np.linspace(low, high, count + 1)
    edges[-1] = high
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def histogram(
    name: str,
    data: Any,
    step: Any = None,
    buckets: Optional[int] = None,
    description: Optional[str] = None,
) -> bool:
    """tf.summary.histogram: the histogram of every element of `data` (`buckets`, 30, of equal
    width), for TensorBoard's Histograms and Distributions."""
    tag = _tag(name, "histogram")
    rows = _buckets(data, buckets)
    return _write(tag, "histograms", description, lambda: _tensor_proto(rows), step)


def _png(image: np.ndarray) -> bytes:
    """A uint8 (height, width, channels) image as PNG (8 bits; gray, gray+alpha, RGB or RGBA)."""
    height, width, channels = image.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = b"".join(b"\x00" + image[r].tobytes() for r in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _uint8_images(data: Any) -> np.ndarray:
    images = np.asarray(data)
    if images.ndim != 4:
        raise ValueError(
            f"tf.summary.image: data must be [k, height, width, channels], got shape {images.shape}"
        )
    if images.shape[3] not in (1, 2, 3, 4):
        raise ValueError(
            f"tf.summary.image: an image has 1, 2, 3 or 4 channels (gray, gray+alpha, RGB, RGBA), "
            f"got {images.shape[3]}"
        )
    if images.dtype == np.uint8:
        return images
    if np.issubdtype(images.dtype, np.floating):
        # tf.image.convert_image_dtype(saturate=True): x * 255.5 in the input's type, clipped,
        # then truncated.
        scaled = images * images.dtype.type(255.5)
        return np.clip(scaled, 0, 255).astype(np.uint8)
    raise TypeError(
        f"tf.summary.image: data must be float (values in [0, 1]) or uint8, got {images.dtype}"
    )


def image(
    name: str,
    data: Any,
    step: Any = None,
    max_outputs: int = 3,
    description: Optional[str] = None,
) -> bool:
    """tf.summary.image: the first `max_outputs` images of `data` ([k, height, width,
    channels]; float in [0, 1] or uint8) as PNGs."""
    tag = _tag(name, "image")
    if isinstance(max_outputs, bool) or not isinstance(max_outputs, (int, np.integer)):
        raise TypeError(f"tf.summary.image: max_outputs must be an integer, got {max_outputs!r}")
    if max_outputs < 0:
        raise ValueError(f"tf.summary.image: max_outputs must be >= 0, got {max_outputs}")
    images = _uint8_images(data)

    def tensor() -> Any:
        encoded = [_png(images[i]) for i in range(min(int(max_outputs), images.shape[0]))]
        size = [str(images.shape[2]).encode(), str(images.shape[1]).encode()]
        return _tensor_proto(np.array(size + encoded, dtype=object))

    return _write(tag, "images", description, tensor, step)


def text(name: str, data: Any, step: Any = None, description: Optional[str] = None) -> bool:
    """tf.summary.text: a string (or a tensor of strings), as Markdown in TensorBoard."""
    tag = _tag(name, "text")
    values = np.asarray(data, dtype=object)
    encoded = np.vectorize(
        lambda s: s if isinstance(s, bytes) else str(s).encode(), otypes=[object]
    )
    return _write(tag, "text", description, lambda: _tensor_proto(encoded(values)), step)


experimental = Namespace("summary.experimental", get_step=get_step, set_step=set_step)

__all__ = [
    "SummaryWriter",
    "create_file_writer",
    "create_noop_writer",
    "experimental",
    "flush",
    "histogram",
    "image",
    "record_if",
    "scalar",
    "should_record_summaries",
    "text",
]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "summary",
        name,
        "create_file_writer, create_noop_writer, scalar, histogram, image, text, flush, "
        "record_if, should_record_summaries and experimental.get_step/set_step",
    )
