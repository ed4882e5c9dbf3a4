"""Keras's functional API on crossover's engine: keras.Input gives a symbolic tensor, calling a
layer on symbolic tensors records the call, and keras.Model(inputs, outputs) turns the calls
between them into the library's graph model (nn/sequential.h, LayerGraph).

    inputs = keras.Input(shape=(784,))
    h = layers.Dense(64, activation="relu")(inputs)
    h = layers.Add()([layers.Dense(64, activation="relu")(h), h])
    model = keras.Model(inputs=inputs, outputs=layers.Dense(10, activation="softmax")(h))

One or several inputs (a list or a dict of keras.Input tensors; fit, evaluate and predict then
take a list, or a dict keyed as the inputs are, of arrays with one row each per sample, which the
engine takes packed side by side) and one or several outputs (a list, or a dict sorted by key,
each read by no other layer: compile takes a loss per output, the targets are packed the same
way, predict returns a list or a dict). A layer called more than once (Keras's shared layer, a
siamese network's tower) is one layer with one set of weights, each call a node of the graph
(LayerGraph::shared_with): fit adds the gradients of its calls before the one update. The model
trains, saves and loads as a Sequential does.

A subclassed keras.Model (its own __init__ making layers and call() applying them) becomes the
same graph: the first time the model meets data or a shape (fit, evaluate, predict, calling it,
build), its call() runs once on a symbolic input of that shape, and the layer calls it makes
are the graph (Keras traces a subclassed model's call the same way for its functional form).
A call() that computes on the tensors with anything but layers (tf ops, x * y) cannot be
traced and says so."""

import inspect
from typing import Any, Optional

from .._args import SEE_SUPPORTED, reject_unsupported
from . import _eager, _names, _trace
import numpy as np

from ._graph import _Modes, _as_mode, _modes, _tracing, call
from ._sequential import _Model, shared_with
from ._symbolic import KerasTensor, _ordered, input_tensor, is_symbolic
from .layers import InputLayer, Layer, _ModelBase


def _model_outputs(value: Any) -> tuple[list[KerasTensor], Optional[list[str]]]:
    """keras.Model's outputs: one tensor, a list of them, or a dict of them (Keras flattens a
    dict in the order of its sorted keys, and predict returns a dict by those keys); the tensors
    in the model's order and the dict's keys (None for a tensor or a list)."""
    keys: Optional[list[str]] = None
    if isinstance(value, dict):
        keys = sorted(str(k) for k in value)
        tensors = [value[k] for k in sorted(value, key=str)]
    else:
        tensors = list(value) if isinstance(value, (list, tuple)) else [value]
    if not tensors:
        raise ValueError("Model: give at least one output")
    for t in tensors:
        if not isinstance(t, KerasTensor):
            raise ValueError(
                "Model: outputs must be symbolic tensors (keras.Input(...) and the layers' "
                f"outputs), got {type(t).__name__}"
            )
    if len({id(t) for t in tensors}) != len(tensors):
        raise NotImplementedError(
            f"Model: the same tensor given twice among the outputs is not supported (yet); "
            f"{SEE_SUPPORTED}"
        )
    return tensors, keys


def _model_inputs(value: Any) -> tuple[list[KerasTensor], list[str]]:
    """keras.Model's inputs: one tensor, a list of them, or a dict of them (Keras flattens a
    dict in the order of its sorted keys); the tensors in the model's order and the names data
    given as a dict is keyed by (the dict's keys, else the inputs' names)."""
    if isinstance(value, dict):
        keys = sorted(value)
        tensors, names = [value[k] for k in keys], [str(k) for k in keys]
    else:
        tensors = list(value) if isinstance(value, (list, tuple)) else [value]
        names = []
    if not tensors:
        raise ValueError("Model: give at least one input (keras.Input(...))")
    for t in tensors:
        if not isinstance(t, KerasTensor):
            raise ValueError(
                "Model: inputs must be symbolic tensors (keras.Input(...)), got "
                f"{type(t).__name__}"
            )
        if not isinstance(t._layer, InputLayer):
            raise ValueError(
                "Model: inputs must be keras.Input(...) tensors, not the output of layer "
                f"'{t._layer.name}'"
            )
    if len({id(t) for t in tensors}) != len(tensors):
        raise ValueError("Model: the same keras.Input is given twice among the inputs")
    return tensors, names or [t._layer.name for t in tensors]


