"""Keras's Sequential model on crossover's engine (the library's nn/sequential.h).

compile/fit/evaluate/predict/get_weights go straight to the library's Sequential; this file
only maps Keras's arguments onto it and its results back to Keras's return values."""

import math
import os
import sys
import time
from typing import Any, Iterable, Optional, Union

import numpy as np

from .. import _core, _device, _precision, _seed, _tensor, _threads
from .._args import SEE_SUPPORTED, reject_unknown, reject_unsupported
from . import _graph, _names, _symbolic, _trace
from . import losses as losses_module
from . import metrics as metrics_module
from . import mixed_precision, regularizers
from . import optimizers as optimizers_module
from . import _archive, _py_dataset_fit, _python_step
from .callbacks import CallbackList, History
from .layers import (
    Flatten,
    InputLayer,
    Layer,
    _REGULARIZED_WEIGHTS,
    _ModelBase,
    _changed_by_training,
    _engine_layer,
    _floats,
)


def _verbosity(verbose: Union[str, int]) -> int:
    if verbose == "auto":
        return 1
    if verbose in (0, 1, 2):
        return int(verbose)
    raise ValueError(f"verbose must be 'auto', 0, 1 or 2, got {verbose!r}")


def _shape_list(input_shape: Any) -> list[int]:
    dims = list(input_shape)
    if not dims or any(d is None for d in dims[1:]):
        raise ValueError(f"build: every dimension but the batch's must be known, got {input_shape}")
    return [int(d) for d in dims[1:]]


def _is_dataset(x: Any) -> bool:
    from ..data import Dataset

    return isinstance(x, Dataset)


def _from_dataset(x: Any, y: Any, batch_size: Any, shuffle: Any, who: str) -> tuple[Any, ...]:
    """fit/evaluate of a tf.data.Dataset: its arrays, its batch size, its shuffling."""
    if not _is_dataset(x):
        return x, y, batch_size, shuffle
    if y is not None:
        raise ValueError(f"{who}: `y` argument is not supported when using dataset as input.")
    if batch_size is not None:
        raise ValueError(f"{who}: `batch_size` is not supported when using a dataset as input")
    dx, dy, batch, shuffled = x._for_fit(who)
    if dy is None:
        raise ValueError(f"{who}: the dataset gives x only; it must give (x, y) pairs")
    return dx, dy, batch, shuffled


def _dataset_weights(x: Any, sample_weight: Any, who: str) -> Any:
    """The sample weights of fit/evaluate: the argument, or a dataset's (x, y, sample_weight)."""
    if not _is_dataset(x):
        return sample_weight
    if sample_weight is not None:
        raise ValueError(
            f"{who}: `sample_weight` argument is not supported when using dataset as input."
        )
    return x._sample_weight_for_fit()


def _sample_weights(weights: Any, n: int, what: str) -> Optional[np.ndarray]:
    """Keras's sample_weight: None, or one float32 weight per sample (N,) (also (N, 1))."""
    if weights is None:
        return None
    w = _floats(weights, what)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w.reshape(-1)
    if w.ndim != 1 or len(w) != n:
        raise ValueError(
            f"{what} must hold one weight per sample, shape ({n},), got shape {w.shape} "
            "(Keras: data cardinality is ambiguous)"
        )
    return w


def _class_weights(class_weight: Any, sample_weight: Any) -> dict[int, float]:
    """Keras's class_weight: a dict {class index: weight} (empty: none)."""
    if class_weight is None:
        return {}
    if sample_weight is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    if not isinstance(class_weight, dict):
        raise ValueError(
            f"fit: class_weight must be a dict {{class index: weight}}, got {class_weight!r}"
        )
    try:
        return {int(k): float(v) for k, v in class_weight.items()}
    except (TypeError, ValueError):
        raise ValueError(
            f"fit: class_weight must map class indices (ints) to weights, got {class_weight!r}"
        ) from None


def _arrays(data: Any) -> Any:
    """Data for a Python step: an array, or a list, tuple or dict of arrays (a model of several
    inputs or outputs, given as Keras takes them), each as a numpy array; a list of one array is
    that array, and a list of numbers or of lists one array."""
    if isinstance(data, dict):
        return {k: np.asarray(_tensor._plain(v)) for k, v in data.items()}
    if isinstance(data, (list, tuple)) and len(data) == 1 and isinstance(data[0], np.ndarray):
        return np.asarray(_tensor._plain(data[0]))
    if (
        isinstance(data, (list, tuple))
        and len(data) > 1
        and all(isinstance(v, np.ndarray) and v.ndim >= 1 for v in data)  # Tensors are arrays
    ):
        return type(data)(np.asarray(_tensor._plain(v)) for v in data)
    return np.asarray(_tensor._plain(data))


