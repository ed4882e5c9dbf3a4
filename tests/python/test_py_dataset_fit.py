"""fit on a keras.utils.PyDataset-style object (keras/_py_dataset_fit.py): the dataset's batches,
asked for each epoch in Keras's order, trained on the engine; one training run for the callbacks;
the dataset's epoch hooks; Keras's refusals."""

import math
import random

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


class Batches:
    """The PyDataset protocol (len, getitem, on_epoch_end) without its base class, as scripts
    written for Keras 2's Sequence have it; records the indices asked for."""

    def __init__(self, x, y, batch, w=None):
        self.x, self.y, self.w, self.batch = x, y, w, batch
        self.asked, self.ended, self.begun = [], 0, 0

    def __len__(self):
        return math.ceil(len(self.x) / self.batch)

    def __getitem__(self, i):
        self.asked.append(i)
        s = slice(i * self.batch, (i + 1) * self.batch)
        return (self.x[s], self.y[s]) if self.w is None else (self.x[s], self.y[s], self.w[s])

    def on_epoch_begin(self):
        self.begun += 1

    def on_epoch_end(self):
        self.ended += 1


def _model(seed=3):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(4), layers.Dense(3)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def _data(n=70):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 6)).astype(np.float32), rng.integers(0, 3, n)


def test_unshuffled_batches_train_as_the_same_arrays_do():
    x, y = _data()
    by_arrays = _model()
    h1 = by_arrays.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    ds = Batches(x, y, 16)
    by_dataset = _model()
    h2 = by_dataset.fit(ds, epochs=3, shuffle=False, verbose=0)
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert h2.history["loss"] == h1.history["loss"] and h2.epoch == [0, 1, 2]
    assert ds.asked == [0, 1, 2, 3, 4] * 3 and ds.begun == 3 and ds.ended == 3


def test_shuffle_asks_for_every_batch_in_pythons_random_order_with_the_short_one_last():
    x, y = _data()
    ds, model = Batches(x, y, 16), _model()  # (set_random_seed seeds Python's random too)
    random.seed(5)
    model.fit(ds, epochs=1, verbose=0)
    random.seed(5)
    order = list(range(5))
    random.shuffle(order)
    assert ds.asked == order


def test_callbacks_see_one_run_and_early_stopping_ends_it():
    events = []

    class Record(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            events.append("begin")

        def on_epoch_end(self, epoch, logs=None):
            events.append(epoch)
            if epoch == 1:
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            events.append("end")

    x, y = _data()
    ds = Batches(x, y, 16)
    model = _model()
    history = model.fit(ds, epochs=5, callbacks=[Record()], verbose=0)
    assert events == ["begin", 0, 1, "end"] and history.epoch == [0, 1]
    assert model.stop_training and ds.ended == 2 and model.history is history


def test_validation_data_and_sample_weights_from_the_batches():
    x, y = _data()
    w = np.linspace(0.5, 2.0, len(x)).astype(np.float32)
    model = _model()
    history = model.fit(Batches(x, y, 16, w), epochs=2, validation_data=(x, y), verbose=0)
    assert len(history.history["val_loss"]) == 2
    by_arrays = _model()
    by_arrays.fit(x, y, sample_weight=w, batch_size=16, epochs=1, shuffle=False, verbose=0)
    by_dataset = _model()
    by_dataset.fit(Batches(x, y, 16, w), epochs=1, shuffle=False, verbose=0)
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_keras_refusals_and_bad_batches():
    x, y = _data()
    model = _model()
    with pytest.raises(ValueError, match="`y` argument is not supported when x is a PyDataset"):
        model.fit(Batches(x, y, 16), y, verbose=0)
    with pytest.raises(ValueError, match="validation_split is only supported for numpy"):
        model.fit(Batches(x, y, 16), validation_split=0.2, verbose=0)

    class XOnly(Batches):
        def __getitem__(self, i):
            return self.x[i * self.batch : (i + 1) * self.batch]

    with pytest.raises(ValueError, match="batch 0 of the PyDataset is ndarray; fit needs"):
        model.fit(XOnly(x, y, 16), shuffle=False, verbose=0)

    class Ragged(Batches):
        def __getitem__(self, i):
            return self.x[: 5 + i], self.y[: 5 + i]

    with pytest.raises(ValueError, match=r"batches have sizes \[5, 6, 7, 8, 9\]"):
        model.fit(Ragged(x, y, 16), verbose=0)
