"""compile(metrics=[...]) beyond accuracy: Keras's names and objects, the keys of History, logs
and CSVLogger, evaluate's list and dict, and the values against numpy on predict's output.
(Against Keras itself: test_metrics_peers.py.)"""

import csv
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, metrics


def regression_model() -> keras.Sequential:
    keras.utils.set_random_seed(1)
    return keras.Sequential(
        [keras.Input((5,)), layers.Dense(4, activation="relu"), layers.Dense(2)]
    )


def data() -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(2)
    x = rs.rand(45, 5).astype(np.float32)
    return x, np.stack([x[:, 0] - x[:, 1], 2 * x[:, 2]], axis=1).astype(np.float32)


def test_values_are_keras_definitions_of_predicts_output_with_a_partial_batch() -> None:
    x, y = data()
    model = regression_model()
    model.compile(
        optimizer="adam",
        loss="mse",
        metrics=["mae", metrics.RootMeanSquaredError(), metrics.MeanSquaredError(name="err")],
    )
    pred = model.predict(x, verbose=0).astype(np.float64)
    got = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    assert list(got) == ["err", "loss", "mae", "root_mean_squared_error"]  # sorted, as Keras 3
    mse = np.mean(np.mean((y - pred) ** 2, axis=-1))
    np.testing.assert_allclose(got["mae"], np.mean(np.abs(y - pred)), rtol=1e-5)
    np.testing.assert_allclose(got["err"], mse, rtol=1e-5)
    np.testing.assert_allclose(got["loss"], mse, rtol=1e-5)
    np.testing.assert_allclose(got["root_mean_squared_error"], np.sqrt(mse), rtol=1e-5)
    # The list: the loss, then the metrics in compile's order.
    as_list = model.evaluate(x, y, batch_size=16, verbose=0)
    np.testing.assert_allclose(
        as_list, [got["loss"], got["mae"], got["root_mean_squared_error"], got["err"]], rtol=1e-6
    )


def test_history_logs_and_csv_use_the_names_given(tmp_path: Path) -> None:
    x, y = data()
    model = regression_model()
    model.compile(optimizer="adam", loss="mse", metrics=["mae", metrics.MeanSquaredError("mse")])
    seen: list[list[str]] = []

    class Keys(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(list(logs))

    log = tmp_path / "log.csv"
    h = model.fit(
        x,
        y,
        epochs=2,
        batch_size=16,
        verbose=0,
        validation_split=0.2,
        callbacks=[Keys(), keras.callbacks.CSVLogger(str(log))],
    )
    keys = ["loss", "mae", "mse", "val_loss", "val_mae", "val_mse"]
    assert list(h.history) == keys
    assert seen == [keys, keys]
    with open(log) as f:
        assert next(csv.reader(f)) == ["epoch"] + keys
    assert all(len(v) == 2 for v in h.history.values())


def test_the_accuracy_and_another_of_the_same_kind_are_both_reported() -> None:
    rs = np.random.RandomState(3)
    x, y = rs.rand(30, 5).astype(np.float32), rs.randint(0, 3, 30)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((5,)), layers.Dense(3, activation="softmax")])
    model.compile(
        optimizer="sgd",
        loss="sparse_categorical_crossentropy",
        metrics=[
            "acc",
            metrics.SparseCategoricalAccuracy(name="sca"),
            "sparse_top_k_categorical_accuracy",
        ],
    )
    got = model.evaluate(x, y, verbose=0, return_dict=True)
    predicted = np.argmax(model.predict(x, verbose=0), axis=-1)
    assert got["acc"] == got["sca"] == pytest.approx(np.mean(predicted == y))
    assert got["sparse_top_k_categorical_accuracy"] == 1.0  # 3 classes, k=5
    assert model._model().metrics() == [
        "accuracy",
        "sparse_categorical_accuracy",
        "sparse_top_k_categorical_accuracy",
    ]


@pytest.mark.parametrize(
    "metric,message",
    [
        (metrics.Mean(), "not supported"),
        ("precision", "not Precision, Recall, AUC"),
        (metrics.TopKCategoricalAccuracy(k=5), None),
    ],
)
def test_names_objects_and_refusals(metric, message) -> None:
    model = regression_model()
    if message is None:
        model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=[metric])
        return
    with pytest.raises(ValueError, match=message):
        model.compile(optimizer="adam", loss="mse", metrics=[metric])