def _rows(data: Any, rows: Any) -> Any:
    """The rows of _arrays' data (each array's, in a list, tuple or dict)."""
    if isinstance(data, dict):
        return {k: v[rows] for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(v[rows] for v in data)
    return data[rows]


def _count(data: Any) -> int:
    """How many samples _arrays' data holds."""
    if isinstance(data, dict):
        return len(next(iter(data.values())))
    return len(data[0]) if isinstance(data, (list, tuple)) else len(data)


def _validation_arrays(validation_data: Any) -> tuple[Any, Any, Any]:
    """validation_data as (x_val, y_val, sample_weight_val or None): a tuple of two or three
    arrays, or a batched dataset of (x, y) or (x, y, sample_weight) elements."""
    if _is_dataset(validation_data):
        vdx, vdy, _, _ = validation_data._for_fit("fit(validation_data=)")
        return vdx, vdy, validation_data._sample_weight_for_fit()
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ValueError(
            "fit: validation_data must be a tuple (x_val, y_val) or (x_val, y_val, "
            "val_sample_weight)"
        )
    vx, vy = validation_data[:2]
    if not isinstance(vx, (list, tuple, dict)):  # several inputs: the model packs them (_x_array)
        vx = _floats(vx, "validation_data")
    if not isinstance(vy, (list, tuple, dict)):  # several outputs: the model packs them
        vy = _floats(vy, "validation_data")
    vw = validation_data[2] if len(validation_data) == 3 else None
    return vx, vy, vw


def _say_threads() -> bool:
    """Whether the first fit says its thread choice on stderr: only with $CROSSOVER_VERBOSE set
    (Keras prints nothing of the kind)."""
    return os.environ.get("CROSSOVER_VERBOSE", "") not in ("", "0")


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


def shared_with(calls: list[Any]) -> list[int]:
    """The engine's LayerGraph::shared_with for a graph's entries (the layer object of each
    call): the index of the first entry of the same layer object, -1 for a layer's first call."""
    first: dict[int, int] = {}
    return [-1 if first.setdefault(id(l), i) == i else first[id(l)] for i, l in enumerate(calls)]


class _Model(_ModelBase):
    """What every model is, as Keras's Model is to its Sequential and Functional: the engine's
    model of its layers, compile, fit, evaluate, predict, the weights, saving, summary. Its
    dtype_policy is the global one when it was made (Keras's); its layers' own decide what the
    engine trains in. Sequential (below) adds add() and pop(); functional.py's Functional a graph
    of layer calls, and Subclassed the graph traced from a subclass's call()."""

    def __init__(self, name: Optional[str] = None, trainable: bool = True) -> None:
        # Keras's model.trainable (False: none of its layers trains; the setter sets each's).
        self._trainable = bool(trainable)
        self.name = name or _names.auto_name("Sequential")
        self._given_name = name  # the engine's model: the name given, else "sequential"
        self._layers: list[Any] = []  # Layers, and Sequential models used as layers
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
        self._metric_order: list[str] = []
        self._loss_name = ""  # the library's name of the compiled loss
        self._eager_loss: Any = None  # a loss with no engine op: fit steps in Python with it
        self._python_metrics = False  # a metric with no engine kind: the same
        # Keras's: the model's own policy is the global one when it is made. What the engine
        # trains in comes from its layers' policies (_precision).
        self._dtype_policy = mixed_precision.dtype_policy()

    # --- building -------------------------------------------------------------------------
    @property
    def layers(self) -> list[Any]:
        return [l for l in self._layers if not isinstance(l, InputLayer)]

    @property
    def output_shape(self) -> Optional[tuple[Optional[int], ...]]:
        """(None, ...) of the last layer's output, once the input shape is known."""
        shape = self._known_input_shape()
        if shape is None:
            return None
        out = tuple(shape)
        for layer in self.layers:
            out = _trace.output_shape(layer, out)
        return (None, *out)

    def _leaves(self) -> list[Layer]:
        """The layers the engine runs: those of models used as layers in their place (an inner
        model's InputLayer only where it comes first)."""
        leaves: list[Layer] = []
        for item in self._layers:
            inner = item._leaves() if isinstance(item, _ModelBase) else [item]
            if leaves:
                inner = [l for l in inner if not isinstance(l, InputLayer)]
            leaves.extend(inner)
        return _trace.expand(self, leaves)  # custom layers: their traced ops, a graph

    def _models_inside(self) -> list["Sequential"]:
        found: list[Sequential] = []
        for item in self._layers:
            if isinstance(item, _ModelBase):
                found += [item] + item._models_inside()
        return found

    @property
    def _input_shape(self) -> Optional[list[int]]:
        leaves = self._leaves()
        return leaves[0]._input_shape if leaves else None

    def _known_input_shape(self) -> Optional[list[int]]:
        """The input shape given, else the one the data fit, evaluate or predict ran on gave
        the engine (Keras builds a model on its first data)."""
        shape = self._input_shape
        if shape is None and self._core is not None and self._core.input_shape:
            shape = list(self._core.input_shape)
        return shape

    def _model(self) -> "_core.Sequential":
        """The library's model for the current layers (uncompiled when new)."""
        if self._core is None:
            leaves = self._leaves()
            if not leaves:
                raise ValueError("A Sequential model needs at least one layer: add() some first")
            core_layers = [l._core_layer() for l in leaves]
            first = leaves[0]
            if first._input_shape and not isinstance(first, (InputLayer, Flatten)):
                core_layers.insert(0, _engine_layer("InputLayer", shape=list(first._input_shape)))
            graph = _trace.graph_of(self)
            if graph is not None:
                # A sublayer a custom layer calls more than once: one layer, shared weights.
                shared = shared_with(leaves)
                if len(core_layers) > len(leaves):  # the Input put first
                    shared = [-1] + [f + 1 if f >= 0 else -1 for f in shared]
                self._core = _core.Sequential(
                    core_layers,
                    graph,
                    self._given_name or "sequential",
                    shared_with=shared if max(shared) >= 0 else [],
                )
            else:
                self._core = _core.Sequential(core_layers, self._given_name or "sequential")
        self._sync_trainable()
        return self._core

    def _frozen_leaves(self, frozen: bool = False, found: Optional[set[int]] = None) -> set[int]:
        """The ids of the leaf layers that do not train: their own trainable is False, or that
        of a model they are in."""
        found = set() if found is None else found
        frozen = frozen or not self.trainable
        for item in self._layers:
            if isinstance(item, _ModelBase):
                item._frozen_leaves(frozen, found)
            elif frozen or not item.trainable:
                found.add(id(item))
        return found

    def _sync_trainable(self) -> None:
        """The layers' trainable flags into the engine's model (Sequential::set_trainable): its
        JSON and counts follow them at once, fit from the next compile, as Keras's does."""
        model = self._core
        if model is None:
            return
        leaves = self._leaves()
        frozen = self._frozen_leaves()
        core_layers = model.layers
        first = len(core_layers) - len(leaves)  # an Input put first for Dense(input_shape=)
        for i, layer in enumerate(leaves):
            if core_layers[first + i].trainable != (id(layer) not in frozen):
                model.set_trainable(first + i, id(layer) not in frozen)

    # --- weights shared with the layer objects (a model used as a layer, layer.get_weights) ---
    # Each layer object's weights live in one place at a time: the engine of the model that
    # used them last (layer._weights_in is that model), or arrays kept in the layer while no
    # model holds them (layer._weights_in is a list). Before a model runs, reads or writes
    # weights, _pull_weights copies into its engine those of its layers that are elsewhere and
    # makes itself their place; so an inner model and the model it is a layer of (or two
    # models sharing layers) always see each other's latest weights, as Keras's shared layer
    # objects do, at the cost of one copy of the changed layers when use switches models.
    def _weight_slices(self) -> list[tuple[Layer, int, int]]:
        """(layer, first, end) of each leaf layer with weights, in the engine's get_weights."""
        out, at = [], 0
        for layer in self._weight_leaves():
            n = len(layer._weight_kinds())
            if n:
                out.append((layer, at, at + n))
            at += n
        return out

    def _pull_weights(self) -> None:
        model = self._core
        if model is None or not model.compiled:
            return
        slices = self._weight_slices()
        stale = [(l, a, b) for l, a, b in slices if l._weights_in is not self]
        if not stale:
            return
        named = model.get_weights()
        changed = False
        for layer, a, b in stale:
            source = layer._weights_in
            values = None
            if isinstance(source, list):
                values = source
            elif isinstance(source, _ModelBase) and source._core is not None:
                values = source._own_layer_weights(layer)
            if values is not None:
                if len(values) != b - a or any(
                    np.shape(v) != named[a + i][1].shape for i, v in enumerate(values)
                ):
                    raise ValueError(
                        f"layer '{layer.name}' has weights of shapes "
                        f"{[np.shape(v) for v in values]} elsewhere but "
                        f"{[w.shape for _, w in named[a:b]]} in model '{self.name}'"
                    )
                for i, v in enumerate(values):
                    named[a + i] = (named[a + i][0], _floats(v, "weights"))
                changed = True
            layer._weights_in = self
        if changed:
            model.set_weights(named)

    def _own_layer_weights(self, layer: Layer) -> Optional[list[np.ndarray]]:
        """The layer's weights from this model's engine (which holds its latest ones)."""
        model = self._core
        if model is None or not model.compiled:
            return None
        for l, a, b in self._weight_slices():
            if l is layer:
                return [w for _, w in model.get_weights()[a:b]]
        return None

    def _stash_weights(self) -> None:
        """Before the engine model is dropped (add), its layers keep their weights as arrays."""
        for layer, _, _ in self._weight_slices() if self._core is not None else []:
            if layer._weights_in is self:
                layer._weights_in = self._own_layer_weights(layer)

    def _device_model(self) -> "_core.Sequential":
        """The model with its weights on a device: compiled, with placeholders when the user has
        not compiled yet (Keras lets predict/get_weights/set_weights run before compile)."""
        model = self._compiled_model()
        self._pull_weights()
        return model

    def _compiled_model(self) -> "_core.Sequential":
        """The engine's model compiled (as _device_model does), leaving each layer's weights where
        they are; layers not built anywhere yet take the weights it drew."""
        model = self._model()
        if not model.compiled:
            model.compile(
                _core.optimizer_from_name("adam"),
                "mean_squared_error",
                [],
                device=self._device(),
                seed=_seed.draw(),
            )
            for layer, _, _ in self._weight_slices():
                if layer._weights_in is None:
                    layer._weights_in = self
        return model

    def _device(self) -> str:
        """Where the model trains: the crossover.device scope around compile, else the one around
        the model's creation, else the default (_device.default: the GPU where this build and
        this machine have one, as TensorFlow places it, else the CPU)."""
        return _device.current() or self._created_device or _device.default()

    def _precision(self, device: str) -> str:
        """What compile asks the engine for (CompileOptions::precision): "" lets the engine take
        it from the layers' dtype policies (mixed_bfloat16: bf16, float32: fp32), refusing on a
        CPU that lacks it; "tf32" on a GPU after
        tf.config.experimental.enable_tensor_float_32_execution(True), TF32 being float32's
        arithmetic there (a mixed_bfloat16 model computes in bfloat16 whatever the switch)."""
        try:
            policy = self._model().dtype_policy  # one for Dense and Conv2D, or ValueError
        except ValueError as e:
            raise NotImplementedError(f"{e}; {SEE_SUPPORTED}") from None
        tf32 = _precision.tensor_float_32_execution_enabled()
        return "tf32" if device != "cpu" and tf32 and policy == "float32" else ""

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
                f"compiled, so compile it inside that scope ({SEE_SUPPORTED})"
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
        several = self._output_count() > 1
        if getattr(self, "_inner_outputs", None):
            raise NotImplementedError(
                f"compile: model '{self.name}' outputs what other layers of it read, or an "
                f"input ({', '.join(self._inner_outputs)}): crossover predicts with such a model "
                f"but does not train it (yet); {SEE_SUPPORTED}"
            )
        reject_unsupported(
            "compile",
            loss_weights=(None if several else loss_weights, None),
            weighted_metrics=(weighted_metrics, None),
            steps_per_execution=(steps_per_execution, 1),
        )
        self._step_trackers = None  # model.metrics: made again for these settings
        self._compiled_metrics = metrics
        if loss is None and (_overrides(self, "train_step") or _overrides(self, "compute_loss")):
            # Its own train_step (or compute_loss) computes the loss: compile keeps the
            # optimizer (and metrics) for it, as Keras's does.
            self.optimizer = optimizers_module.from_identifier(optimizer)
            self._step_compiled = True
            return
        if loss is None:
            raise ValueError("compile: give a loss, e.g. loss='sparse_categorical_crossentropy'")
        self._eager_loss = None
        if several:
            heads = _output_heads(self.output_names, loss, loss_weights, metrics)
            loss_name = heads[0][0]
        else:
            try:
                loss_name = losses_module.library_name(loss)
            except (ValueError, TypeError):
                # A loss the engine has no op for: fit and evaluate step in Python with it
                # (_python_step); the engine is compiled for its optimizer and passes.
                self._eager_loss = _python_step.eager_loss(loss)
                if self._eager_loss is None:
                    raise
                loss_name = "mean_squared_error"
            # A metric the engine has no kind for (the user's Metric subclass or function):
            # Python steps too, the metrics Keras's objects (_CompileMetrics).
            self._python_metrics = metrics_module.computed_in_python(metrics)
            in_python = self._eager_loss is not None or self._python_metrics
            metric_kinds, metric_names, metric_parameters = metrics_module.resolve(
                None if in_python else metrics, loss_name
            )
            if loss_name == "binary_crossentropy":
                metric_kinds = self._binary_loss_accuracy(metric_kinds, metric_names)
        model = self._model()
        # compile keeps the weights the model has (set_weights before compile), as in Keras.
        kept = model.get_weights() if model.compiled else []
        # Each model compiled draws its own seed from the global state (Keras's fresh weights
        # per model; set_random_seed makes the sequence, so the script, reproducible).
        device, threads, seed = self._device(), _threads.requested(), _seed.draw()
        precision = self._precision(device)
        # model.optimizer is a keras optimizer object, also for a name (as in Keras); its
        # learning_rate reads and sets this model's rate from now on.
        optimizer = optimizers_module.from_identifier(optimizer)
        if isinstance(self.optimizer, optimizers_module.Optimizer):
            self.optimizer._detach()  # keeps the rate this model's engine had
        core_optimizer = optimizers_module.get(optimizer)
        if several:
            # One loss head per output (Sequential::compile_outputs).
            model.compile_outputs(
                core_optimizer,
                [h[0] for h in heads],
                [h[1] for h in heads],
                [h[2] for h in heads],
                [h[3] for h in heads],
                [h[4] for h in heads],
                [h[5] for h in heads],
                device=device,
                threads=threads if device == "cpu" else 0,
                seed=seed,
                precision=precision,
                loss_parameters=[h[6] for h in heads],
            )
        else:
            model.compile(
                core_optimizer,
                loss_name,
                metric_kinds,
                device=device,
                threads=threads if device == "cpu" else 0,
                seed=seed,
                precision=precision,
                from_logits=losses_module.from_logits(loss),
                metric_names=metric_names,
                metric_parameters=metric_parameters,
                loss_parameter=losses_module.parameter(loss),
            )
        # On the CPU, the thread count: the one asked for, else measured at the first fit or
        # evaluate, when the data's shape and the batch size are known (_use_measured_threads).
        self._seed_compiled = seed
        self._threads_choice = (threads, "user") if device == "cpu" and threads > 0 else None
        if kept:
            model.set_weights(kept)
        self._pull_weights()  # layers whose latest weights another model (or array) holds
        # The accuracy's name ('acc', ...: the engine's key is "accuracy"), and every metric's in
        # compile's order (evaluate's list).
        if several:
            # Keras 3's evaluate list: the loss, each output's loss in the outputs' order, then
            # the metrics sorted by name (their names "<output>_<metric>").
            self._metric_name = "accuracy"
            self._output_losses = [h[0] for h in heads]
            # Keras lists the outputs' losses in the order of a loss dict's keys.
            engine_names, names = self._engine_output_names(), self.output_names
            order = list(range(len(names)))
            given = loss if isinstance(loss, dict) else getattr(self, "_output_given_keys", None)
            if given:
                order = [names.index(k) for k in given if k in names]
            self._output_loss_names = [f"{engine_names[j]}_loss" for j in order]
            self._metric_order = self._output_loss_names + sorted(n for h in heads for n in h[4])
            self._outputs_ran = False
        else:
            self._metric_name = next(
                (n for k, n in zip(metric_kinds, metric_names) if k == "accuracy"), "accuracy"
            )  # (a categorical "accuracy" of _binary_loss_accuracy keeps its own name)
            self._metric_order = metric_names
        if isinstance(optimizer, optimizers_module.Optimizer):
            optimizer._attach(self)
        self.optimizer, self.loss, self._user_compiled = optimizer, loss, True
        self._loss_name = "" if self._eager_loss is not None else loss_name

    def _binary_loss_accuracy(self, kinds: list[str], names: list[str]) -> list[str]:
        """Keras 3 picks compile's "accuracy" ('acc') by the output's last axis, not the loss:
        with binary cross-entropy over several columns it is categorical accuracy (the engine's
        loss counts binary accuracy, right for one column; an explicit BinaryAccuracy stays
        that). Where the output's shape is known here."""
        try:
            shape = self.output_shape
        except (AttributeError, ValueError, NotImplementedError):
            return kinds
        if not shape or shape[-1] in (None, 1):
            return kinds
        auto = ("accuracy", "acc")
        return [
            "categorical_accuracy" if k == "accuracy" and n in auto else k
            for k, n in zip(kinds, names)
        ]

    def _use_measured_threads(self, x: np.ndarray, y: np.ndarray, batch: int, say: bool) -> None:
        """The CLI's --threads 0 for a CPU model without a count asked for, once: the fastest
        count here, measured on copies of the model with (x, y) at this batch size (or saved by
        an earlier run, the CLI's too); the model is compiled again at it, keeping its state."""
        model = self._core
        if model is None or model.device_name != "cpu" or self._threads_choice is not None:
            return
        if len(model.output_layers) > 1:
            return  # perf's measurement takes a model of one output: all cores
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

    def _x_array(self, x: Any, what: str) -> np.ndarray:
        """x as the engine takes it (a model of several inputs packs them: functional.py)."""
        return _floats(x, what)

    def _output_count(self) -> int:
        return 1

    def _engine_output_names(self) -> list[str]:
        """The output layers' names, as the engine names each output's loss."""
        model = self._model()
        return [model.layers[i].name for i in model.output_layers]

    def _targets(self, y: Any, what: str) -> np.ndarray:
        """y as the engine takes it; targets of shape (N,) for a loss on one output value per
        sample (mse, binary cross-entropy) become (N, 1), as Keras expands them. A model of
        several outputs packs each output's side by side (functional.py)."""
        if self._output_count() > 1:
            self._outputs_ran = True
            return self._several_targets(y, what)
        yf = _floats(y, what)
        if yf.ndim == 1 and losses_module.one_target_column(self._loss_name):
            yf = yf.reshape(-1, 1)
        return yf

    def _keras_key(self, key: str) -> str:
        """The library's history key with the metric named as the user named it ('acc', ...)."""
        if key in ("accuracy", "val_accuracy"):
            return key.replace("accuracy", self._metric_name)
        return key

    def _require_compiled(self, who: str) -> "_core.Sequential":
        if not self._user_compiled or self._core is None:
            raise ValueError(f"You must call `compile()` before using the model ({who}).")
        self._check_scope(who)
        self._pull_weights()
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
        reject_unsupported("fit", validation_batch_size=(validation_batch_size, None))
        if _py_dataset_fit.is_py_dataset(x):
            return _py_dataset_fit.fit_py_dataset(
                self, x, y, sample_weight, validation_split, steps_per_epoch, epochs,
                initial_epoch, shuffle, verbose, _verbosity(verbose), callbacks,
                validation_data=validation_data, class_weight=class_weight,
                validation_steps=validation_steps, validation_freq=validation_freq,
            )  # fmt: skip
        if _overrides(self, "train_step") or self._steps_in_python():
            who = "fit with the model's own train_step"
            if not _overrides(self, "train_step"):
                who = "fit with a loss the engine has no op for"
            reject_unsupported(
                who,
                class_weight=(class_weight, None),
                steps_per_epoch=(steps_per_epoch, None),
                validation_steps=(validation_steps, None),
                validation_freq=(validation_freq, 1),
            )
            return self._fit_by_steps(
                x, y, batch_size, epochs, verbose, callbacks, validation_split,
                validation_data, shuffle, initial_epoch, sample_weight,
            )  # fmt: skip
        if isinstance(validation_freq, bool) or not isinstance(validation_freq, int):
            raise ValueError(
                f"fit: validation_freq={validation_freq!r} is not supported (yet): crossover "
                f"takes an int (validate after every N-th epoch), not a list of epochs; "
                f"{SEE_SUPPORTED}"
            )
        model = self._require_compiled("fit")
        sample_weight = _dataset_weights(x, sample_weight, "fit")
        class_weights = _class_weights(class_weight, sample_weight)
        x, y, batch_size, shuffle = _from_dataset(x, y, batch_size, shuffle, "fit")
        if x is None or y is None:
            raise ValueError("fit: give both x and y (numpy arrays)")
        x = self._x_array(x, "x")
        vx = vy = vw = None
        if validation_data is not None:
            vx, vy, vw = _validation_arrays(validation_data)
            vx = self._x_array(vx, "validation_data")
            vw = _sample_weights(vw, len(vx), "validation_data's sample_weight")
        n_train = math.ceil(len(x) * (1.0 - validation_split))
        if steps_per_epoch is not None and (
            isinstance(steps_per_epoch, bool)
            or not isinstance(steps_per_epoch, (int, np.integer))
            or steps_per_epoch < 1
        ):
            raise ValueError(
                f"fit: steps_per_epoch must be a positive int, got {steps_per_epoch!r}"
            )
        if batch_size is None:
            # Keras's ArrayDataAdapter: without a batch size, steps_per_epoch sets it.
            batch = math.ceil(n_train / steps_per_epoch) if steps_per_epoch else 32
        else:
            batch = batch_size
        level = _verbosity(verbose)
        steps = math.ceil(n_train / batch)
        params = {"verbose": level, "epochs": epochs, "steps": steps_per_epoch or steps}
        # Callbacks (and the History fit returns) are called by the library: between epochs, and
        # between batches for a phase in which one overrides a batch hook.
        callback_list = (
            callbacks
            if isinstance(callbacks, CallbackList)
            else CallbackList(callbacks, self, params)
        )
        self.stop_training = False
        xf, yf = x, self._targets(y, "y")  # x: converted above (_x_array)
        if vy is not None:
            vy = self._targets(vy, "validation_data")
        self._use_measured_threads(xf, yf, batch, _say_threads())
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
            None if steps_per_epoch is None else int(steps_per_epoch),
            None if validation_steps is None else int(validation_steps),
            int(validation_freq),
            self._metric_name,
            _sample_weights(sample_weight, len(xf), "sample_weight"),
            class_weights,
            vw,
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
        reject_unsupported("evaluate", steps=(steps, None))
        if _overrides(self, "test_step") or self._steps_in_python():
            x, y, batch_size, _ = _from_dataset(x, y, batch_size, False, "evaluate")
            logs = self._evaluate_by_steps(x, y, batch_size or 32, _verbosity(verbose))
            values = list(logs.values())
            return logs if return_dict else (values if len(values) != 1 else values[0])
        model = self._require_compiled("evaluate")
        sample_weight = _dataset_weights(x, sample_weight, "evaluate")
        x, y, batch_size, _ = _from_dataset(x, y, batch_size, False, "evaluate")
        xf, yf = self._x_array(x, "x"), self._targets(y, "y")
        weights = _sample_weights(sample_weight, len(xf), "sample_weight")
        batch, level = 32 if batch_size is None else batch_size, _verbosity(verbose)
        self._use_measured_threads(xf, yf, batch, _say_threads())
        callback_list = None
        if callbacks:
            params = {"verbose": level, "epochs": 1, "steps": math.ceil(len(xf) / batch)}
            callback_list = CallbackList(callbacks, self, params, add_history=False)
        loss, accuracy, extra = model.evaluate(
            xf, yf, batch, level, callback_list, self._metric_name, weights
        )
        # Keras 3: the list in compile's order after the loss; the dict sorted by name.
        values = {"loss": loss, self._metric_name: accuracy, **dict(extra)}
        ordered = [loss] + [values[name] for name in self._metric_order]
        if return_dict:
            return {k: values[k] for k in sorted(["loss"] + self._metric_order)}
        return ordered if len(ordered) > 1 else loss

    def predict(
        self,
        x: Any,
        batch_size: Optional[int] = None,
        verbose: Union[str, int] = "auto",
        steps: Optional[int] = None,
        callbacks: Any = None,
    ) -> np.ndarray:
        reject_unsupported("predict", steps=(steps, None))
        level = _verbosity(verbose)  # checked; predict prints no progress line
        if _is_dataset(x):
            x, _, batch_size, _ = x._for_fit("predict")
        self._check_scope("predict")
        xf, batch = self._x_array(x, "x"), 32 if batch_size is None else batch_size
        callback_list = None
        if callbacks:
            params = {"verbose": level, "epochs": 1, "steps": math.ceil(len(xf) / batch)}
            callback_list = CallbackList(callbacks, self, params, add_history=False)
        out = self._device_model().predict(xf, batch, callback_list)
        return self._split_outputs(out) if self._output_count() > 1 else out

    def __call__(self, inputs: Any, training: Any = None, mask: Any = None) -> _tensor.Tensor:
        """model(x): the outputs as a tensor (`.numpy()`, `.shape`, numpy arithmetic), in
        inference mode (dropout off, BatchNormalization's moving statistics); with
        training=True, the engine's training pass (dropout on), which a GradientTape records."""
        from .. import _tape

        if _symbolic.is_symbolic(inputs):
            return _graph.call(self, inputs, {"training": training, "mask": mask})
        reject_unsupported("Sequential.__call__", mask=(mask, None))
        if training is not None and bool(training):
            self._check_scope("Sequential.__call__")
            return _tape.training_call(self, inputs)
        if _tape.recording():
            # Under a tape, model(x) is differentiable in inference mode too (TensorFlow's):
            # the training pass, which is the same function where no layer depends on training.
            self._check_scope("Sequential.__call__")
            return _tape.inference_call(self, inputs, _changed_by_training)
        out = self.predict(inputs, verbose=0)
        if isinstance(out, dict):
            return {k: _tensor.tensor(v) for k, v in out.items()}
        if isinstance(out, list):
            return [_tensor.tensor(v) for v in out]
        return _tensor.tensor(out)

    # --- a model's own train_step / test_step (Keras's loop around them) -----------------
    def _fit_by_steps(
        self,
        x: Any,
        y: Any,
        batch_size: Optional[int],
        epochs: int,
        verbose: Union[str, int],
        callbacks: Any,
        validation_split: float,
        validation_data: Any,
        shuffle: bool,
        initial_epoch: int,
        sample_weight: Any = None,
    ) -> History:
        """fit for a model whose class defines train_step: per batch, train_step((x, y)) (with
        sample weights, (x, y, sample_weight), as Keras gives them) and the logs it returns;
        fit's progress line, callbacks and History; validation through test_step after each
        epoch."""
        if not getattr(self, "_step_compiled", False) and not self._user_compiled:
            raise ValueError("You must call `compile()` before using the model (fit).")
        sample_weight = _dataset_weights(x, sample_weight, "fit")
        x, y, batch_size, shuffle = _from_dataset(x, y, batch_size, shuffle, "fit")
        if x is None or y is None:
            raise ValueError("fit: give both x and y (numpy arrays)")
        xs, ys = _arrays(x), _arrays(y)  # several inputs or outputs: lists (or dicts) of arrays
        ws = _sample_weights(sample_weight, _count(xs), "sample_weight")
        vx = vy = None
        if validation_data is not None:
            vx, vy, _ = _validation_arrays(validation_data)
        elif validation_split:
            n_train = math.ceil(_count(xs) * (1.0 - validation_split))
            train, held = slice(None, n_train), slice(n_train, None)
            xs, vx, ys, vy = _rows(xs, train), _rows(xs, held), _rows(ys, train), _rows(ys, held)
            ws = None if ws is None else ws[:n_train]
        batch = 32 if batch_size is None else int(batch_size)
        n, level = _count(xs), _verbosity(verbose)
        steps = math.ceil(n / batch)
        callback_list = (
            callbacks
            if isinstance(callbacks, CallbackList)
            else CallbackList(callbacks, self, {"verbose": level, "epochs": epochs, "steps": steps})
        )
        interactive = level == 1 and _dynamic_display()
        rng = np.random.default_rng(_seed.draw())
        self.stop_training = False
        callback_list.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            callback_list.on_epoch_begin(epoch)
            for metric in _step_metrics(self):
                metric.reset_state()
            order = rng.permutation(n) if shuffle else np.arange(n)
            if level:
                print(f"Epoch {epoch + 1}/{epochs}", flush=True)
            bar = _core.ProgressBar(steps, interactive)
            start, logs, done, raw = time.monotonic(), {}, 0, {}
            batches = callback_list.wants_batches("train")
            for step in range(steps):
                rows = order[step * batch : (step + 1) * batch]
                if batches:
                    callback_list.on_train_batch_begin(step)
                data = (_rows(xs, rows), _rows(ys, rows))
                data = data if ws is None else (*data, ws[rows])
                raw = self.train_step(data)
                logs = _float_logs(raw, "train_step")
                done = step + 1
                if batches:
                    callback_list.on_train_batch_end(step, logs)
                if interactive and bar.due():
                    bar.update(done, list(logs.items()))
                if self.stop_training:
                    break
            seconds = time.monotonic() - start
            if vx is not None:
                val = self._evaluate_by_steps(vx, vy, batch, 0)
                # Keras reads the epoch's logs after validation: a metric whose result() is its
                # variable itself shows the value validation left in it, as in Keras.
                logs = _float_logs(raw, "train_step") if done else logs
                logs.update({"val_" + k: v for k, v in val.items()})
            if level:
                bar.finish(done, seconds, list(logs.items()))
            callback_list.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        callback_list.on_train_end()
        self.history = callback_list.history
        return callback_list.history

    def _evaluate_by_steps(self, x: Any, y: Any, batch: int, level: int) -> dict[str, float]:
        """evaluate through the model's test_step (Keras's own loop when it has none): the
        metrics reset, then test_step((x, y)) per batch; the last logs it returned."""
        xs, ys = _arrays(x), _arrays(y)
        for metric in _step_metrics(self):
            metric.reset_state()
        steps, logs, start = math.ceil(_count(xs) / batch), {}, time.monotonic()
        for step in range(steps):
            rows = slice(step * batch, (step + 1) * batch)
            logs = _float_logs(self.test_step((_rows(xs, rows), _rows(ys, rows))), "test_step")
        if level:
            _core.ProgressBar(steps, False).finish(steps, time.monotonic() - start,
                                                   list(logs.items()))  # fmt: skip
        return logs

    # --- what a model's own train_step calls (Keras 3's Trainer) ---------------------------
    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> _tensor.Tensor:
        """Keras 3's: the compiled loss of (y, y_pred), as a keras.losses object applied to them
        (under a GradientTape, on model(x, training=True): the engine's loss and gradients)."""
        loss = self.loss if self._user_compiled else None
        if loss is None:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        # Keras's adds model.losses: the weight penalties, with recorded ops on the weights.
        penalties = _tape_penalties(self) if self.built else []
        if penalties is None or (self.built and any(_has_loss_terms(i) for i in self._layers)):
            raise NotImplementedError(
                f"compute_loss of model '{self.name}': its activity regularizers, add_loss() "
                "terms or a custom layer's weight regularizers are computed by the engine in "
                "fit's and evaluate's own steps, not under a GradientTape (a custom train_step, "
                f"or a loss or metric computed in Python): not supported (yet); {SEE_SUPPORTED}"
            )
        if getattr(self, "_eager_loss", None) is not None:
            total = self._eager_loss(y, y_pred, sample_weight)
        else:
            if not isinstance(loss, losses_module.Loss):
                loss = _LOSS_CLASSES[losses_module.library_name(loss)]()
            total = loss(y, y_pred, sample_weight)
        for penalty in penalties:
            total = _tensor.add(total, penalty)
        return total

    def train_step(self, data: Any) -> dict[str, Any]:
        """Keras's default train_step (a subclass's calls it as super().train_step(data)): one
        batch's update through a GradientTape, then the metrics (_python_step). fit's own step
        is the engine's, unless the loss has no engine op."""
        return _python_step.train_step(self, data)

    def test_step(self, data: Any) -> dict[str, Any]:
        """Keras's default test_step: one batch's loss and metrics in inference."""
        return _python_step.test_step(self, data)

    def _steps_in_python(self) -> bool:
        """fit and evaluate run Keras's steps in Python (the loss, or a metric, has no engine
        op)."""
        if _overrides(self, "compute_loss"):  # Keras's train_step around the model's own loss
            return bool(self._user_compiled or getattr(self, "_step_compiled", False))
        python = getattr(self, "_eager_loss", None) is not None
        return self._user_compiled and (python or getattr(self, "_python_metrics", False))

    @property
    def metrics(self) -> list[Any]:
        """Keras 3's model.metrics once compiled: a Mean named "loss", the compiled metrics as
        one "compile_metrics" (its result() a dict by name; fit's logs show each), then the
        metric objects held in the model's attributes. What a train_step updates and returns;
        fit's own C++ loop keeps its metrics in the engine (History has them)."""
        if not (self._user_compiled or getattr(self, "_step_compiled", False)):
            return []
        trackers = getattr(self, "_step_trackers", None)
        if trackers is None:
            trackers = [metrics_module.Mean(name="loss")]
            given = getattr(self, "_compiled_metrics", None)
            if given is not None:
                trackers.append(_CompileMetrics(given, self._loss_name))
            self._step_trackers = trackers
        held = [v for v in vars(self).values() if isinstance(v, metrics_module.Metric)]
        return trackers + [m for m in held if not any(m is t for t in trackers)]

    # --- inspection and weights -----------------------------------------------------------
    def summary(
        self, line_length: Any = None, positions: Any = None, print_fn: Any = None, **kwargs: Any
    ) -> None:
        """Keras 3's table (keras/_summary.py): the layers (a model used as a layer is one
        row), output shapes, parameter counts, totals, and the optimizer's once it trained."""
        from . import _summary

        optimizer_params = None
        model = self._core
        if self._user_compiled and model is not None and model.optimizer_steps > 0:
            trainable = sum(w.size for layer in self.layers for w in layer.trainable_weights)
            optimizer_params = _summary.optimizer_variable_count(model.optimizer, trainable)
        text = _summary.summary_text(self, optimizer_params, line_length, positions)
        (print_fn or print)(text)

    def build(self, input_shape: Any = None) -> None:
        """Keras's build((None, ...)): the input shape of a model made without one, as an
        InputLayer put first."""
        if input_shape is None:
            raise ValueError("build: give the input shape, e.g. model.build((None, 784))")
        shape = _shape_list(input_shape)
        if self.built:
            if list(self._input_shape or []) != shape:
                raise ValueError(
                    f"build: the model's input shape is {self._input_shape} already, not {shape}"
                )
            return
        self._layers.insert(0, InputLayer(shape=shape))
        self._core = None
        self._user_compiled = False

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

    @property
    def weights(self) -> list[_tensor.Tensor]:
        """Every weight, the layers' in turn, read from the engine at once; each marked as the
        engine's parameter (as trainable_weights), named as Keras names its variables, so that a
        tape differentiates `model.variables` too (None for the non-trainable ones, as TF)."""
        from .. import _tape

        if not self.built:
            return [w for layer in self.layers for w in layer.weights]
        self._compiled_model()
        read: dict[int, list[np.ndarray]] = {}
        out = []
        for layer, a, _ in self._weight_slices():
            values = _latest_of(layer, self, a, read)
            for i, (name, trainable) in enumerate(layer._weight_kinds()):
                t = _tape.tag_variable(_tensor.tensor(values[i]), layer, i)
                t.name, t.path, t.trainable = name, f"{layer.name}/{name}", trainable
                out.append(t)
        return out

    @property
    def variables(self) -> list[_tensor.Tensor]:
        return self.weights

    @property
    def trainable_weights(self) -> list[_tensor.Tensor]:
        """The trainable layers' trainable weights, read from the engine at once; each marked as
        the engine's parameter, for GradientTape.gradient and optimizer.apply_gradients."""
        from .. import _tape

        if not self.trainable or not self.built:
            return []
        self._compiled_model()
        frozen = self._frozen_leaves()
        read: dict[int, list[np.ndarray]] = {}  # id(model) -> its engine's weights, read once
        out = []
        for layer, a, _ in self._weight_slices():
            if id(layer) in frozen or not layer.trainable:
                continue
            # Read where the layer's weights are now (the model that ran last, as with a
            # trainer wrapping a model), not pulled into this model's engine: a custom
            # train_step reads these every batch, and moving them would copy every weight twice
            # a step between the two engines.
            values = _latest_of(layer, self, a, read)
            for i, (_, trainable) in enumerate(layer._weight_kinds()):
                if trainable:
                    out.append(_tape.tag_variable(_tensor.tensor(values[i]), layer, i))
        return out

    def add_loss(self, loss: Any) -> None:
        """Keras's add_loss in a subclassed model's call(): traced, a term of fit's and
        evaluate's loss (keras/_trace.py's LossTerm), as a layer's."""
        Layer.add_loss(self, loss)  # type: ignore[arg-type]

    @property
    def losses(self) -> list[_tensor.Tensor]:
        """Keras's: the regularization losses of the trainable weights, each the penalty of a
        layer's kernel_regularizer, bias_regularizer, gamma_regularizer or beta_regularizer, or
        of a custom layer's add_weight(regularizer=...), on the weight's current values (what the
        engine adds to each step's loss), layer by layer in the model's order."""
        if not self.built:
            return []
        if any(_has_loss_terms(item) for item in self._layers):
            raise NotImplementedError(
                f"model '{self.name}'.losses: the model's activity regularizers or add_loss() "
                "terms are computed by the engine in fit and evaluate, not as tensors of a "
                "call (a GradientTape loop's sum(model.losses)): not supported (yet); "
                f"{SEE_SUPPORTED}"
            )
        out: list[_tensor.Tensor] = []
        for item in self._layers:
            _weight_penalties(item, out)
        return out

    @property
    def non_trainable_weights(self) -> list[_tensor.Tensor]:
        if not self.trainable:
            return self.weights
        return [w for layer in self.layers for w in layer.non_trainable_weights]

    @property
    def trainable_variables(self) -> list[_tensor.Tensor]:
        return self.trainable_weights

    @property
    def non_trainable_variables(self) -> list[_tensor.Tensor]:
        return self.non_trainable_weights

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        return [k for layer in self._weight_leaves() for k in layer._weight_kinds()]

    def _weight_leaves(self) -> list[Layer]:
        """The leaf layers in the order of their weights: a layer called more than once (shared)
        at its first call only, as the engine keeps its one set of weights."""
        seen: set[int] = set()
        out = []
        for layer in self._leaves():
            if id(layer) not in seen:
                seen.add(id(layer))
                out.append(layer)
        return out

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None) -> Any:
        """Keras's get_layer: by name (among model.layers) or by index."""
        if index is not None and name is not None:
            raise ValueError(
                f"Provide only a layer name or a layer index. Received: index={index}, "
                f"name={name}."
            )
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(
                    f"Was asked to retrieve layer at index {index} but model only has "
                    f"{len(self.layers)} layers."
                )
            return self.layers[index]
        if name is not None:
            for layer in self.layers:
                if layer.name == name:
                    return layer
            raise ValueError(
                f"No such layer: {name}. Existing layers are: {[l.name for l in self.layers]}."
            )
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    @property
    def metrics_names(self) -> list[str]:
        """Keras 3's: ['loss', 'compile_metrics'] once compiled with metrics, ['loss'] without,
        [] before compile."""
        if not self._user_compiled or self._core is None:
            return []
        if self._output_count() > 1:  # each output's loss too, once fit or evaluate ran
            names = ["loss"]
            if any(not n.endswith("_loss") for n in self._metric_order):
                names.append("compile_metrics")
            if getattr(self, "_outputs_ran", False):
                names += self._output_loss_names
            return names
        return ["loss", "compile_metrics"] if self._core.metrics() else ["loss"]

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        """Keras's: the model's flag and each of its layers' (models inside included)."""
        self._trainable = bool(value)
        for layer in self._layers:
            layer.trainable = value

    @property
    def input_shape(self) -> Optional[tuple[Optional[int], ...]]:
        shape = self._known_input_shape()
        return None if shape is None else (None, *shape)

    def set_weights(self, weights: list[Any]) -> None:
        """Arrays in get_weights()'s order and shapes; the library checks count and shapes."""
        model = self._device_model()
        for layer, _, _ in self._weight_slices():
            layer._weights_in = self  # this model's engine holds what is set now
        names = [name for name, _ in model.get_weights()]
        named = [(names[i] if i < len(names) else "", w) for i, w in enumerate(weights)]
        model.set_weights(
            [(n, _floats(w, f"set_weights: weight {i}")) for i, (n, w) in enumerate(named)]
        )

    # --- files (_archive.py) --------------------------------------------------------------
    def save_weights(
        self, filepath: Any, overwrite: bool = True, max_shard_size: Any = None
    ) -> None:
        """`.weights.h5` (Keras 3's layout) or `.safetensors`, by the suffix."""
        _archive.save_weights(self, filepath, overwrite=overwrite, max_shard_size=max_shard_size)

    def load_weights(self, filepath: Any, skip_mismatch: bool = False, **kwargs: Any) -> None:
        """From a `.weights.h5` (Keras's or crossover's) or `.safetensors` file."""
        reject_unknown("Model.load_weights", kwargs, like="signature")  # Keras 2's by_name=, ...
        _archive.load_weights(self, filepath, skip_mismatch=skip_mismatch)

    def to_json(self, **kwargs: Any) -> str:
        """Keras 3's model JSON; keyword arguments go to json.dumps."""
        return _archive.to_json(self, **kwargs)

    def save(
        self, filepath: Any, overwrite: bool = True, zipped: Any = None, **kwargs: Any
    ) -> None:
        """Keras 3's `.keras` archive: config.json (to_json's), model.weights.h5 (save_weights's)
        and metadata.json; keras.models.load_model (crossover's or Keras's) reads it."""
        _archive.save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    # --- Keras 3's graph of a Sequential whose input shape is known ---------------------------
    def _symbolic_graph(self) -> Optional[tuple[Any, Any]]:
        """(input, output) of the model's layers called one after the other on a symbolic input
        of its input shape, as Keras 3 makes a Sequential's graph once it knows that shape (an
        Input first, input_shape= on the first layer, build(), or fit and evaluate on data):
        each layer's `input` and `output` are then its call's (the activation-visualisation
        idiom: keras.Model(model.inputs, [layer.output for layer in model.layers])). None while
        the shape is unknown. Made when first asked for, and again after the layers changed (a
        layer's `output` stays its first call's, as Keras's)."""
        if self._functional_class or "_eager_shape" in self.__dict__:
            return None  # a graph already; or the one-layer model of a layer called on data
        shape = self._input_shape
        if not shape and self._core is not None and self._core.input_shape:
            shape = list(self._core.input_shape)  # learnt from the data fit or evaluate took
        if not shape or not self.layers:
            return None
        key = (tuple(id(l) for l in self._layers), tuple(shape))
        made = self.__dict__.get("_chain")
        if made is not None and made[0] == key:
            return made[1], made[2]
        first = self._layers[0]
        if isinstance(first, InputLayer):
            entry = first
        else:  # input_shape= on the first layer, or a shape from data: Keras's own InputLayer
            entry = self.__dict__.get("_chain_input")
            if entry is None or list(entry._input_shape) != list(shape):
                entry = InputLayer(shape=tuple(shape))
                self._chain_input = entry
        x = getattr(entry, "_output_tensor", None)
        x = _symbolic.input_tensor(entry) if x is None else x
        inputs = x
        _graph._tracing[0] += 1  # a model among the layers adds its layers in its place
        try:
            for item in self._layers:
                if not isinstance(item, InputLayer):
                    x = _graph.call(item, x, {})
        finally:
            _graph._tracing[0] -= 1
        self._chain = (key, inputs, x)
        return inputs, x

    def _graph_attribute_error(self, name: str) -> AttributeError:
        """Keras 3's error for model.input / output (a Sequential never called as a layer: they
        are a node's, and Keras's Sequential has none) and for inputs / outputs while the input
        shape is unknown."""
        if name in ("input", "output"):
            return AttributeError(
                f"The layer {self.name} has never been called and thus has no defined {name}."
            )
        return AttributeError(f"Sequential model '{self.name}' has no defined {name} yet.")

    @property
    def inputs(self) -> list[Any]:
        graph = self._symbolic_graph()
        if graph is None:
            raise self._graph_attribute_error("inputs")
        return [graph[0]]

    @property
    def outputs(self) -> list[Any]:
        graph = self._symbolic_graph()
        if graph is None:
            raise self._graph_attribute_error("outputs")
        return [graph[1]]

    @property
    def input(self) -> Any:
        raise self._graph_attribute_error("input")

    @property
    def output(self) -> Any:
        raise self._graph_attribute_error("output")

    # --- what Keras has and crossover does not (api block) ----------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in _UNSUPPORTED_METHODS:
            raise AttributeError(
                f"{type(self).__name__}.{name} is not supported (yet): "
                f"{_UNSUPPORTED_METHODS[name]}; {SEE_SUPPORTED}"
            )
        if name in ("input", "output", "inputs", "outputs"):
            raise self._graph_attribute_error(name)  # (their property raised it first)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")


