"""TensorFlow's eager ops under tf.GradientTape: every op's gradient against float64 central
finite differences, and the tape's rules (persistent, nested, watch, stop_recording, None for
what the target does not reach, sums for non-scalar targets)."""

from typing import Any, Callable

import numpy as np
import pytest

import crossover as tf

RS = np.random.RandomState(0)


def numeric_gradient(f: Callable[..., Any], args: list[np.ndarray], i: int) -> np.ndarray:
    """d sum(f(args)) / d args[i] by central differences, in float64."""
    x = args[i]
    grad = np.zeros_like(x)
    eps = 1e-6
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + eps
        up = float(np.sum(np.asarray(f(*[tf.constant(a) for a in args]))))
        x[index] = saved - eps
        down = float(np.sum(np.asarray(f(*[tf.constant(a) for a in args]))))
        x[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


def check(f: Callable[..., Any], *args: np.ndarray, wrt: Any = None) -> None:
    """The tape's gradient of f (summed, as TensorFlow sums a non-scalar target) with respect to
    each float64 argument equals the finite differences."""
    args = [np.array(a, dtype=np.float64) for a in args]
    wrt = range(len(args)) if wrt is None else wrt
    tensors = [tf.constant(a) for a in args]
    with tf.GradientTape(persistent=True) as tape:
        for t in tensors:
            tape.watch(t)
        out = f(*tensors)
    for i in wrt:
        got = tape.gradient(out, tensors[i])
        assert got is not None, f"no gradient for argument {i}"
        assert got.dtype == np.float64 and got.shape == args[i].shape
        np.testing.assert_allclose(
            np.asarray(got), numeric_gradient(f, args, i), rtol=1e-5, atol=1e-7
        )


def r(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RS.uniform(low, high, shape)


POSITIVE = dict(low=0.5, high=2.0)
W = {shape: r(*shape) for shape in [(3, 4), (4, 3), (3, 1, 4), (1, 2), (5, 4), (3, 2, 4)]}

UNARY = {
    "exp": tf.exp,
    "log": (tf.math.log, POSITIVE),
    "sqrt": (tf.sqrt, POSITIVE),
    "square": tf.square,
    "abs": tf.abs,
    "negative": tf.negative,
    "unary minus": lambda x: -x,
    "log1p": (tf.math.log1p, POSITIVE),
    "rsqrt": (tf.math.rsqrt, POSITIVE),
    "relu": tf.nn.relu,
    "sigmoid": tf.nn.sigmoid,
    "tanh": tf.nn.tanh,
    "softmax": tf.nn.softmax,
    "softmax axis 0": lambda x: tf.nn.softmax(x, axis=0),
    "log_softmax": tf.nn.log_softmax,
    "leaky_relu": lambda x: tf.nn.leaky_relu(x, alpha=0.1),
    "elu": tf.nn.elu,
    "softplus": tf.nn.softplus,
    "l2_loss": tf.nn.l2_loss,
    "reduce_sum": tf.reduce_sum,
    "reduce_sum axis": lambda x: tf.reduce_sum(x, axis=1),
    "reduce_sum keepdims": lambda x: tf.reduce_sum(x, axis=0, keepdims=True),
    "reduce_mean": tf.reduce_mean,
    "reduce_mean axes": lambda x: tf.reduce_mean(x, axis=[0, 1]),
    "reduce_max": lambda x: tf.reduce_max(x, axis=1),
    "reduce_min keepdims": lambda x: tf.reduce_min(x, axis=0, keepdims=True),
    "reshape": lambda x: tf.reshape(x, [-1]) * tf.range(12, dtype=tf.float64),
    "transpose": lambda x: tf.transpose(x) * W[(4, 3)],
    "transpose perm": lambda x: tf.transpose(tf.reshape(x, [2, 3, 2]), perm=[2, 0, 1]) ** 2,
    "expand_dims": lambda x: tf.expand_dims(x, 1) * W[(3, 1, 4)],
    "cast": lambda x: tf.cast(x, tf.float64) * 2.0,
    "clip_by_value": lambda x: tf.clip_by_value(x, -0.5, 0.5) * W[(3, 4)],
    "slice columns": lambda x: x[:, 0] * 3.0,
    "slice rows": lambda x: x[1:3] ** 2,
    "index and newaxis": lambda x: x[None, 2, ::2] * W[(1, 2)],
    "identity": tf.identity,
    "pow 3": lambda x: x**3,
    "2 ** x": lambda x: 2.0**x,
    "broadcast_to": lambda x: tf.broadcast_to(x[0], [5, 4]) * W[(5, 4)],
    "gather": lambda x: tf.gather(x, [2, 0, 2]) * W[(3, 4)],
    "convert_to_tensor": lambda x: tf.convert_to_tensor(x) * 2.0,
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_gradient_matches_finite_differences(name: str) -> None:
    op = UNARY[name]
    op, bounds = op if isinstance(op, tuple) else (op, {})
    check(op, r(3, 4, **bounds))


BINARY = {
    "add": tf.add,
    "+": lambda x, y: x + y,
    "subtract": tf.subtract,
    "-": lambda x, y: x - y,
    "multiply": tf.multiply,
    "*": lambda x, y: x * y,
    "divide": tf.divide,
    "/": lambda x, y: x / y,
    "maximum": tf.maximum,
    "minimum": tf.minimum,
    "pow": (tf.pow, POSITIVE),
    "**": (lambda x, y: x**y, POSITIVE),
    "math.add": tf.math.add,
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_gradient_matches_finite_differences_with_broadcasting(name: str) -> None:
    op = BINARY[name]
    op, bounds = op if isinstance(op, tuple) else (op, {})
    check(op, r(3, 4, **bounds), r(3, 4, **bounds) + 0.1)
    check(op, r(3, 4, **bounds), r(4, **bounds) + 0.1)  # a row broadcast over the rows
    check(op, r(3, 1, **bounds), r(1, 4, **bounds) + 0.1)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_gradient_with_each_transposition(ta: bool, tb: bool) -> None:
    a = r(4, 3) if ta else r(3, 4)
    b = r(5, 4) if tb else r(4, 5)
    check(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)
    if not (ta or tb):
        check(lambda x, y: x @ y, a, b)
        check(lambda x, y: tf.matmul(x, y), r(2, 3, 4), r(4, 5))  # batched, broadcast


def test_a_cast_between_floats_passes_the_gradient_back_in_the_source_dtype() -> None:
    x = tf.constant(np.array([0.25, -1.5]))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.cast(x, tf.float32) * 3.0
    g = tape.gradient(y, x)
    assert g.dtype == tf.float64
    np.testing.assert_array_equal(g, [3.0, 3.0])


def test_concat_and_stack_gradients() -> None:
    check(lambda x, y: tf.concat([x, y], axis=0) * W[(5, 4)], r(3, 4), r(2, 4))
    check(lambda x, y: tf.concat([x, y], axis=1) ** 2, r(3, 4), r(3, 2))
    check(lambda x, y: tf.stack([x, y], axis=1) * W[(3, 2, 4)], r(3, 4), r(3, 4))


def test_loss_gradients() -> None:
    logits = r(5, 4)
    labels = np.array([0, 3, 1, 1, 2])
    check(
        lambda x: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x),
        logits,
    )
    dense = RS.dirichlet(np.ones(4), size=5)
    check(lambda z, x: tf.nn.softmax_cross_entropy_with_logits(labels=z, logits=x), dense, logits)
    check(
        lambda z, x: tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
        RS.uniform(0, 1, (5, 4)),
        logits,
    )


def test_an_mlp_loss_gradient_by_variables() -> None:
    x, y = r(6, 5), np.array([0, 1, 2, 0, 1, 2])

    def loss(w1: Any, b1: Any, w2: Any) -> Any:
        h = tf.nn.relu(tf.matmul(tf.constant(x), w1) + b1)
        logits = tf.matmul(h, w2)
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )

    check(loss, r(5, 4), r(4), r(4, 3))


def test_variables_are_watched_when_read_and_gradients_follow_their_structure() -> None:
    w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    b = tf.Variable([0.5, -0.5])
    frozen = tf.Variable([1.0, 1.0], trainable=False)
    assert w.dtype == tf.float32 and w.shape == (2, 2) and w.trainable and not frozen.trainable
    x = tf.constant([[1.0, 1.0]])
    with tf.GradientTape(persistent=True) as tape:
        y = tf.matmul(x, w) + b + frozen  # non-scalar: summed
    g = tape.gradient(y, {"w": w, "pair": (b, frozen)})
    np.testing.assert_array_equal(g["w"], [[1, 1], [1, 1]])
    np.testing.assert_array_equal(g["pair"][0], [1, 1])
    assert g["pair"][1] is None  # not trainable: not watched
    assert [v.name for v in tape.watched_variables()] == [w.name, b.name]
    single = tape.gradient(y, b)
    np.testing.assert_array_equal(single, [1, 1])
    zero = tape.gradient(y, frozen, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(zero, [0, 0])


def test_unconnected_sources_give_none_and_integer_results_stop_the_gradient() -> None:
    a, b = tf.Variable(2.0), tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        y = a * 5.0
        rounded = tf.cast(a, tf.int32)
    assert tape.gradient(y, [a, b]) == [tape.gradient(y, a), None]
    assert float(tape.gradient(y, [a, b])[0]) == 5.0
    assert tape.gradient(rounded, a) is None


def test_persistent_and_non_persistent_tapes() -> None:
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert float(tape.gradient(y, x)) == 6.0
    assert float(tape.gradient(z, x)) == 108.0  # 4 x^3


def test_nested_tapes_give_first_and_second_order_gradients() -> None:
    x = tf.Variable(2.0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = x**3
        dy = inner.gradient(y, x)
    d2y = outer.gradient(dy, x)
    assert float(dy) == 12.0 and float(d2y) == 12.0  # 3x^2, 6x

    # Two models' losses, each tape its own (a GAN's generator and discriminator).
    g, d = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        fake = g * 2.0
        score = tf.reduce_sum(fake) * d
        gen_loss, disc_loss = -score, score * score
    np.testing.assert_allclose(gen_tape.gradient(gen_loss, g), [-6.0, -6.0])
    np.testing.assert_allclose(disc_tape.gradient(disc_loss, d), [2 * 18.0 * 6.0])


def test_second_order_through_the_activations_and_the_loss() -> None:
    x = tf.constant(np.array([[0.3, -0.2, 0.5]]))
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(tf.nn.sigmoid(x) * tf.nn.tanh(x))
        dy = inner.gradient(y, x)
        total = tf.reduce_sum(dy)
    got = outer.gradient(total, x)
    xs = np.array([[0.3, -0.2, 0.5]])

    def first(v: np.ndarray) -> np.ndarray:
        s, t = 1 / (1 + np.exp(-v)), np.tanh(v)
        return s * (1 - s) * t + s * (1 - t**2)

    eps = 1e-6
    np.testing.assert_allclose(got, (first(xs + eps) - first(xs - eps)) / (2 * eps), rtol=1e-5)


def test_watch_stop_recording_and_reset() -> None:
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        assert tape.gradient(x * 2.0, x) is None  # not watched
        tape.watch(x)
        y = x * 2.0
        with tape.stop_recording():
            z = x * 3.0
    np.testing.assert_array_equal(tape.gradient(y, x), [2.0, 2.0])
    assert tape.gradient(z, x) is None
    tape.reset()
    assert tape.gradient(y, x) is None
    with pytest.raises(ValueError, match="not a tf.Tensor or tf.Variable"):
        tape.watch(np.zeros(2))
    v = tf.Variable(1.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        y = v * 2.0
    assert tape.gradient(y, v) is None


def test_output_gradients_weight_the_target() -> None:
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    np.testing.assert_array_equal(tape.gradient(y, x, output_gradients=[1.0, 10.0]), [2, 40])


def test_variable_methods() -> None:
    v = tf.Variable(tf.zeros([2, 3]), name="w")
    assert v.name == "w" and v.shape == (2, 3) and v.shape.as_list() == [2, 3]
    v.assign(tf.ones([2, 3]))
    v.assign_add(tf.ones([2, 3]))
    v.assign_sub(0.5 * tf.ones([2, 3]))
    np.testing.assert_array_equal(v.numpy(), np.full((2, 3), 1.5, np.float32))
    before = v.read_value()
    v.assign(tf.zeros([2, 3]))
    assert float(tf.reduce_sum(before)) == 9.0  # a value read keeps its numbers
    assert tf.Variable(3).dtype == tf.int32 and tf.Variable(np.zeros(2)).dtype == tf.float64
    assert tf.Variable([1.0, 2.0]).dtype == tf.float32
    with pytest.raises(ValueError, match="must match"):
        v.assign(tf.zeros([3, 3]))


def test_dtype_rules_are_tensorflows() -> None:
    a = tf.constant([1.0, 2.0])
    assert (a * 2).dtype == tf.float32 and (a + np.array([1.0, 2.0])).dtype == tf.float32
    assert (tf.constant([1, 2]) / tf.constant([2, 2])).dtype == tf.float64
    with pytest.raises(tf.errors.InvalidArgumentError, match="float32 tensor but is a float64"):
        a + tf.constant(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="cannot convert"):
        tf.constant([1, 2]) + 1.5
    with pytest.raises(tf.errors.InvalidArgumentError, match="int32 or int64"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=np.array([0, 1], np.uint8), logits=tf.ones([2, 3])
        )
    with pytest.raises(tf.errors.InvalidArgumentError, match="label value of 5"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 5], logits=tf.ones([2, 3]))
    with pytest.raises(TypeError, match="exp: expected a floating-point tensor"):
        tf.exp(tf.constant([1, 2]))


def test_random_draws_follow_the_seed() -> None:
    tf.random.set_seed(5)
    a = [tf.random.normal([1000]), tf.random.uniform([4], seed=3), tf.random.uniform([4], seed=3)]
    tf.random.set_seed(5)
    b = [tf.random.normal([1000]), tf.random.uniform([4], seed=3), tf.random.uniform([4], seed=3)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[1], a[2])  # an op seed's sequence goes on
    assert a[0].dtype == tf.float32 and abs(float(tf.reduce_mean(a[0]))) < 0.2
    t = tf.random.truncated_normal([10000], stddev=2.0)
    assert float(tf.reduce_max(tf.abs(t))) <= 4.0
    ints = tf.random.uniform([100], minval=0, maxval=10, dtype=tf.int32)
    assert (
        ints.dtype == tf.int32 and 0 <= int(tf.reduce_min(ints)) and int(tf.reduce_max(ints)) < 10
    )
    with pytest.raises(ValueError, match="maxval"):
        tf.random.uniform([2], dtype=tf.int32)


def test_keras_loss_functions_and_objects_on_recorded_eager_ops_are_differentiated() -> None:
    # keras.losses on eager ops' results under a tape (a from-scratch model's softmax, as
    # Deep Learning with Python's chapter 2 writes it): Keras's formula in the eager ops.
    losses = tf.keras.losses
    logits = r(5, 4)
    labels = np.array([0, 3, 1, 1, 2])
    onehot = np.eye(4)[labels]
    probs = lambda x: tf.nn.softmax(x)  # noqa: E731
    check(lambda x: losses.sparse_categorical_crossentropy(labels, probs(x)), logits)
    check(lambda x: losses.sparse_categorical_crossentropy(labels, x, from_logits=True), logits)
    check(lambda x: losses.categorical_crossentropy(onehot, probs(x)), logits)
    check(lambda x: losses.categorical_crossentropy(onehot, x, from_logits=True), logits)
    check(lambda x: losses.categorical_crossentropy(onehot, probs(x), label_smoothing=0.1), logits)
    targets = RS.uniform(0, 1, (5, 4))
    check(lambda x: losses.binary_crossentropy(targets, tf.nn.sigmoid(x)), logits)
    check(lambda x: losses.binary_crossentropy(targets, x, from_logits=True), logits)
    check(lambda x: losses.mean_squared_error(targets, x), logits)
    check(lambda x: losses.mean_absolute_error(targets, x), logits)
    check(lambda x: losses.mean_squared_error(targets[:, 0], x[:, :1]), logits)  # (n,) vs (n, 1)
    # A loss object: the function's losses in float32 (Keras's loss dtype), reduced.
    x32 = tf.constant(logits.astype(np.float32))
    for make, fn, scale in [
        (losses.SparseCategoricalCrossentropy(), losses.sparse_categorical_crossentropy, 1 / 5),
        (losses.BinaryCrossentropy(), losses.binary_crossentropy, 1 / 5),
        (losses.MeanSquaredError(reduction="sum"), losses.mean_squared_error, 1.0),
    ]:
        y = labels if fn is losses.sparse_categorical_crossentropy else targets
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x32)
            p = probs(x32) if fn is not losses.mean_squared_error else x32
            whole, per_sample = make(y, p), fn(y, p)
        np.testing.assert_allclose(
            tape.gradient(whole, x32),
            np.asarray(tape.gradient(per_sample, x32)) * scale,
            1e-5,
            1e-8,
        )
    # The values are numpy's (outside a tape).
    w = tf.Variable(tf.ones([3, 2]))
    loss_object = losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        out = tf.matmul(tf.constant(RS.uniform(-1, 1, (4, 3)).astype(np.float32)), w)
        taped = loss_object(np.array([0, 1, 1, 0]), out)
    assert tape.gradient(taped, w) is not None
    assert float(taped) == pytest.approx(float(loss_object(np.array([0, 1, 1, 0]), out)), 1e-6)


def test_the_root_has_tensorflows_sigmoid_and_tanh() -> None:
    # tf.sigmoid and tf.tanh are TensorFlow 2's root names for tf.math's (and tf.nn's) ops.
    assert tf.sigmoid is tf.nn.sigmoid is tf.math.sigmoid
    assert tf.tanh is tf.nn.tanh is tf.math.tanh
    check(lambda x: tf.sigmoid(tf.tanh(x)), r(3, 4))


def test_sin_cos_tile_and_where_gradients() -> None:
    check(lambda x: tf.sin(tf.cos(x)), r(3, 4))
    check(lambda x: tf.tile(x, [2, 3]), r(2, 3))
    check(lambda x: tf.tile(x, [3, 1, 2]), r(1, 2, 2))
    condition = RS.uniform(size=(3, 4)) > 0.5
    check(lambda x, y: tf.where(condition, x, y), r(3, 4), r(1, 4))  # y broadcast
    assert tf.math.sin is tf.sin and tf.math.floor is tf.floor


def test_floor_and_round_have_no_gradient_as_in_tensorflow() -> None:
    x = tf.Variable([0.4, 1.5, 2.5, -1.5])
    with tf.GradientTape(persistent=True) as tape:
        f, r_ = tf.floor(x), tf.round(x)
    assert tape.gradient(f, x) is None and tape.gradient(r_, x) is None
    np.testing.assert_array_equal(r_, [0.0, 2.0, 2.0, -2.0])  # half to even
    np.testing.assert_array_equal(f, [0.0, 1.0, 2.0, -2.0])


def test_where_tile_reductions_size_and_rank_values() -> None:
    c = np.array([[True, False], [False, True]])
    np.testing.assert_array_equal(tf.where(c), [[0, 0], [1, 1]])
    assert tf.where(c).dtype == tf.int64
    with pytest.raises(ValueError, match="both be non-None"):
        tf.where(c, x=np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(tf.tile(tf.constant([[1, 2]]), [2, 2]), [[1, 2, 1, 2]] * 2)
    assert bool(tf.reduce_any(c)) and not bool(tf.reduce_all(c))
    np.testing.assert_array_equal(tf.reduce_all(c, axis=1), [False, False])
    assert int(tf.size(tf.zeros([2, 3]))) == 6 and tf.size(tf.zeros([2])).dtype == tf.int32
    assert int(tf.rank(tf.zeros([2, 3, 4]))) == 3
    with pytest.raises(ValueError, match="one value >= 0 per axis"):  # InvalidArgumentError
        tf.tile(tf.zeros([2, 2]), [2])


def test_keras_ops_on_tensors_are_recorded_as_tensorflows_ops():
    """keras.ops on the TensorFlow backend are TensorFlow's ops: a tape differentiates them
    (Keras 3's demo_custom_tf_workflow sums its loss with ops.sum)."""
    from crossover.keras import ops

    v = tf.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    y = np.ones((2, 2), np.float32)
    with tf.GradientTape() as tape:
        loss = ops.sum((y - ops.matmul(v, ops.ones((2, 2)))) ** 2) + ops.mean(ops.square(v))
    pred = np.asarray(v.numpy()) @ np.ones((2, 2), np.float32)
    want = -2 * (y - pred) @ np.ones((2, 2), np.float32).T + 2 * np.asarray(v.numpy()) / 4
    np.testing.assert_allclose(tape.gradient(loss, v), want, rtol=1e-6)
