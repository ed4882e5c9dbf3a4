#!/usr/bin/env python3
"""TensorFlow/Keras peer of the seed experiment (SMALL / BIG MLP, and Keras's MNIST convnet).

The seed experiment as a Keras user writes it: Sequential(Flatten, Dense(relu), Dropout(0.2), ...,
Dense(10, softmax)), compile(Adam(1e-3, 0.9, 0.999, 1e-7), sparse_categorical_crossentropy,
metrics=[accuracy]), fit(batch_size=32, shuffle=True). Keras computes the cross-entropy of a
softmax output from its logits internally (stable). Kernels glorot_uniform, biases zeros
(Keras's defaults).

Each epoch is timed with a callback (on_epoch_begin .. on_epoch_end): only the training loop.
If TensorFlow cannot be imported, prints {"peer":"tensorflow","available":false,...} and exits 0.

    bench/peers/.venv/bin/python bench/peers/keras_mlp.py --model small --threads 1 [--max-steps 300]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402


def main():
    args = pc.parse_args("TensorFlow/Keras peer of the crossover seed experiment")
    if args.autocast:
        print("keras_mlp.py: --autocast is PyTorch's; Keras's mixed precision is a dtype policy "
              "(bench/keras_mixed_precision.py)", file=sys.stderr)
        return 2
    pc.limit_threads_env(args.threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.device == "cpu":
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")  # keep a GPU build on the CPU
    try:
        import tensorflow as tf
        import keras
    except Exception as e:  # noqa: BLE001
        # Run with another interpreter (e.g. /usr/bin/python3)? Use the venv install-peers made.
        venv_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".venv", "bin", "python")
        if (os.access(venv_py, os.X_OK) and not os.environ.get("CROSSOVER_PEER_REEXEC")
                and os.path.abspath(sys.prefix) != os.path.dirname(os.path.dirname(venv_py))):
            os.environ["CROSSOVER_PEER_REEXEC"] = "1"
            os.execv(venv_py, [venv_py, os.path.abspath(__file__), *sys.argv[1:]])
        pc.emit({"peer": "tensorflow", "available": False,
                 "reason": f"import tensorflow failed ({type(e).__name__}: {e}) with "
                           f"{sys.executable}; run scripts/install-peers and use "
                           f"bench/peers/.venv/bin/python"})
        return 0

    if args.threads is not None:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.device == "cuda" and not tf.config.list_physical_devices("GPU"):
        pc.emit({"peer": "tensorflow", "version": tf.__version__, "available": False,
                 "device": "cuda", "reason": "TensorFlow sees no GPU (tensorflow-cpu, or no CUDA)"})
        return 0
    keras.utils.set_random_seed(args.seed)

    t_load = time.perf_counter()
    x_train, y_train, x_test, y_test = pc.load_data_or_exit(args.data)
    # Keras's validation_split takes the last fraction before shuffling; the epoch timed is the
    # training part only, as in pytorch_mlp.py.
    n = pc.split_validation(x_train, y_train, args.validation_split)[0].shape[0]
    pc.log(f"tensorflow {tf.__version__} / keras {keras.__version__}: loaded {n} train / "
           f"{x_test.shape[0]} test from {args.data} in {time.perf_counter() - t_load:.2f} s; "
           f"device {args.device}, threads {args.threads or 'default'}")

    L = keras.layers
    if args.model == "convnet":  # Keras's "Simple MNIST convnet" example, as written there
        model = keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            L.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            L.MaxPooling2D(pool_size=(2, 2)),
            L.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            L.MaxPooling2D(pool_size=(2, 2)),
            L.Flatten(),
            L.Dropout(0.5),
            L.Dense(10, activation="softmax"),
        ])
        x_train, x_test = x_train[..., None], x_test[..., None]
    elif args.model == "small":
        hidden = [L.Dense(128, activation="relu"), L.Dropout(0.2)]
    else:
        hidden = [L.Dense(1000, activation="relu"), L.Dropout(0.2),
                  L.Dense(1000, activation="relu"), L.Dropout(0.2)]
    if args.model != "convnet":
        model = keras.Sequential([keras.Input(shape=x_train.shape[1:]), L.Flatten(), *hidden,
                                  L.Dense(10, activation="softmax")])
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )

    steps_full = pc.steps_per_epoch(n, args.batch_size)
    steps_run = min(steps_full, args.max_steps) if args.max_steps else steps_full
    extrapolated = steps_run < steps_full

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds, self.steady = [], []
            self.t0 = self.t_warm = None

        def on_epoch_begin(self, epoch, logs=None):
            self.t_warm = None
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 == pc.WARMUP_STEPS:
                self.t_warm = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            t1 = time.perf_counter()
            elapsed = t1 - self.t0
            est, st = pc.epoch_estimate(elapsed, None if self.t_warm is None else self.t_warm - self.t0,
                                        steps_run, steps_full)
            self.seconds.append(est)
            self.steady.append(st)
            logs = logs or {}
            pc.log(f"epoch {epoch + 1}/{args.epochs}: {steps_run} steps in {elapsed:.3f} s"
                   + (f" (extrapolated to {self.seconds[-1]:.3f} s for {steps_full} steps)"
                      if extrapolated else "")
                   + f" - loss {float(logs.get('loss', float('nan'))):.4f}"
                   + f" - accuracy {float(logs.get('accuracy', float('nan'))):.4f}"
                   + (f" - val_accuracy {float(logs['val_accuracy']):.4f}"
                      if "val_accuracy" in logs else ""))

    timer = EpochTimer()
    fit_kwargs = dict(batch_size=args.batch_size, epochs=args.epochs, shuffle=True, verbose=0,
                      callbacks=[timer], validation_split=args.validation_split)
    if extrapolated:
        fit_kwargs["steps_per_epoch"] = steps_run
    hist = model.fit(x_train, y_train, **fit_kwargs)

    _, test_acc = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    pc.log(f"test accuracy {test_acc:.4f}")

    pc.emit({
        "peer": "tensorflow",
        "version": tf.__version__,
        "keras_version": keras.__version__,
        "model": args.model,
        "threads": args.threads,
        "device": args.device,
        "seconds_per_epoch": timer.seconds,
        "steady_seconds_per_epoch": timer.steady,
        "batch_size": args.batch_size,
        "validation_split": args.validation_split,
        "val_accuracy": [float(v) for v in hist.history.get("val_accuracy", [])],
        "steps_per_epoch": steps_full,
        "timed_steps": steps_run,
        "extrapolated": extrapolated,
        "extrapolation": pc.EXTRAPOLATION if extrapolated else None,
        "train_loss": float(hist.history["loss"][-1]),
        "train_accuracy": float(hist.history["accuracy"][-1]),
        "test_accuracy": float(test_acc),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