_UNSUPPORTED_METHODS = {
    "export": "no SavedModel export",
    "train_on_batch": "training runs whole epochs in C++ (fit)",
    "test_on_batch": "use evaluate()",
    "predict_on_batch": "use predict()",
    "fit_generator": "fit takes numpy arrays",
}


def _has_loss_terms(layer: Any) -> bool:
    """Whether a layer (or a model, or a custom layer's traced ops) has an activity regularizer
    or an add_loss() term (keras/_trace.py's AddLoss and ActivityRegularization ops)."""
    if isinstance(layer, _ModelBase):
        return any(_has_loss_terms(item) for item in layer._layers)
    if getattr(layer, "activity_regularizer", None) is not None:
        return True
    signature = getattr(layer, "_signature", None)
    if signature and signature[0] in ("add_loss", "activity"):
        return True
    ops = layer.__dict__.get("_op_layers", [])
    return any(_has_loss_terms(op) for op in ops) or any(
        _has_loss_terms(sub) for sub in layer._sublayers()
    )


def _tape_penalties(model: Any) -> Optional[list[_tensor.Tensor]]:
    """Keras's model.losses under a GradientTape (compute_loss in a Python step): each trainable
    regularized weight's penalty, its regularizer called on the weight as
    model.trainable_weights gives it (the tape records the ops and differentiates them by
    variable); None where a custom layer's add_weight has a regularizer (its weight is one of
    its traced ops', not reached here)."""
    found: list[tuple[Any, Any, Any]] = []
    _regularized_weights(model, True, found)
    if any(not isinstance(key, str) for _, key, _ in found):
        return None
    if not found:
        return []
    tagged = {}
    for t in model.trainable_weights:
        layer, index = t._crossover_variable
        tagged[(id(layer), index)] = t
    out = []
    for layer, name, regularizer in found:
        names = [n for n, _ in layer._weight_kinds()]
        weight = tagged.get((id(layer), names.index(name))) if name in names else None
        if weight is not None:
            out.append(regularizer(weight))
    return out