def _as_sinks(outputs: list[KerasTensor]) -> list[KerasTensor]:
    """Several outputs as the engine takes them, each read by no layer (LayerGraph's
    output_layers): an output that another layer of the model reads, or an input, is given
    through an identity op after it (an engine node that is no Keras layer: model.layers, the
    weights and summary do not show it), so that a model may output inner tensors as Keras's
    does (keras.Model(model.inputs, [layer.output for layer in model.layers]))."""
    read = {id(p) for t in _ordered(outputs) for p in t._inputs}
    ends = []
    for t in outputs:
        if id(t) in read or isinstance(t._layer, InputLayer):
            t = _trace.identity(t)
        ends.append(t)
    return ends


def _keras_layers(engine_layers: list[Any]) -> list[Any]:
    """The Keras layers of the engine's: a custom layer once in place of its ops' layers; an op
    applied in the model itself (x * 2.0) is none (Keras 3's ops are operations, not layers)."""
    out: list[Any] = []
    for layer in engine_layers:
        owner = getattr(layer, "_owner", None)
        if owner is None and hasattr(layer, "_owner"):
            continue
        shown = owner if owner is not None else layer
        if not any(shown is l for l in out):
            out.append(shown)
    return out


class Functional(_Model):
    """keras.Model(inputs, outputs): the layers between them, as a graph. model.layers lists the
    InputLayer too, as Keras's does."""

    _functional_class = True

    def __init__(
        self,
        inputs: Any,
        outputs: Any,
        name: Optional[str] = None,
        trainable: bool = True,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise TypeError(f"Model got unexpected keyword arguments {sorted(kwargs)}")
        given = name
        super().__init__(name=name or _names.auto_name("Functional"), trainable=trainable)
        self._given_name = given or self.name
        self._set_graph(inputs, outputs)

    def _set_graph(self, inputs: Any, outputs: Any) -> None:
        """The layers between the inputs and the outputs, in Keras's order, as the graph."""
        self._input_tensors, self._input_names = _model_inputs(inputs)
        self._input_tensor = self._input_tensors[0]
        self._output_tensors, self._output_keys = _model_outputs(outputs)
        # Keras lists a dict's outputs' losses in the dict's own order (compile's _metric_order).
        self._output_given_keys = [str(k) for k in outputs] if isinstance(outputs, dict) else None
        self._output_tensor = self._output_tensors[0]
        ends = _as_sinks(self._output_tensors) if len(self._output_tensors) > 1 else None
        ends = ends or self._output_tensors
        # Outputs that another layer reads (or inputs): predicted through an identity op.
        self._inner_outputs = [
            t._layer.name for t, end in zip(self._output_tensors, ends) if t is not end
        ]
        tensors = _ordered(ends)
        given = {id(t) for t in self._input_tensors}
        names = ", ".join(f"'{t._layer.name}'" for t in self._input_tensors)
        for t in tensors:
            if isinstance(t._layer, InputLayer) and id(t) not in given:
                raise ValueError(
                    f"Model: the outputs depend on input '{t._layer.name}', which is not among "
                    f"the model's inputs ({names})"
                )
        position = {id(t): i for i, t in enumerate(tensors)}
        for t in self._input_tensors:
            if id(t) not in position:
                raise ValueError(f"Model: the outputs do not depend on the input '{t._layer.name}'")
        self._layers = [t._layer for t in tensors]
        self._graph = [[position[id(p)] for p in t._inputs] for t in tensors]
        self._tensors = tensors
        # A layer called more than once: each later call is the first's layer (shared weights).
        self._shared = shared_with(self._layers)
        self._input_order = [position[id(t)] for t in self._input_tensors]
        self._output_order = [position[id(t)] for t in ends]
        for layer in self._layers:
            layer._home = self

    def _x_array(self, x: Any, what: str) -> np.ndarray:
        """x for the engine: with several inputs, a list (in the model's order) or a dict (keyed
        as the inputs) of arrays, one row each per sample, packed side by side."""
        from . import _sequential

        inputs = getattr(self, "_input_tensors", None)
        if inputs is None or len(inputs) == 1:
            if isinstance(x, dict) and inputs is not None and len(x) == 1:
                x = next(iter(x.values()))
            elif isinstance(x, (list, tuple)) and len(x) == 1 and np.ndim(x[0]) >= 1:
                x = x[0]
            return _sequential._floats(x, what)
        keys = self._input_names
        if isinstance(x, dict):
            for k in keys:
                if k not in x:
                    raise ValueError(
                        f'Missing data for input "{k}". You passed a data dictionary with keys '
                        f"{list(x)}. Expected the following keys: {keys}"
                    )
            arrays = [x[k] for k in keys]
        elif isinstance(x, (list, tuple)) and len(x) == len(inputs):
            arrays = list(x)
        else:
            got = len(x) if isinstance(x, (list, tuple)) else 1
            raise ValueError(
                f'Layer "{self.name}" expects {len(inputs)} input(s), but it received {got} '
                f"input tensors. Pass the inputs as a list of {len(inputs)} arrays, or a dict "
                f"keyed by {keys}"
            )
        arrays = [_sequential._floats(a, what) for a in arrays]
        sizes = [a.shape[0] if a.ndim else 0 for a in arrays]
        if len(set(sizes)) != 1:
            raise ValueError(
                "Data cardinality is ambiguous. Make sure all arrays contain the same number of "
                f"samples.'{what}' sizes: " + ", ".join(map(str, sizes))
            )
        for i, (a, t) in enumerate(zip(arrays, inputs)):
            want = tuple(t.shape[1:])
            got = tuple(a.shape[1:])
            if got != want and got + (1,) != want:
                raise ValueError(
                    f"Input {i} with name '{t._layer.name}' of layer '{self.name}' is "
                    f"incompatible with the layer: expected shape={t.shape}, found "
                    f"shape={a.shape}"
                )
        return np.ascontiguousarray(
            np.concatenate([a.reshape(sizes[0], -1) for a in arrays], axis=1)
        )

    # --- structure ----------------------------------------------------------------------------
    def build(self, input_shape: Any = None) -> None:
        """Built when made: its input's shape is known."""

    @property
    def layers(self) -> list[Any]:
        return _keras_layers(self._layers)

    def _leaves(self) -> list[Layer]:
        return list(self._layers)

    def _is_chain(self) -> bool:
        if any(f >= 0 for f in getattr(self, "_shared", [])):
            return False  # Keras's summary shows a shared layer's calls in "Connected to"
        return all(g == [i - 1] for i, g in enumerate(self._graph) if i > 0)

    @property
    def inputs(self) -> list[KerasTensor]:
        return list(getattr(self, "_input_tensors", [self._input_tensor]))

    @property
    def outputs(self) -> list[KerasTensor]:
        return list(getattr(self, "_output_tensors", [self._output_tensor]))

    @property
    def output_names(self) -> list[str]:
        """Keras's: the outputs' layer names (a dict's keys for dict outputs)."""
        keys = getattr(self, "_output_keys", None)
        return list(keys) if keys else [t._layer.name for t in self.outputs]

    def _output_count(self) -> int:
        return len(self.outputs)

    def _several_targets(self, y: Any, what: str) -> np.ndarray:
        """y of a model of several outputs, for the engine: a list (in the outputs' order) or a
        dict (keyed as output_names) of arrays, packed side by side, each output's flattened
        (a class index for sparse_categorical_crossentropy)."""
        from . import _sequential

        names, outputs = self.output_names, self.outputs
        if isinstance(y, dict):
            for k in names:
                if k not in y:
                    raise ValueError(
                        f'Missing data for output "{k}". You passed a data dictionary with keys '
                        f"{list(y)}. Expected the following keys: {names}"
                    )
            arrays = [y[k] for k in names]
        elif isinstance(y, (list, tuple)) and len(y) == len(outputs):
            arrays = list(y)
        else:
            got = len(y) if isinstance(y, (list, tuple)) else 1
            raise ValueError(
                f"{what}: the model has {len(outputs)} outputs {names}, but {got} target "
                f"arrays were given: pass a list of {len(outputs)} arrays or a dict keyed by "
                f"{names}"
            )
        columns = []
        for a, t, name, loss in zip(arrays, outputs, names, self._output_losses):
            a = _sequential._floats(a, what)
            n = a.shape[0] if a.ndim else 0
            if loss == "sparse_categorical_crossentropy":
                if not (a.ndim == 1 or (a.ndim == 2 and a.shape[1] == 1)):
                    raise ValueError(
                        f"{what}: output '{name}' takes one class index per sample for "
                        f"sparse_categorical_crossentropy, got shape {a.shape}"
                    )
                columns.append(a.reshape(n, 1))
                continue
            width = int(np.prod(t.shape[1:]))
            if a.ndim == 0 or int(np.prod(a.shape[1:])) != width:
                raise ValueError(
                    f"{what}: output '{name}' has shape {t.shape}, but its targets have shape "
                    f"{a.shape}"
                )
            columns.append(a.reshape(n, width))
        sizes = [c.shape[0] for c in columns]
        if len(set(sizes)) != 1:
            raise ValueError(
                "Data cardinality is ambiguous. Make sure all arrays contain the same number of "
                f"samples.'{what}' sizes: " + ", ".join(map(str, sizes))
            )
        return np.ascontiguousarray(np.concatenate(columns, axis=1), dtype=np.float32)

    def _split_outputs(self, packed: np.ndarray) -> Any:
        """predict's packed rows as Keras returns them: a list of arrays (a dict by
        output_names for dict outputs), each of its output's shape."""
        outputs = self.outputs
        if len(outputs) == 1:
            return packed
        parts, column = [], 0
        for t in outputs:
            width = int(np.prod(t.shape[1:]))
            part = packed[:, column : column + width]
            parts.append(np.ascontiguousarray(part).reshape((packed.shape[0], *t.shape[1:])))
            column += width
        if getattr(self, "_output_keys", None):
            return dict(zip(self.output_names, parts))
        return parts

    @property
    def input(self) -> Any:
        inputs = self.inputs
        return inputs[0] if len(inputs) == 1 else inputs

    @property
    def output(self) -> Any:
        outputs = self.outputs
        return outputs[0] if len(outputs) == 1 else outputs

    @property
    def output_shape(self) -> Any:
        outputs = self.outputs
        return outputs[0].shape if len(outputs) == 1 else [t.shape for t in outputs]

    def _model(self) -> Any:
        from .. import _core

        if self._core is None:
            core_layers = [l._core_layer() for l in self._layers]
            # Keras ignores input_shape= given to a layer called in a functional model (only
            # its InputLayer's shape counts): Flatten(input_shape=(28, 28)) on Input((28, 28, 1)).
            for layer, core_layer in zip(self._layers, core_layers):
                if core_layer.input_shape and not isinstance(layer, InputLayer):
                    core_layer.input_shape = []
                # A functional model's layers keep their Keras names (summary's, get_layer's) in
                # its files, as Keras writes them; a custom layer's ops are named by the engine.
                if not hasattr(layer, "_owner"):
                    core_layer.name = layer.name
            order = getattr(self, "_input_order", [])
            outputs = getattr(self, "_output_order", [])
            shared = getattr(self, "_shared", [])
            self._core = _core.Sequential(
                core_layers,
                self._graph,
                self._given_name,
                order if len(order) > 1 else [],
                outputs if len(outputs) > 1 else [],
                shared if any(f >= 0 for f in shared) else [],
            )
        self._sync_trainable()
        return self._core


def _sample_shape(x: Any, who: str) -> Any:
    """The per-sample shape of data given to a subclassed model before it is traced: a dict
    (by key) or list of them for several inputs."""
    from ._sequential import _is_dataset

    if _is_dataset(x):
        x = x._for_fit(who)[0]
    if isinstance(x, dict) and len(x) > 1:
        return {str(k): _sample_shape(v, who) for k, v in x.items()}
    if isinstance(x, dict) and x:
        x = next(iter(x.values()))
    if isinstance(x, (list, tuple)) and x and not isinstance(x[0], (int, float)):
        if len(x) != 1:
            return [_sample_shape(v, who) for v in x]
        x = x[0]
    shape = tuple(int(d) for d in np.shape(x))
    if len(shape) < 2:
        raise ValueError(
            f"{who}: the data's shape {shape} has no batch axis: give (samples, ...) to a model"
        )
    return shape[1:]


def _check_traced_outputs(model: Any, inputs: Any, outputs: Any) -> None:
    if not isinstance(outputs, KerasTensor) and not (
        isinstance(outputs, (list, tuple, dict)) and outputs
    ):
        raise TypeError(
            f"{type(model).__name__}.call returned {type(outputs).__name__}, not the output "
            "of a layer: crossover traces call() into a graph of its layers"
        )
    if outputs is inputs:
        raise TypeError(
            f"{type(model).__name__}.call returned its input: it applies no layer, and "
            "crossover's models are graphs of layers"
        )


def _keyword_value(model: Any, name: str, value: Any) -> Any:
    """A keyword argument of call()'s own as a key of its trace: a Python value (bool, number,
    string, None, or a tuple of them; a 0-d array or tensor by its value)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    if isinstance(value, (list, tuple)):
        return tuple(_keyword_value(model, name, v) for v in value)
    raise NotImplementedError(
        f"{type(model).__name__}(x, {name}=<{type(value).__name__}>): a keyword argument of "
        "call()'s own that is not a Python value (a bool, number or string) is not supported "
        f"(yet): crossover traces call() once per distinct set of their values; {SEE_SUPPORTED}"
    )


def _keyword_values(model: Any, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, _keyword_value(model, k, v)) for k, v in kwargs.items()))


class Subclassed(Functional):
    """A subclassed keras.Model: layers made in __init__, applied in call(); traced into the
    graph of its layer calls when it first meets data or a shape (see the module's text)."""

    _subclassed = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        name = kwargs.pop("name", None)
        # Keras's: a subclass of Model given (inputs, outputs) is a functional model of that
        # class (its own train_step, test_step, metrics run around the graph).
        graph = None
        if args or "inputs" in kwargs or "outputs" in kwargs:
            inputs = kwargs.pop("inputs", args[0] if args else None)
            outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
            if inputs is None or outputs is None or len(args) > 2:
                raise TypeError(
                    f"Model.__init__ of {type(self).__name__} takes (inputs, outputs) or name= "
                    f"only, got {list(args) + sorted(kwargs)}"
                )
            graph, args = (inputs, outputs), ()
        reject_unsupported(
            "Model",
            trainable=(kwargs.pop("trainable", True), True),
            dtype=(kwargs.pop("dtype", None), None),
        )
        if args or kwargs:
            raise TypeError(
                f"Model.__init__ of a subclassed model ({type(self).__name__}) takes name= only, "
                f"got {list(args) + sorted(kwargs)}"
            )
        _Model.__init__(self, name=name or _names.auto_name(type(self).__name__))
        self._given_name = self.name
        self._input_tensor: Optional[KerasTensor] = None
        self._output_tensor: Optional[KerasTensor] = None
        self._graph = []
        self._compile_args: Optional[tuple[tuple[Any, ...], dict[str, Any]]] = None
        self._functional = graph is not None
        if graph is not None:
            self._set_graph(*graph)

    def call(self, inputs: Any, training: Any = None) -> Any:
        raise NotImplementedError(
            f"Model {type(self).__name__} has no call(): a subclassed keras.Model defines "
            "call(self, inputs) applying its layers"
        )

    # --- tracing ------------------------------------------------------------------------------
    def _call_parameters(self) -> Any:
        try:
            return inspect.signature(self.call).parameters
        except (TypeError, ValueError):
            return {}

    def _call_symbolic(
        self, inputs: Any, training: Any = None, kwargs: Optional[dict[str, Any]] = None
    ) -> Any:
        """call() on symbolic tensors, inside a trace (its layer calls are recorded)."""
        params = self._call_parameters()
        kwargs = dict(kwargs or {})
        unknown = (
            sorted(k for k in kwargs if k not in params)
            if not any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
            else []
        )
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.call() got an unexpected keyword argument '{unknown[0]}'"
            )
        if "training" in params:
            if _modes:  # traced for keywords of its own: the mode Keras would call it in
                mode = _modes[-1].training
                if mode is None:
                    default = params["training"].default
                    mode = None if default is inspect.Parameter.empty else default
                if mode is not None:
                    kwargs["training"] = mode
            else:
                # Training mode: the graph holds every layer (Dropout included), and the engine
                # runs each in fit's mode or in inference's.
                kwargs["training"] = True
        _tracing[0] += 1
        _trace._sinks.append([])  # its add_loss terms, carried by its outputs
        try:
            out = self.call(inputs, **kwargs)
            _trace.refuse_terms_under_training(self, params)
            return _trace.finish_outputs(_trace._sinks[-1], out)
        finally:
            _trace._sinks.pop()
            _tracing[0] -= 1

    @property
    def _traced(self) -> bool:
        return self._input_tensor is not None

    def _trace(self, sample_shape: tuple[int, ...]) -> None:
        if self._traced:
            return
        inputs: Any
        if isinstance(sample_shape, dict):  # several inputs, keyed as the data was
            inputs = {
                k: input_tensor(InputLayer(shape=v, name=k)) for k, v in sample_shape.items()
            }
        elif isinstance(sample_shape, list):
            inputs = [input_tensor(InputLayer(shape=v)) for v in sample_shape]
        else:
            inputs = input_tensor(InputLayer(shape=sample_shape))
        outputs = self._call_symbolic(inputs)
        _check_traced_outputs(self, inputs, outputs)
        self._set_graph(inputs, outputs)
        if self._compile_args is not None:
            args, kwargs = self._compile_args
            self._compile_args = None
            _Model.compile(self, *args, **kwargs)

    def _trace_for(self, x: Any, who: str) -> None:
        if not self._traced:
            self._trace(_sample_shape(x, who))

    def _require_traced(self, who: str) -> None:
        if not self._traced:
            raise ValueError(
                f"{who}: this model has not yet been built. Build the model first by calling "
                "`build()` or by calling the model on a batch of data."
            )

    # --- what needs the graph -----------------------------------------------------------------
    def build(self, input_shape: Any = None) -> None:
        if input_shape is None:
            raise ValueError("build: give the input shape, e.g. model.build((None, 784))")
        shape = tuple(int(d) for d in tuple(input_shape)[1:])
        if self._traced:
            if tuple(self._input_tensor.shape[1:]) != shape:
                raise ValueError(
                    f"build: the model's input shape is {self._input_tensor.shape[1:]} already, "
                    f"not {shape}"
                )
            return
        self._trace(shape)

    @property
    def built(self) -> bool:
        return self._traced

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Keras compiles a subclassed model before it knows its input: the settings wait for
        the trace (the first fit, evaluate, predict, call or build)."""
        if self._traced:
            _Model.compile(self, *args, **kwargs)
            return
        from . import optimizers as optimizers_module

        # Keyword arguments from here on (compile("adam", "mse") waits as optimizer=, loss=).
        given = inspect.signature(_Model.compile).bind(self, *args, **kwargs).arguments
        given.pop("self")
        self.optimizer = optimizers_module.from_identifier(given.get("optimizer", "rmsprop"))
        self._compile_args = ((), {**given, "optimizer": self.optimizer})
        self.loss = given.get("loss")

    def fit(self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        if x is not None:
            self._trace_for(x, "fit")
        compiled = self._user_compiled or getattr(self, "_step_compiled", False)
        if self._compile_args is None and not compiled:
            raise ValueError("You must call `compile()` before using the model (fit).")
        return _Model.fit(self, x, y, *args, **kwargs)

    def evaluate(self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        if x is not None:
            self._trace_for(x, "evaluate")
        return _Model.evaluate(self, x, y, *args, **kwargs)

    def predict(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        self._trace_for(x, "predict")
        return _Model.predict(self, x, *args, **kwargs)

    def __call__(self, inputs: Any, training: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        if is_symbolic(inputs):
            shape = tuple(inputs.shape[1:]) if isinstance(inputs, KerasTensor) else (None,)
            if not self._traced and not _tracing[0] and None not in shape:
                self._trace(shape)  # Keras builds a model at its first call
            return call(self, inputs, {"training": training, "mask": mask, **kwargs})
        if kwargs:  # keywords of call()'s own (is_training=True): a trace per their values
            reject_unsupported("Model.__call__", mask=(mask, None))
            return self._call_variant(inputs, training, kwargs)
        compiled = self._compiled()
        if not self._traced and not compiled and not training:  # Keras's eager call (_eager.py)
            trace = lambda: self._trace_for(inputs, "Model.__call__")  # noqa: E731
            out = _eager.model_call(self, inputs, training, trace)
            if out is not None:
                return out
        self._trace_for(inputs, "Model.__call__")
        return _Model.__call__(self, inputs, training=training, mask=mask)

    def _compiled(self) -> bool:
        return bool(self._user_compiled or self._compile_args or getattr(self, "_step_compiled", 0))

    # --- call() with keyword arguments of its own ----------------------------------------------
    def _call_variant(self, inputs: Any, training: Any, kwargs: dict[str, Any]) -> Any:
        """model(x, is_training=True): Keras passes the keywords to call(), whose Python code may
        branch on them (`if not is_training: x = tf.nn.softmax(x)`). call() is traced once per
        distinct set of their values (and of `training`, and input shape) into a graph model of
        the same layers (their weights shared: _sequential.py), each layer that training changes in
        the mode Keras would run it in; that graph runs in the engine: its training pass where
        those layers train (dropout on, batch statistics; recorded by a GradientTape), else
        inference (predict), or where it has none, the training pass under a recording tape
        (the same values) and predict elsewhere. A call() that cannot be traced runs in Python
        on the values while the model is not compiled (as model(x) does, _eager.py)."""
        from .. import _tape

        shape = _sample_shape(inputs, "Model.__call__")
        if not isinstance(shape, tuple):
            raise NotImplementedError(
                f"{type(self).__name__}: several inputs with keyword arguments of call()'s own "
                f"are not supported (yet); {SEE_SUPPORTED}"
            )
        key = (_keyword_values(self, kwargs), _as_mode(training), shape)
        variants = self.__dict__.setdefault("_variants", {})
        variant = variants.get(key)
        if variant is None:
            made: list[Any] = []

            def trace() -> None:
                if not self._traced:
                    self._trace(shape)  # the model's own graph (fit, predict, weights)
                made.append(self._trace_variant(shape, training, kwargs))

            if self._compiled():
                trace()
            else:
                out = _eager.model_call(self, inputs, training, trace, kwargs)
                if out is not None:
                    return out  # call() run in Python on the values
            variant = variants[key] = made[0]
        if len(variant._modes) > 1:
            raise NotImplementedError(
                f"{type(self).__name__}.call({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
                " runs some layers in training mode and others in inference mode: crossover's "
                f"engine runs a model's layers in one mode; {SEE_SUPPORTED}"
            )
        train = next(iter(variant._modes)) if variant._modes else _tape.recording()
        if train:
            return _Model.__call__(variant, inputs, training=True)
        return _Model.__call__(variant, inputs)

    def _trace_variant(self, shape: tuple[int, ...], training: Any, kwargs: dict[str, Any]) -> Any:
        """call(x, **kwargs) traced on a symbolic input: a graph model of the model's layers
        (hidden: the model's own graph stays fit's), with the engine mode it runs in."""
        inputs = input_tensor(InputLayer(shape=shape))
        homes = [(layer, layer.__dict__.get("_home")) for layer in self._layers]
        _modes.append(_Modes(_as_mode(training), set()))
        try:
            mode = _modes[-1]
            outputs = self._call_symbolic(inputs, training, kwargs)
        finally:
            _modes.pop()
        _check_traced_outputs(self, inputs, outputs)
        variant = Functional(inputs, outputs, name=self.name)
        variant._given_name = self._given_name
        for layer, home in homes:  # the model's own graph stays the layers' home
            if home is not None:
                layer._home = home
        # True, False, None (no layer that training changes), or both: refused when called.
        variant._modes = set(mode.seen)
        return variant

    def summary(self, *args: Any, **kwargs: Any) -> None:
        """Keras 3's table for a subclassed model, built or not (_summary.py)."""
        _Model.summary(self, *args, **kwargs)

    def _tracked_layers(self) -> list[Any]:
        """Keras's model.layers of a subclassed model: the layers (and models) held in its
        attributes, directly or in lists, tuples and dicts, in the order they were set."""
        found: list[Any] = []
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            values = list(value.values()) if isinstance(value, dict) else value
            for v in values if isinstance(values, (list, tuple)) else [values]:
                if isinstance(v, (Layer, _ModelBase)) and not any(v is f for f in found):
                    found.append(v)
        return found

    def _model(self) -> Any:
        self._require_traced(type(self).__name__)
        return Functional._model(self)

    @property
    def layers(self) -> list[Any]:
        """The layers, without the InputLayer the trace added (a subclassed model has none;
        one made with (inputs, outputs) is functional: its InputLayer is listed)."""
        shown = _keras_layers(self._layers)
        if getattr(self, "_functional", False):
            return shown
        return [l for l in shown if not isinstance(l, InputLayer)]


class _ModelType(type):
    """isinstance(m, keras.Model) holds for every crossover model, as for Keras's."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _ModelBase)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return isinstance(sub, type) and issubclass(sub, _ModelBase)


class Model(Subclassed, metaclass=_ModelType):
    """keras.Model: keras.Model(inputs, outputs) makes a functional model; a subclass of it (its
    own __init__ and call()) is traced into one (Subclassed)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is not Model:
            return object.__new__(cls)
        if not args and "inputs" not in kwargs:
            raise NotImplementedError(
                "keras.Model() without inputs and outputs (a subclassed model) is not supported "
                f"(yet): use keras.Model(inputs=..., outputs=...); {SEE_SUPPORTED}"
            )
        return Functional(*args, **kwargs)
