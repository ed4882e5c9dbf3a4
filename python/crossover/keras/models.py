"""Keras's Sequential model on crossover's engine (the library's nn/sequential.h).

compile/fit/evaluate/predict/get_weights go straight to the library's Sequential; this file
only maps Keras's arguments onto it and its results back to Keras's return values."""

import math
import os
import sys
from typing import Any, Iterable, Optional, Union

import numpy as np

from .. import _core, _device, _precision, _seed, _threads
from . import losses as losses_module
from . import metrics as metrics_module
from . import mixed_precision
from . import optimizers as optimizers_module
from . import saving
from ._args import reject_unknown, reject_unsupported, unsupported_attribute
from .callbacks import CallbackList, History
from .layers import Flatten, InputLayer, Layer


def _floats(a: Any, what: str) -> np.ndarray:
    """A C-contiguous float32 array: the same array when it is one already (no copy)."""
    try:
        return np.ascontiguousarray(a, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be a numeric array: {e}") from None


def _verbosity(verbose: Union[str, int]) -> int:
    if verbose == "auto":
        return 1
    if verbose in (0, 1, 2):
        return int(verbose)
    raise ValueError(f"verbose must be 'auto', 0, 1 or 2, got {verbose!r}")


# --- output (fit's progress line) ----------------------------------------------------------
def _dynamic_display() -> bool:
    """Whether fit redraws its progress bar in place: Keras 3's Progbar rule, word for word
    (keras/src/utils/progbar.py). "posix" is in sys.modules on every Linux and macOS Python, so
    there it is always True, as in Keras."""
    return (
        (hasattr(sys.stdout, "isatty") and sys.stdout.isatty())
        or "ipykernel" in sys.modules
        or "posix" in sys.modules
        or "PYCHARM_HOSTED" in os.environ
    )


class Sequential(mixed_precision.HasDTypePolicy):
    """keras.Sequential: a stack of layers, given as a list or with add(). Its dtype_policy is
    the global one when it was made (Keras's); its layers' own decide what the engine trains in."""

    def __init__(
        self,
        layers: Optional[Iterable[Layer]] = None,
        name: Optional[str] = None,
        trainable: bool = True,
    ) -> None:
        reject_unsupported("Sequential", trainable=(trainable, True))
        self.name = name or "sequential"
        self._layers: list[Layer] = []
        self._core: Optional[_core.Sequential] = None
        self._user_compiled = False
        self.optimizer: Any = None
        self.loss: Any = None
        self.stop_training = False
        self._threads_choice: Optional[tuple[int, str]] = None  # (threads, chosen by)
        self._seed_compiled = 0
        # Device and metric name (api block: crossover.device, keras.metrics).
        self._created_device = _device.current()
        self._metric_name = "accuracy"
        # Keras's: the model's own policy is the global one when it is made. What the engine
        # trains in comes from its layers' policies (_precision).
        self._dtype_policy = mixed_precision.dtype_policy()
        for layer in layers or []:
            self.add(layer)

    # --- building -------------------------------------------------------------------------
    def add(self, layer: Layer) -> None:
        if not isinstance(layer, Layer):
            raise ValueError(
                f"Only instances of crossover.keras.layers.Layer can be added to a Sequential "
                f"model, got {layer!r} (of type {type(layer).__name__})"
            )
        if isinstance(layer, InputLayer) and self._layers:
            raise ValueError("An InputLayer can only be the first layer of a Sequential model")
        self._layers.append(layer)
        self._core = None  # rebuilt (and compiled again) on next use, as Keras requires
        self._user_compiled = False

    @property
    def layers(self) -> list[Layer]:
        return [l for l in self._layers if not isinstance(l, InputLayer)]

    def _model(self) -> "_core.Sequential":
        """The library's model for the current layers (uncompiled when new)."""
        if self._core is None:
            if not self._layers:
                raise ValueError("A Sequential model needs at least one layer: add() some first")
            core_layers = [l._core_layer() for l in self._layers]
            first = self._layers[0]
            if first._input_shape and not isinstance(first, (InputLayer, Flatten)):
                core_layers.insert(0, _core.Input(first._input_shape))  # Dense(input_shape=...)
            self._core = _core.Sequential(core_layers, self.name)
        return self._core

    def _device_model(self) -> "_core.Sequential":
        """The model with its weights on a device: compiled, with placeholders when the user has
        not compiled yet (Keras lets predict/get_weights/set_weights run before compile)."""
        model = self._model()
        if not model.compiled:
            model.compile(
                _core.optimizer_from_name("adam"),
                "mean_squared_error",
                [],
                device=self._device(),
                seed=_seed.get(),
            )
        return model

    def _device(self) -> str:
        """Where the model trains: the crossover.device scope around compile, else the one around
        the model's creation, else the CPU."""
        return _device.current() or self._created_device or "cpu"

    def _precision(self, device: str) -> str:
        """The engine's precision (CompileOptions::precision) from the layers' dtype policies:
        that of the layers with matrix products (Dense, Conv2D), which the engine runs in one
        precision per model; the other layers compute in float32 whatever their policy. On a
        GPU, float32 is tf32 after tf.config.experimental.enable_tensor_float_32_execution(True).
        """
        try:
            policy = self._model().dtype_policy  # the library's rule: one for Dense and Conv2D
        except ValueError as e:
            raise NotImplementedError(f"{e}; see docs/PYTHON.md") from None
        precision = _core.dtype_policy_precision(policy)
        tf32 = _precision.tensor_float_32_execution_enabled()
        if precision == "fp32" and device != "cpu" and tf32:
            return "tf32"
        if device == "cpu":
            problem = _core.cpu_precision_problem(precision)
            if problem:
                raise ValueError(
                    f"compile: the dtype policy '{policy}' cannot train on "
                    f"this CPU: precision {precision} {problem}"
                )
        return precision

    def _check_scope(self, who: str) -> None:
        """A device scope around fit/evaluate/predict that is not the model's device is an error,
        not a silent run elsewhere: the device is chosen at compile."""
        scope, model = _device.current(), self._core
        if scope is None or model is None or not model.compiled:
            return
        trains_on = model.device_name
        if trains_on != scope:
            raise ValueError(
                f"{who}: the model was compiled for {trains_on}, but this is inside a "
                f"crossover.device scope for {scope}: crossover places a model when it is "
                f"compiled, so compile it inside that scope (see docs/PYTHON.md)"
            )

    # --- compile, fit, evaluate, predict --------------------------------------------------
    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        loss_weights: Any = None,  # Keras 3's order: compile("adam", "mse", None, ["mae"])
        metrics: Optional[list[str]] = None,
        weighted_metrics: Any = None,
        run_eagerly: bool = False,
        steps_per_execution: int = 1,
        jit_compile: Any = "auto",
        auto_scale_loss: bool = True,
    ) -> None:
        reject_unsupported(
            "compile",
            loss_weights=(loss_weights, None),
            weighted_metrics=(weighted_metrics, None),
            steps_per_execution=(steps_per_execution, 1),
        )
        if loss is None:
            raise ValueError("compile: give a loss, e.g. loss='sparse_categorical_crossentropy'")
        loss_name = losses_module.library_name(loss)
        metric_names = metrics_module.resolve(metrics, loss_name)
        model = self._model()
        # compile keeps the weights the model has (set_weights before compile), as in Keras.
        kept = model.get_weights() if model.compiled else []
        device, threads, seed = self._device(), _threads.requested(), _seed.get()
        precision = self._precision(device)
        # model.optimizer is a keras optimizer object, also for a name (as in Keras); its
        # learning_rate reads and sets this model's rate from now on.
        optimizer = optimizers_module.from_identifier(optimizer)
        if isinstance(self.optimizer, optimizers_module.Optimizer):
            self.optimizer._detach()  # keeps the rate this model's engine had
        core_optimizer = optimizers_module.get(optimizer)
        model.compile(
            core_optimizer,
            loss_name,
            ["accuracy"] if metric_names else [],
            device=device,
            threads=threads if device == "cpu" else 0,
            seed=seed,
            precision=precision,
        )
        # On the CPU, the thread count: the one asked for, else measured at the first fit or
        # evaluate, when the data's shape and the batch size are known (_use_measured_threads).
        self._seed_compiled = seed
        self._threads_choice = (
            (threads, "user") if device == "cpu" and threads > 0 else None
        )
        if kept:
            model.set_weights(kept)
        self._metric_name = metric_names[0] if metric_names else "accuracy"
        if isinstance(optimizer, optimizers_module.Optimizer):
            optimizer._attach(self)
        self.optimizer, self.loss, self._user_compiled = optimizer, loss, True

    def _use_measured_threads(self, x: np.ndarray, y: np.ndarray, batch: int, say: bool) -> None:
        """The CLI's --threads 0 for a CPU model without a count asked for, once: the fastest
        count here, measured on copies of the model with (x, y) at this batch size (or saved by
        an earlier run, the CLI's too); the model is compiled again at it, keeping its state."""
        model = self._core
        if model is None or model.device_name != "cpu" or self._threads_choice is not None:
            return
        try:
            chosen = model.use_measured_cpu_threads(x, y, batch, self._seed_compiled, say)
        except KeyboardInterrupt:
            # Ctrl-C while the library measured (Python's handler only notes it then): say
            # where it landed, as fit's own stop does.
            raise KeyboardInterrupt(
                "stopped while measuring the thread count, before training; the model is unchanged"
            ) from None
        if chosen is not None:
            self._threads_choice = chosen

    def _keras_key(self, key: str) -> str:
        """The library's history key with the metric named as the user named it ('acc', ...)."""
        if key in ("accuracy", "val_accuracy"):
            return key.replace("accuracy", self._metric_name)
        return key

    def _require_compiled(self, who: str) -> "_core.Sequential":
        if not self._user_compiled or self._core is None:
            raise ValueError(f"You must call `compile()` before using the model ({who}).")
        self._check_scope(who)
        return self._core

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        epochs: int = 1,
        verbose: Union[str, int] = "auto",
        callbacks: Any = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: bool = True,
        class_weight: Any = None,
        sample_weight: Any = None,
        initial_epoch: int = 0,
        steps_per_epoch: Optional[int] = None,
        validation_steps: Optional[int] = None,
        validation_batch_size: Optional[int] = None,
        validation_freq: int = 1,
    ) -> History:
        reject_unsupported(
            "fit",
            class_weight=(class_weight, None),
            sample_weight=(sample_weight, None),
            steps_per_epoch=(steps_per_epoch, None),
            validation_steps=(validation_steps, None),
            validation_batch_size=(validation_batch_size, None),
            validation_freq=(validation_freq, 1),
        )
        model = self._require_compiled("fit")
        if x is None or y is None:
            raise ValueError("fit: give both x and y (numpy arrays)")
        vx = vy = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise ValueError("fit: validation_data must be a tuple (x_val, y_val)")
            vx, vy = (_floats(a, "validation_data") for a in validation_data)
        batch = 32 if batch_size is None else batch_size
        level = _verbosity(verbose)
        steps = math.ceil(math.ceil(len(x) * (1.0 - validation_split)) / batch)
        params = {"verbose": level, "epochs": epochs, "steps": steps}
        # Callbacks (and the History fit returns) are called between epochs by the library.
        callback_list = CallbackList(callbacks, self, params)
        self.stop_training = False
        xf, yf = _floats(x, "x"), _floats(y, "y")
        self._use_measured_threads(xf, yf, batch, level > 0)
        result = model.fit(
            xf,
            yf,
            epochs,
            batch,
            bool(shuffle),
            float(validation_split),
            vx,
            vy,
            level,
            initial_epoch,
            callback_list,
            _dynamic_display(),
        )
        h = callback_list.history
        self.history = h
        self.stop_training = self.stop_training or result["stopped_early"]
        if result["interrupted"]:
            raise KeyboardInterrupt(
                "training stopped after the current step; the model keeps its weights"
            )
        return h

    def evaluate(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        verbose: Union[str, int] = "auto",
        sample_weight: Any = None,
        steps: Optional[int] = None,
        callbacks: Any = None,
        return_dict: bool = False,
    ) -> Union[float, list[float], dict[str, float]]:
        reject_unsupported(
            "evaluate",
            sample_weight=(sample_weight, None),
            steps=(steps, None),
            callbacks=(callbacks or None, None),
        )
        model = self._require_compiled("evaluate")
        xf, yf = _floats(x, "x"), _floats(y, "y")
        batch, level = 32 if batch_size is None else batch_size, _verbosity(verbose)
        self._use_measured_threads(xf, yf, batch, level > 0)
        loss, accuracy = model.evaluate(xf, yf, batch, level)
        values = {"loss": loss}
        if model.metrics():
            values[self._metric_name] = accuracy
        if return_dict:
            return values
        return list(values.values()) if len(values) > 1 else loss

    def predict(
        self,
        x: Any,
        batch_size: Optional[int] = None,
        verbose: Union[str, int] = "auto",
        steps: Optional[int] = None,
        callbacks: Any = None,
    ) -> np.ndarray:
        reject_unsupported("predict", steps=(steps, None), callbacks=(callbacks or None, None))
        _verbosity(verbose)  # checked; predict prints no progress line
        self._check_scope("predict")
        return self._device_model().predict(
            _floats(x, "x"), 32 if batch_size is None else batch_size
        )

    def __call__(self, x: Any) -> np.ndarray:
        return self.predict(x, verbose=0)

    # --- inspection and weights -----------------------------------------------------------
    def summary(
        self, line_length: Any = None, positions: Any = None, print_fn: Any = None, **kwargs: Any
    ) -> None:
        text = self._model().summary().rstrip("\n")
        (print_fn or print)(text)

    @property
    def built(self) -> bool:
        """Whether the input shape is known (from the first layer or from data seen)."""
        if self._core is not None and self._core.input_shape:
            return True
        return bool(self._layers and self._layers[0]._input_shape)

    def count_params(self) -> int:
        if not self.built:
            raise ValueError(
                "You tried to call `count_params` on a model that isn't built yet: give an input "
                "shape (Input(shape=...) or input_shape=) or fit it first"
            )
        return int(self._model().count_params())

    def get_weights(self) -> list[np.ndarray]:
        """The parameters in Keras's order and shapes: kernel (inputs, units), then bias."""
        if not self.built:
            return []
        return [value for _, value in self._device_model().get_weights()]

    def set_weights(self, weights: list[Any]) -> None:
        """Arrays in get_weights()'s order and shapes; the library checks count and shapes."""
        model = self._device_model()
        names = [name for name, _ in model.get_weights()]
        named = [(names[i] if i < len(names) else "", w) for i, w in enumerate(weights)]
        model.set_weights(
            [(n, _floats(w, f"set_weights: weight {i}")) for i, (n, w) in enumerate(named)]
        )

    # --- files (saving.py) ----------------------------------------------------------------
    def save_weights(
        self, filepath: Any, overwrite: bool = True, max_shard_size: Any = None
    ) -> None:
        """`.weights.h5` (Keras 3's layout) or `.safetensors`, by the suffix."""
        saving.save_weights(self, filepath, overwrite=overwrite, max_shard_size=max_shard_size)

    def load_weights(self, filepath: Any, skip_mismatch: bool = False, **kwargs: Any) -> None:
        """From a `.weights.h5` (Keras's or crossover's) or `.safetensors` file."""
        reject_unknown("load_weights", kwargs)  # Keras 2's by_name=, ...
        saving.load_weights(self, filepath, skip_mismatch=skip_mismatch)

    def to_json(self, **kwargs: Any) -> str:
        """Keras 3's model JSON; keyword arguments go to json.dumps."""
        return saving.to_json(self, **kwargs)


    # --- what Keras has and crossover does not (api block) ----------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in _UNSUPPORTED_METHODS:
            raise AttributeError(
                f"Sequential.{name} is not supported (yet): {_UNSUPPORTED_METHODS[name]}; see "
                f"docs/PYTHON.md"
            )
        raise AttributeError(f"'Sequential' object has no attribute {name!r}")


_UNSUPPORTED_METHODS = {
    "save": "a whole-model .keras (or .h5) archive is not written; save_weights() and "
    "to_json() are the supported route",
    "export": "no SavedModel export",
    "train_on_batch": "training runs whole epochs in C++ (fit)",
    "test_on_batch": "use evaluate()",
    "predict_on_batch": "use predict()",
    "fit_generator": "fit takes numpy arrays",
}


def __getattr__(name: str) -> Any:
    if name == "Model":
        raise AttributeError(
            "crossover.keras.models.Model (the functional API, keras.Model(inputs, outputs), "
            "and subclassing) is not supported (yet): crossover runs Sequential models; see "
            "docs/PYTHON.md"
        )
    raise unsupported_attribute(
        "keras.models", name, "Sequential (and model_from_json where supported)"
    )


model_from_json = saving.model_from_json

__all__ = ["Sequential", "History", "model_from_json"]