def _regularized_weights(layer: Any, trainable: bool, out: list[tuple[Any, Any, Any]]) -> None:
    """The trainable regularized weights of `layer` (a model, or a layer and the layers it
    holds) into `out` as (layer, key, regularizer): a custom layer's own (add_weight's, the key
    its Weight) then a built-in layer's kernel, bias, gamma, beta (the key their name), then its
    sublayers'. A frozen layer's add none, as Keras counts trainable weights."""
    trainable = trainable and layer.trainable
    if isinstance(layer, _ModelBase):
        for item in layer._layers:
            _regularized_weights(item, trainable, out)
        return
    if not trainable:
        return
    for w in layer.__dict__.get("_custom_weights", []):
        if w.trainable and w.regularizer is not None:
            out.append((layer, w, w.regularizer))
    for weight in _REGULARIZED_WEIGHTS:
        regularizer = getattr(layer, f"{weight}_regularizer", None)
        if regularizer is not None:
            out.append((layer, weight, regularizer))
    for sub in layer._sublayers():
        _regularized_weights(sub, trainable, out)


def _weight_penalties(layer: Any, out: list[_tensor.Tensor]) -> None:
    """The penalties of `layer`'s regularized trainable weights (_regularized_weights) on their
    current values into `out` (_Model.losses)."""
    found: list[tuple[Any, Any, Any]] = []
    _regularized_weights(layer, True, found)
    for owner, key, regularizer in found:
        if not isinstance(key, str):  # a custom layer's Weight
            out.append(regularizer(np.asarray(key, dtype=np.float32)))
        elif (value := owner._weight(key)) is not None:  # None: a bias the layer lacks
            out.append(regularizer(np.asarray(value)))


