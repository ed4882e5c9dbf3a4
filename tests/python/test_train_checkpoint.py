"""tf.train.Checkpoint, CheckpointManager and latest_checkpoint (crossover.train): what a model,
its optimizer and tf.Variables come back as after a save and a restore, the files and the folder's
`checkpoint` text as TensorFlow names and writes them, the manager's keeping and deleting, the
deferred restore of a model built later, and one clear error for each bad input."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from crossover import train as train_module

RNG = np.random.RandomState(0)
X = RNG.rand(64, 6).astype(np.float32)
Y = RNG.randint(0, 3, size=64)


def mlp(compiled: bool = True, input_shape: bool = True) -> keras.Sequential:
    first = [keras.Input((6,))] if input_shape else []
    model = keras.Sequential(
        first + [keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    if compiled:
        model.compile(
            optimizer=keras.optimizers.Adam(0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    return model


class TwoDense(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x, training=False):
        return self.out(self.hidden(x))


def files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


# --- models ---------------------------------------------------------------------------------
def test_a_trained_model_restored_into_a_fresh_one_predicts_the_same(tmp_path: Path) -> None:
    model = mlp()
    model.fit(X, Y, epochs=3, batch_size=16, verbose=0)
    ckpt = tf.train.Checkpoint(model=model)
    path = ckpt.save(tmp_path / "ckpts" / "model")  # the folder is made, as TensorFlow does
    assert path == str(tmp_path / "ckpts" / "model") + "-1"
    assert files(tmp_path / "ckpts") == [
        "checkpoint",
        "model-1.data-00000-of-00001",
        "model-1.index",
    ]
    tf.random.set_seed(7)
    fresh = mlp()
    assert not np.allclose(fresh.predict(X, verbose=0), model.predict(X, verbose=0))
    status = tf.train.Checkpoint(model=fresh).restore(path)
    status.assert_consumed()  # the weights, and the optimizer's step count and learning rate
    np.testing.assert_array_equal(fresh.predict(X, verbose=0), model.predict(X, verbose=0))
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_the_weights_are_keyed_layer_by_layer_as_tf_keras_2_keyed_them(tmp_path: Path) -> None:
    model = mlp()
    path = tf.train.Checkpoint(net=model).write(str(tmp_path / "w"))
    assert path == str(tmp_path / "w")
    listed = dict((k, tuple(s)) for k, s in tf.train.list_variables(path))
    assert listed["net/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"] == (6, 8)
    assert listed["net/layer_with_weights-1/bias/.ATTRIBUTES/VARIABLE_VALUE"] == (3,)
    assert listed["net/optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == ()
    np.testing.assert_array_equal(
        tf.train.load_variable(path, "net/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"),
        model.get_weights()[0],
    )


def test_a_subclassed_model_not_built_yet_gets_its_weights_when_it_is_built(
    tmp_path: Path,
) -> None:
    model = TwoDense()
    model.compile(optimizer="adam", loss="mse")
    model.fit(X, np.eye(3, dtype=np.float32)[Y], epochs=2, batch_size=16, verbose=0)
    path = tf.train.Checkpoint(cnn=model).save(str(tmp_path / "sub"))
    fresh = TwoDense()
    status = tf.train.Checkpoint(cnn=fresh).restore(path).expect_partial()
    with pytest.raises(AssertionError, match="not built yet"):
        status.assert_consumed()
    np.testing.assert_array_equal(fresh.predict(X, verbose=0), model.predict(X, verbose=0))
    # The optimizer (compiled into the saved model) has no object here: only that is unused.
    with pytest.raises(AssertionError, match="cnn/optimizer/_iterations"):
        status.assert_consumed()
    status.assert_existing_objects_matched()


def test_a_sequential_built_later_gets_its_weights_at_build(tmp_path: Path) -> None:
    model = mlp()
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "m"))
    later = mlp(compiled=False, input_shape=False)
    tf.train.Checkpoint(model=later).restore(path).expect_partial()
    later.build((None, 6))
    for a, b in zip(later.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_sequential_compiled_before_its_shape_is_known_is_refused_saying_what_to_do(
    tmp_path: Path,
) -> None:
    path = tf.train.Checkpoint(model=mlp()).save(str(tmp_path / "m"))
    compiled = mlp(compiled=True, input_shape=False)
    with pytest.raises(NotImplementedError, match=r"input shape .*model\.build"):
        tf.train.Checkpoint(model=compiled).restore(path)
    waiting = mlp(compiled=False, input_shape=False)
    tf.train.Checkpoint(model=waiting).restore(path).expect_partial()
    with pytest.raises(NotImplementedError, match="built by the engine inside fit"):
        waiting.compile(optimizer="adam", loss="mse")  # never a silent fit from fresh weights


def test_two_restores_waiting_for_one_build_both_apply_the_later_winning(tmp_path) -> None:
    first, second = mlp(), mlp()
    a = tf.train.Checkpoint(model=first).save(str(tmp_path / "a"))
    b = tf.train.Checkpoint(model=second).save(str(tmp_path / "b"))
    later = TwoDense()
    one = tf.train.Checkpoint(model=later).restore(a).expect_partial()
    two = tf.train.Checkpoint(model=later).restore(b).expect_partial()
    later.build((None, 6))
    np.testing.assert_array_equal(later.predict(X, verbose=0), second.predict(X, verbose=0))
    one.assert_existing_objects_matched()
    two.assert_existing_objects_matched()


def test_layers_are_kept_and_a_model_run_in_python_is_refused_naming_them(tmp_path) -> None:
    class Untraceable(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(3)

        def call(self, x):
            return self.dense(tf.sin(x))  # sin: not an op the engine's graph has

    model = Untraceable()
    model(X[:2])  # runs call() in Python, on the values
    with pytest.raises(NotImplementedError, match=r"save the layers themselves"):
        tf.train.Checkpoint(model=model).save(str(tmp_path / "m"))
    path = tf.train.Checkpoint(dense=model.dense).save(str(tmp_path / "m"))
    assert path.endswith("m-1")  # the refused save did not count
    other = keras.layers.Dense(3)
    other(X[:1])
    tf.train.Checkpoint(dense=other).restore(path).assert_consumed()
    for a, b in zip(other.get_weights(), model.dense.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(NotImplementedError, match="is not built yet, so its weights"):
        tf.train.Checkpoint(dense=keras.layers.Dense(3)).restore(path)


def test_a_model_and_its_optimizer_round_trip_the_step_count_and_learning_rate(
    tmp_path: Path,
) -> None:
    model = mlp()
    model.fit(X, Y, epochs=1, batch_size=16, verbose=0)  # 4 steps
    model.optimizer.learning_rate = 0.005
    ckpt = tf.train.Checkpoint(optimizer=model.optimizer, model=model)
    path = ckpt.save(str(tmp_path / "c"))
    optimizer = keras.optimizers.Adam(0.1)
    fresh = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8), keras.layers.Dense(3)])
    tf.train.Checkpoint(optimizer=optimizer, model=fresh).restore(path).assert_consumed()
    assert int(optimizer.iterations) == 4
    assert float(optimizer.learning_rate) == pytest.approx(0.005)


# --- variables and a from-scratch loop's optimizer -------------------------------------------
def test_variables_of_every_dtype_round_trip(tmp_path: Path) -> None:
    values = {
        "f32": tf.Variable(RNG.rand(3, 4).astype(np.float32)),
        "f64": tf.Variable(RNG.rand(5)),
        "i32": tf.Variable(7),
        "i64": tf.Variable(np.arange(4, dtype=np.int64)),
        "flag": tf.Variable(True),
    }
    path = tf.train.Checkpoint(**values).save(str(tmp_path / "v"))
    fresh = {k: tf.Variable(np.zeros_like(v.numpy())) for k, v in values.items()}
    tf.train.Checkpoint(**fresh).restore(path).assert_consumed()
    for k, v in values.items():
        np.testing.assert_array_equal(fresh[k].numpy(), v.numpy())
        assert fresh[k].numpy().dtype == v.numpy().dtype


def sgd_steps(w, b, optimizer, steps: int) -> None:
    x = RNG.rand(16, 4).astype(np.float32)
    y = RNG.randint(0, 3, size=16)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, w) + b
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
        optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))


@pytest.mark.parametrize(
    "make",
    [
        lambda: keras.optimizers.Adam(0.05),
        lambda: keras.optimizers.Adam(0.05, amsgrad=True),
        lambda: keras.optimizers.SGD(0.1, momentum=0.9),
        lambda: keras.optimizers.RMSprop(0.01),
        lambda: keras.optimizers.Nadam(0.01),
    ],
)
def test_a_from_scratch_loop_resumes_exactly_from_its_checkpoint(make, tmp_path: Path) -> None:
    """Variables and the optimizer's slots and step count (Adam's bias correction, Nadam's
    product) are restored: training on from the checkpoint is bit for bit training on."""
    state = np.random.RandomState(1)
    w = tf.Variable(state.rand(4, 3).astype(np.float32), name="weight")
    b = tf.Variable(np.zeros(3, np.float32), name="bias")
    optimizer = make()
    sgd_steps(w, b, optimizer, 5)
    path = tf.train.Checkpoint(W=w, b=b, optimizer=optimizer).save(str(tmp_path / "loop"))
    snapshot = RNG.get_state()
    sgd_steps(w, b, optimizer, 3)
    RNG.set_state(snapshot)
    w2 = tf.Variable(np.zeros((4, 3), np.float32))
    b2 = tf.Variable(np.ones(3, np.float32))
    optimizer2 = make()
    tf.train.Checkpoint(W=w2, b=b2, optimizer=optimizer2).restore(path).assert_consumed()
    assert int(optimizer2.iterations) == 5
    sgd_steps(w2, b2, optimizer2, 3)
    np.testing.assert_array_equal(w2.numpy(), w.numpy())
    np.testing.assert_array_equal(b2.numpy(), b.numpy())
    assert int(optimizer2.iterations) == int(optimizer.iterations) == 8


def test_attributes_are_tracked_and_restored_on_assignment(tmp_path: Path) -> None:
    ckpt = tf.train.Checkpoint()
    ckpt.step = tf.Variable(1)
    ckpt.step.assign_add(1)
    ckpt.note = "not trackable: not saved"
    path = ckpt.save(str(tmp_path / "s"))
    assert [k for k, _ in tf.train.list_variables(path)] == [
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "step/.ATTRIBUTES/VARIABLE_VALUE",
    ]
    later = tf.train.Checkpoint()
    status = later.restore(path)
    assert int(later.save_counter.numpy()) == 1
    later.step = tf.Variable(100)  # TensorFlow's restore-on-assignment
    assert int(later.step.numpy()) == 2
    status.assert_consumed()


def test_nested_checkpoints_lists_and_dicts(tmp_path: Path) -> None:
    inner = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0]))
    ckpt = tf.train.Checkpoint(inner=inner, vs=[tf.Variable(3.0)], d={"a/b": tf.Variable(4.0)})
    path = ckpt.write(str(tmp_path / "n"))
    keys = [k for k, _ in tf.train.list_variables(path)]
    assert keys == [
        "d/a.Sb/.ATTRIBUTES/VARIABLE_VALUE",
        "inner/v/.ATTRIBUTES/VARIABLE_VALUE",
        "vs/0/.ATTRIBUTES/VARIABLE_VALUE",
    ]
    other = tf.train.Checkpoint(
        inner=tf.train.Checkpoint(v=tf.Variable([0.0, 0.0])),
        vs=[tf.Variable(0.0)],
        d={"a/b": tf.Variable(0.0)},
    )
    other.read(path).assert_consumed()
    assert other.inner.v.numpy().tolist() == [1.0, 2.0] and float(other.d["a/b"].numpy()) == 4.0


def test_write_and_read_leave_the_counter_and_the_checkpoint_file_alone(tmp_path: Path) -> None:
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    assert ckpt.write(str(tmp_path / "w")) == str(tmp_path / "w")
    assert files(tmp_path) == ["w.data-00000-of-00001", "w.index"]  # no `checkpoint` file
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    ckpt.save(str(tmp_path / "s"))
    ckpt.write(str(tmp_path / "w"))  # overwritten in place: no temporary file left
    assert int(ckpt.save_counter.numpy()) == 1
    other = tf.train.Checkpoint(v=tf.Variable(0.0))
    other.save_counter.assign(5)
    other.read(str(tmp_path / "w")).expect_partial()
    assert int(other.save_counter.numpy()) == 5 and float(other.v.numpy()) == 1.0
    assert files(tmp_path) == [
        "checkpoint",
        "s-1.data-00000-of-00001",
        "s-1.index",
        "w.data-00000-of-00001",
        "w.index",
    ]


# --- the manager and latest_checkpoint ------------------------------------------------------
def test_the_manager_keeps_max_to_keep_and_deletes_the_older_files(tmp_path: Path) -> None:
    folder = tmp_path / "managed"
    ckpt = tf.train.Checkpoint(v=tf.Variable(0.0))
    manager = tf.train.CheckpointManager(ckpt, str(folder), max_to_keep=3)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    saved = []
    for i in range(5):
        ckpt.v.assign(float(i))
        saved.append(manager.save())
    assert saved == [os.path.join(str(folder), f"ckpt-{i}") for i in range(1, 6)]
    assert manager.checkpoints == saved[2:]
    assert manager.latest_checkpoint == saved[-1]
    kept = [f"ckpt-{i}{s}" for i in (3, 4, 5) for s in (".data-00000-of-00001", ".index")]
    assert files(folder) == ["checkpoint"] + kept
    text = (folder / "checkpoint").read_text()
    lines = [l for l in text.splitlines() if "timestamp" not in l]
    assert lines == [
        'model_checkpoint_path: "ckpt-5"',
        'all_model_checkpoint_paths: "ckpt-3"',
        'all_model_checkpoint_paths: "ckpt-4"',
        'all_model_checkpoint_paths: "ckpt-5"',
    ]
    assert text.count("all_model_checkpoint_timestamps: ") == 3
    assert tf.train.latest_checkpoint(str(folder)) == saved[-1]
    # A new manager on the folder takes over what the file lists.
    again = tf.train.CheckpointManager(ckpt, str(folder), max_to_keep=3)
    assert again.checkpoints == saved[2:] and again.latest_checkpoint == saved[-1]
    assert again.save(checkpoint_number=42) == os.path.join(str(folder), "ckpt-42")
    assert again.checkpoints == saved[3:] + [os.path.join(str(folder), "ckpt-42")]
    restored = tf.train.Checkpoint(v=tf.Variable(-1.0))
    assert tf.train.CheckpointManager(restored, str(folder), 3).restore_or_initialize() == (
        os.path.join(str(folder), "ckpt-42")
    )
    assert float(restored.v.numpy()) == 4.0


def test_the_manager_without_max_to_keep_keeps_all_and_checks_its_arguments(tmp_path) -> None:
    ckpt = tf.train.Checkpoint(v=tf.Variable(0.0))
    manager = tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=None)
    for _ in range(4):
        manager.save()
    assert len(manager.checkpoints) == 4
    with pytest.raises(ValueError, match="positive integer or `None` for `max_to_keep`, got 0"):
        tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=0)
    with pytest.raises(ValueError, match="step_counter"):
        tf.train.CheckpointManager(ckpt, str(tmp_path), 2, checkpoint_interval=5)
    called = []
    empty = tf.train.CheckpointManager(
        ckpt, str(tmp_path / "e"), 2, init_fn=lambda: called.append(1)
    )
    assert empty.restore_or_initialize() is None and called == [1]


def test_the_manager_saves_only_every_checkpoint_interval_steps(tmp_path: Path) -> None:
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(step=step)
    manager = tf.train.CheckpointManager(
        ckpt, str(tmp_path), 5, step_counter=step, checkpoint_interval=10
    )
    saved = []
    for s in range(0, 30, 4):
        step.assign(s)
        saved.append(manager.save())
    # Saved at steps 0, 12 (0 + 10 reached) and 24 (12 + 10 reached), as TensorFlow does.
    assert [p is not None for p in saved] == [True, False, False, True, False, False, True, False]


def test_latest_checkpoint_is_none_without_a_checkpoint(tmp_path: Path) -> None:
    assert tf.train.latest_checkpoint(str(tmp_path / "nowhere")) is None
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    path = tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "x"))
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == path and state.all_model_checkpoint_paths == [path]
    os.remove(path + ".index")  # named by the file, but gone
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


def test_the_checkpoint_file_quotes_paths_as_protobuf_text_does(tmp_path: Path) -> None:
    state = train_module.CheckpointState('a "q" \\ é\n', ['a "q" \\ é\n'], [1.5], 0.25)
    text = str(state)
    assert text.splitlines()[0] == r'model_checkpoint_path: "a \"q\" \\ \303\251\n"'
    parsed = train_module._parse_state(text)
    assert parsed.model_checkpoint_path == 'a "q" \\ é\n'
    assert parsed.all_model_checkpoint_timestamps == [1.5]
    assert parsed.last_preserved_timestamp == 0.25


def test_under_python_m_crossover_tensorflow_train_is_this_module(tmp_path: Path) -> None:
    code = (
        "import tensorflow as tf\n"
        "from tensorflow.train import Checkpoint\n"
        "c = Checkpoint(v=tf.Variable(2.0))\n"
        "print(c.save('ck/x'), tf.train.latest_checkpoint('ck'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "crossover", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ck/x-1", "ck/x-1"]


# --- bad input: one clear error each --------------------------------------------------------
def test_a_missing_checkpoint_is_not_found_saying_what_to_give(tmp_path: Path) -> None:
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    path = ckpt.save(str(tmp_path / "pre"))
    with pytest.raises(tf.errors.NotFoundError, match=r"no checkpoint at .*nope-1\.index does not"):
        ckpt.restore(str(tmp_path / "nope-1"))
    with pytest.raises(FileNotFoundError, match="missing the checkpoint's number"):
        ckpt.restore(str(tmp_path / "pre"))
    with pytest.raises(FileNotFoundError, match=r"is a folder.*latest_checkpoint"):
        ckpt.restore(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="without the file's suffix"):
        ckpt.restore(path + ".index")
    os.remove(path + ".data-00000-of-00001")
    with pytest.raises(FileNotFoundError, match="has no data file"):
        ckpt.restore(path)


def test_mismatched_shapes_and_dtypes_name_the_object_the_key_and_the_file(
    tmp_path: Path,
) -> None:
    model = mlp()
    path = tf.train.Checkpoint(model=model, v=tf.Variable(1.0)).save(str(tmp_path / "m"))
    wider = keras.Sequential([keras.Input((6,)), keras.layers.Dense(9), keras.layers.Dense(3)])
    before = wider.get_weights()
    with pytest.raises(
        ValueError, match=r"weight 'dense_\d+/kernel' of model .* has shape \(6, 9\)"
    ):
        tf.train.Checkpoint(model=wider).restore(path)
    for a, b in zip(wider.get_weights(), before):  # nothing half-restored
        np.testing.assert_array_equal(a, b)
    with pytest.raises(tf.errors.InvalidArgumentError, match="is int32, but the checkpoint"):
        tf.train.Checkpoint(v=tf.Variable(1)).restore(path)
    with pytest.raises(
        ValueError, match=r"has shape \(2,\), but the checkpoint .* holds shape \(\)"
    ):
        tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).restore(path)


def test_names_not_in_the_checkpoint_are_what_the_asserts_report(tmp_path: Path, capfd) -> None:
    path = tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "c"))
    status = tf.train.Checkpoint(w=tf.Variable(5.0)).restore(path)
    with pytest.raises(AssertionError, match=r"variable .* \(w/\.ATTRIBUTES/VARIABLE_VALUE\)"):
        status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match=r"found no object at their place: variable"):
        status.assert_consumed()
    status.assert_nontrivial_match()  # the save_counter matched, as in TensorFlow
    del status
    assert "values in the checkpoint were not restored" in capfd.readouterr().err
    tf.train.Checkpoint(w=tf.Variable(5.0)).restore(path).expect_partial()
    assert capfd.readouterr().err == ""
    nothing = tf.train.Checkpoint(v=tf.Variable(1.0)).restore(None)
    with pytest.raises(AssertionError, match="No checkpoint specified"):
        nothing.assert_consumed()
    with pytest.raises(tf.errors.NotFoundError, match="Key nope not found in checkpoint"):
        tf.train.load_variable(path, "nope")


def test_what_is_not_trackable_is_refused_when_given() -> None:
    with pytest.raises(ValueError, match="expecting x to be a trackable object"):
        tf.train.Checkpoint(x=3)
    with pytest.raises(ValueError, match="expecting arr to be a trackable object"):
        tf.train.Checkpoint(arr=np.ones(3))
    with pytest.raises(TypeError, match="must be a tf.train.Checkpoint"):
        tf.train.CheckpointManager(object(), "d", 3)
    with pytest.raises(AttributeError, match="crossover.train.ExponentialMovingAverage is not"):
        tf.train.ExponentialMovingAverage


def test_a_tensorflow_checkpoint_is_refused_naming_the_way_across(tmp_path: Path) -> None:
    # A TensorFlow .index is a LevelDB table: it ends with the table's magic number.
    (tmp_path / "tf-1.index").write_bytes(b"\x00" * 40 + bytes.fromhex("57fb808b247547db"))
    (tmp_path / "tf-1.data-00000-of-00001").write_bytes(b"\x00" * 16)
    with pytest.raises(NotImplementedError, match=r"TensorFlow checkpoint.*save_weights"):
        tf.train.Checkpoint(v=tf.Variable(1.0)).restore(str(tmp_path / "tf-1"))


def test_damaged_or_mismatched_files_are_data_loss(tmp_path: Path) -> None:
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    first = ckpt.save(str(tmp_path / "a"))
    second = ckpt.save(str(tmp_path / "a"))
    data = ".data-00000-of-00001"
    os.replace(first + data, second + data)  # data of another save under this index
    with pytest.raises(tf.errors.DataLossError, match="does not belong to"):
        ckpt.restore(second)
    Path(second + ".index").write_text("{ not json")
    with pytest.raises(ValueError, match="does not parse as JSON"):  # DataLossError: ValueError
        ckpt.restore(second)
    Path(second + ".index").write_text("garbage")
    with pytest.raises(tf.errors.DataLossError, match="not a checkpoint index"):
        ckpt.restore(second)


def test_a_checkpoint_file_that_is_not_ours_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").write_text("my own notes\n")
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    with pytest.raises(ValueError, match="is not a checkpoint state file"):
        ckpt.save(str(tmp_path / "x"))
    with pytest.raises(ValueError, match="is not a checkpoint state file"):
        tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2).save()
    assert files(tmp_path) == ["checkpoint"]  # nothing written before the refusal
    assert (tmp_path / "checkpoint").read_text() == "my own notes\n"
    (tmp_path / "dir.index").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder, where a checkpoint file goes"):
        ckpt.write(str(tmp_path / "dir"))
