"""keras.callbacks.TensorBoard: the event files a Keras 3 fit writes (tags, steps, values), read back
with tensorboardX's own Event protobuf, as TensorBoard reads them."""

import glob
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import callbacks, layers

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


def events(folder: str) -> dict[str, list[tuple[int, object]]]:
    """tag -> [(step, value)] of every event file in `folder` (TFRecord framing: length, its CRC,
    the Event, its CRC)."""
    from tensorboardX.proto import event_pb2

    found: dict[str, list[tuple[int, object]]] = {}
    files = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    assert files, f"no event file in {folder}"
    for name in files:
        data = Path(name).read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for v in event.summary.value:
                value = v.simple_value if v.HasField("simple_value") else v.histo
                found.setdefault(v.tag, []).append((event.step, value))
    return found


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return d["x_train"][:256] / 255.0, d["y_train"][:256]


def model() -> keras.Sequential:
    m = keras.Sequential(
        [layers.Input((28, 28)), layers.Flatten(), layers.Dense(16, activation="relu"),
         layers.Dense(10, activation="softmax")]
    )
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def test_epoch_scalars_go_to_train_and_validation_as_keras_names_them(data, tmp_path):
    x, y = data
    m = model()
    history = m.fit(x, y, epochs=2, batch_size=64, validation_split=0.25, verbose=0,
                    callbacks=[callbacks.TensorBoard(log_dir=tmp_path / "logs")])
    train = events(str(tmp_path / "logs" / "train"))
    val = events(str(tmp_path / "logs" / "validation"))
    assert set(train) == {"epoch_loss", "epoch_accuracy", "epoch_learning_rate"}
    assert [s for s, _ in train["epoch_loss"]] == [0, 1]
    np.testing.assert_allclose([v for _, v in train["epoch_loss"]], history.history["loss"],
                               rtol=1e-6)
    np.testing.assert_allclose([v for _, v in train["epoch_learning_rate"]], [0.001, 0.001])
    # val_ logs without their prefix; each evaluation at the optimizer's step.
    assert {"epoch_loss", "epoch_accuracy"} <= set(val)
    np.testing.assert_allclose([v for _, v in val["epoch_accuracy"]],
                               history.history["val_accuracy"], rtol=1e-6)
    assert [s for s, _ in val["evaluation_loss_vs_iterations"]] == [3, 6]  # 192 rows / 64


def test_batch_scalars_every_update_freq_and_weight_histograms(data, tmp_path):
    x, y = data
    m = model()
    m.fit(x, y, epochs=1, batch_size=32, verbose=0,
          callbacks=[callbacks.TensorBoard(log_dir=str(tmp_path), update_freq=3,
                                           histogram_freq=1)])
    train = events(str(tmp_path / "train"))
    assert [s for s, _ in train["batch_loss"]] == [3, 6]  # 8 batches, every third
    dense = m.layers[1].name
    histo = train[f"{dense}/kernel/histogram"]
    assert len(histo) == 1 and histo[0][1].num == 28 * 28 * 16
    assert f"{dense}/bias/histogram" in train


def test_what_only_tensorflow_has_is_refused(tmp_path):
    with pytest.raises(ValueError, match="profile_batch"):
        callbacks.TensorBoard(log_dir=str(tmp_path), profile_batch=(2, 4))
    with pytest.raises(ValueError, match="embeddings_freq"):
        callbacks.TensorBoard(log_dir=str(tmp_path), embeddings_freq=1)
    with pytest.raises(ValueError, match="update_freq"):
        callbacks.TensorBoard(log_dir=str(tmp_path), update_freq=0)