def _output_heads(
    names: list[str], loss: Any, loss_weights: Any, metrics: Any
) -> list[tuple[str, bool, float, list[str], list[str], list[Any]]]:
    """compile's arguments for a model of several outputs, one head per output in the outputs'
    order (names: output_names): (loss, from_logits, weight, metric kinds, metric names as
    reported ("<output>_<metric>"), their parameters). loss: one for all, a list, or a dict by
    output name; loss_weights and metrics: a list (metrics: of lists) or a dict by output name;
    a flat list of metrics is Keras's ValueError."""

    def per_output(value: Any, what: str, missing: Any) -> list[Any]:
        if isinstance(value, dict):
            unknown = [k for k in value if k not in names]
            if unknown:
                raise ValueError(
                    f"compile: {what} names {unknown}, which are not among the model's outputs "
                    f"{names}"
                )
            return [value.get(n, missing) for n in names]
        if len(value) != len(names):
            raise ValueError(
                f"compile: {what} has {len(value)} entries, but the model has {len(names)} "
                f"outputs {names}"
            )
        return list(value)

    if isinstance(loss, (list, tuple, dict)):
        losses = per_output(loss, "loss", None)
    else:
        losses = [loss] * len(names)
    if isinstance(loss_weights, dict) and len(loss_weights) != len(names):
        raise ValueError(
            f"`loss_weights` must match the number of losses, got {len(names)} losses and "
            f"{len(loss_weights)} weights."
        )
    weights = (
        [1.0] * len(names)
        if loss_weights is None
        else per_output(loss_weights, "loss_weights", 1.0)
    )
    if metrics is None:
        per_metrics: list[Any] = [None] * len(names)
    elif isinstance(metrics, dict):
        per_metrics = per_output(metrics, "metrics", None)
    elif isinstance(metrics, (list, tuple)) and all(
        m is None or isinstance(m, (list, tuple)) for m in metrics
    ):
        per_metrics = per_output(metrics, "metrics", None)
    else:
        raise ValueError(
            "Invalid `metrics`. `metrics` should contain metrics objects and either be a dict or "
            f"a list matching the output names of the functional model {names} or match the "
            f"output structure of the model: {['X'] * len(names)}. Received: metrics={metrics}"
        )
    heads = []
    for name, one_loss, weight, one_metrics in zip(names, losses, weights, per_metrics):
        if one_loss is None:
            raise ValueError(f"compile: no loss for output '{name}'")
        loss_name = losses_module.library_name(one_loss)
        if one_metrics is not None and not isinstance(one_metrics, (list, tuple)):
            one_metrics = [one_metrics]  # metrics={"priority": "mae"}
        kinds, metric_names, parameters = metrics_module.resolve(
            list(one_metrics) if one_metrics else None, loss_name
        )
        if weight is None or isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ValueError(f"compile: loss_weights of output '{name}' must be a number")
        heads.append(
            (
                loss_name,
                losses_module.from_logits(one_loss),
                float(weight),
                list(kinds),
                [f"{name}_{n}" for n in metric_names],
                list(parameters),
                losses_module.parameter(one_loss),
            )
        )
    return heads