def test_keras_metric_functions_and_get() -> None:
    model = regression_model()
    model.compile(optimizer="adam", loss="mse", metrics=[metrics.mae])
    assert model._model().metrics() == ["mean_absolute_error"]
    assert isinstance(metrics.get("mse"), metrics.MeanSquaredError)
    assert metrics.get("root_mean_squared_error").name == "root_mean_squared_error"
    assert metrics.TopKCategoricalAccuracy(k=3).get_config() == {
        "name": "top_k_categorical_accuracy",
        "dtype": "float32",
        "k": 3,
    }
    with pytest.raises(ValueError, match="k must be a whole number of at least 1, got 0"):
        metrics.TopKCategoricalAccuracy(k=0)
    with pytest.raises(ValueError, match="k must be a whole number"):
        metrics.SparseTopKCategoricalAccuracy(k=2.5)
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        metrics.BinaryAccuracy(threshold=float("nan"))


def classifier(units: int, activation: str) -> tuple[keras.Sequential, np.ndarray, np.ndarray]:
    rs = np.random.RandomState(4)
    x, labels = rs.rand(40, 5).astype(np.float32), rs.randint(0, 4, 40)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((5,)), layers.Dense(units, activation=activation)])
    return model, x, labels


def test_top_k_takes_its_k_and_binary_accuracy_its_threshold() -> None:
    # The engine's values against numpy on predict's output, each with the class's argument.
    model, x, labels = classifier(4, "softmax")
    y = np.eye(4, dtype=np.float32)[labels]
    model.compile(
        optimizer="sgd",
        loss="categorical_crossentropy",
        metrics=[
            metrics.TopKCategoricalAccuracy(k=2),
            metrics.TopKCategoricalAccuracy(k=1, name="top1"),
        ],
    )
    got = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    pred = model.predict(x, verbose=0)
    ranks = np.sum(pred > pred[np.arange(40), labels][:, None], axis=-1)  # scores above the truth
    assert got["top_k_categorical_accuracy"] == pytest.approx(np.mean(ranks < 2))
    assert got["top1"] == pytest.approx(np.mean(ranks < 1))
    assert np.mean(ranks < 2) != np.mean(ranks < 5)  # k=2 is not the default's value

    model, x, labels = classifier(4, "softmax")
    model.compile(
        optimizer="sgd",
        loss="sparse_categorical_crossentropy",
        metrics=[metrics.SparseTopKCategoricalAccuracy(k=3, name="top3")],
    )
    got = model.evaluate(x, labels, verbose=0, return_dict=True)
    pred = model.predict(x, verbose=0)
    ranks = np.sum(pred > pred[np.arange(40), labels][:, None], axis=-1)
    assert got["top3"] == pytest.approx(np.mean(ranks < 3))

    model, x, labels = classifier(1, "sigmoid")
    y = (labels % 2).astype(np.float32)
    model.compile(
        optimizer="sgd",
        loss="binary_crossentropy",
        metrics=["accuracy", metrics.BinaryAccuracy(threshold=0.52, name="ba")],
    )
    got = model.evaluate(x, y, verbose=0, return_dict=True)
    pred = model.predict(x, verbose=0)[:, 0]
    assert got["accuracy"] == pytest.approx(np.mean((pred > 0.5) == y))
    assert got["ba"] == pytest.approx(np.mean((pred > np.float32(0.52)) == y))
    assert np.mean((pred > 0.5) == y) != np.mean((pred > np.float32(0.52)) == y)
    # On arrays, as Keras: the same argument.
    assert metrics.BinaryAccuracy(threshold=0.52)(y, pred).numpy() == pytest.approx(got["ba"])


def test_k_survives_a_keras_archive(tmp_path: Path) -> None:
    model, x, labels = classifier(4, "softmax")
    model.compile(
        optimizer="adam",
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy", metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")],
    )
    model.save(tmp_path / "m.keras")
    back = keras.models.load_model(tmp_path / "m.keras")
    got = back.evaluate(x, labels, verbose=0, return_dict=True)
    pred = back.predict(x, verbose=0)
    ranks = np.sum(pred > pred[np.arange(40), labels][:, None], axis=-1)
    assert got["top2"] == pytest.approx(np.mean(ranks < 2))