def _overrides(model: Any, method: str) -> bool:
    """Whether the model's class (the user's, not crossover's) defines `method` itself."""
    return any(
        method in vars(cls)
        for cls in type(model).__mro__
        if not cls.__module__.startswith("crossover.") and cls is not object
    )


def _step_metrics(model: Any) -> list[Any]:
    """The metric objects a train_step updates: the model's `metrics` (a property the user's
    class defines), reset at each epoch's start as Keras resets them."""
    metrics = getattr(model, "metrics", None)
    return [m for m in (metrics or []) if hasattr(m, "reset_state")]


def _float_logs(logs: Any, who: str) -> dict[str, float]:
    """A train_step's logs as numbers; a dict among them (compile_metrics' result) gives its
    entries, as Keras's logs flatten it."""
    if not isinstance(logs, dict):
        raise TypeError(f"{who} must return a dict of logs (name: value), got {logs!r}")
    out: dict[str, float] = {}
    for k, v in logs.items():
        if isinstance(v, dict):
            out.update(_float_logs(v, who))
        else:
            out[str(k)] = float(np.asarray(_tensor._plain(v)))
    return out


_LOSS_CLASSES = {
    r["name"]: getattr(losses_module, r["class_name"]) for r in losses_module.RULES.values()
}


class Sequential(_Model):
    """keras.Sequential: a stack of layers, given as a list or with add()."""

    def __init__(
        self,
        layers: Optional[Iterable[Layer]] = None,
        name: Optional[str] = None,
        trainable: bool = True,
    ) -> None:
        super().__init__(name=name, trainable=trainable)
        for layer in layers or []:
            self.add(layer)

    def add(self, layer: Any) -> None:
        if isinstance(layer, _symbolic.KerasTensor) and isinstance(layer._layer, InputLayer):
            layer = layer._layer  # Sequential([keras.Input(shape), ...])
        if isinstance(layer, _ModelBase) and layer._functional_class and not layer._is_chain():
            raise NotImplementedError(
                f"functional model '{layer.name}' used as a layer of a Sequential model: only a "
                f"functional model whose layers form a chain is supported (yet); {SEE_SUPPORTED}"
            )
        if isinstance(layer, _ModelBase):
            if layer is self or self in layer._models_inside():
                raise ValueError("A Sequential model cannot contain itself")
            self._stash_weights()
            self._layers.append(layer)
            self._core = None
            self._user_compiled = False
            return
        if not isinstance(layer, Layer):
            raise ValueError(
                f"Only instances of crossover.keras.layers.Layer can be added to a Sequential "
                f"model, got {layer!r} (of type {type(layer).__name__})"
            )
        if isinstance(layer, InputLayer) and self._layers:
            raise ValueError("An InputLayer can only be the first layer of a Sequential model")
        self._stash_weights()
        self._layers.append(layer)
        layer._home = self
        self._core = None  # rebuilt (and compiled again) on next use, as Keras requires
        self._user_compiled = False

    def pop(self, rebuild: bool = True) -> Any:
        """Keras's pop: removes and returns the last layer (the others keep their weights)."""
        if not self.layers:
            raise TypeError("There are no layers in the model.")
        self._stash_weights()
        layer = self._layers.pop()
        self._core = None
        self._user_compiled = False
        return layer


class _CompileMetrics:
    """Keras 3's CompileMetrics: compile's metrics as one, named "compile_metrics", updated
    together (update_state(y, y_pred)), its result() a dict of each one's by name."""

    name = "compile_metrics"

    def __init__(self, given: Any, loss_name: str) -> None:
        accuracy = {
            "sparse_categorical_crossentropy": metrics_module.SparseCategoricalAccuracy,
            "categorical_crossentropy": metrics_module.CategoricalAccuracy,
            "binary_crossentropy": metrics_module.BinaryAccuracy,
        }
        self._metrics: list[Any] = []
        for metric in given if isinstance(given, (list, tuple)) else [given]:
            if isinstance(metric, str) and metric.lower() in ("accuracy", "acc"):
                if not loss_name:  # a loss the engine has no op for: by the shapes, later
                    self._metrics.append(metric)
                    continue
                if loss_name not in accuracy:
                    raise ValueError(f"compile: metric {metric!r} with loss {loss_name}")
                self._metrics.append(accuracy[loss_name](name=metric))
                continue
            made = metrics_module.get(metric)
            if metrics_module.computed_in_python([made]) and not isinstance(
                made, metrics_module.Metric
            ):
                made = metrics_module.MeanMetricWrapper(made)  # the user's own function
            if not isinstance(made, metrics_module.Metric):
                kind = metrics_module._kind_of(metric)[0]
                made = metrics_module._CLASSES[kind](name=getattr(metric, "__name__", kind))
            elif isinstance(metric, str):
                made.name = metric  # Keras's key: the name given ("mae")
            self._metrics.append(made)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        self._metrics = [
            _python_step.accuracy_for(m, y_true, y_pred) if isinstance(m, str) else m
            for m in self._metrics
        ]
        for metric in self._metrics:
            metric.update_state(y_true, y_pred, sample_weight)

    def result(self) -> dict[str, Any]:
        return {m.name: m.result() for m in self._metrics if not isinstance(m, str)}

    def reset_state(self) -> None:
        for metric in self._metrics:
            if not isinstance(metric, str):
                metric.reset_state()

    def __repr__(self) -> str:
        return "<CompileMetrics name=compile_metrics>"


def _latest_of(
    layer: Layer, model: Sequential, first: int, read: dict[int, list[np.ndarray]]
) -> list[np.ndarray]:
    """The layer's latest weights for `model`, whose engine has them from `first` on when they
    are there: from where they are (an engine's get_weights read once per model into `read`, or
    the arrays the layer keeps)."""
    place = layer._weights_in
    if isinstance(place, list):
        return place
    if not isinstance(place, _ModelBase) or place._core is None or not place._core.compiled:
        place = model
    if id(place) not in read:
        read[id(place)] = [value for _, value in place._core.get_weights()]
    if place is not model:
        first = next(a for l, a, _ in place._weight_slices() if l is layer)
    return read[id(place)][first:]
