"""Keras's layers that crossover runs: Input, InputLayer, Flatten, Dense, Dropout, GaussianNoise,
GaussianDropout, SpatialDropout2D, Activation,
Conv1D, Conv2D, Conv2DTranspose, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, Reshape,
UpSampling2D (channels_last),
BatchNormalization and LayerNormalization (over the last axis), TimeDistributed (a layer applied
to each time step), SimpleRNN, LSTM, GRU and RNN(cell), and Add and Concatenate for functional
models.

Each is a description with Keras's argument names and defaults; the model turns it into the
library's layer (crossover._core) when it is built."""

import inspect
import json
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np

from .. import _core, _seed, _tensor
from .._args import SEE_SUPPORTED, reject_unknown, reject_unsupported, unsupported_attribute
from . import _names, _symbolic, initializers, mixed_precision, regularizers

if TYPE_CHECKING:
    from ._sequential import Sequential

ActivationArg = Union[str, Callable[..., Any], None]
ShapeArg = Optional[Sequence[Optional[int]]]

# The calls on data in progress (keras/_eager.py), outermost first: (layer, training given or
# inherited).
_calls: list[tuple[Any, Optional[Any]]] = []


# Where a layer's call runs: in the modules above this one, which register here when imported
# (keras imports both): keras/_graph.py's call() on symbolic tensors (a node of the model's
# graph), keras/_eager.py on data (call() in Python, or the engine's layer; add_loss).
_symbolic_call: Optional[Callable[[Any, Any, dict[str, Any]], Any]] = None
_eager: Any = None


def _register_symbolic_call(call: Callable[[Any, Any, dict[str, Any]], Any]) -> None:
    """Set what layer(x) on symbolic tensors runs (keras/_graph.py's call)."""
    global _symbolic_call
    _symbolic_call = call


def _register_eager(module: Any) -> None:
    """Set the module that runs layer(x) and add_loss on data (keras/_eager.py)."""
    global _eager
    _eager = module


def _name_scope() -> str:
    """Keras's name scope of a weight made now: the layers being called on data, outermost
    first ("outer/linear_1/variable" for a weight the inner layer's build makes)."""
    return "/".join(layer.name for layer, _ in _calls)


def _shape(shape: ShapeArg, owner: str) -> Optional[list[int]]:
    if shape is None:
        return None
    if isinstance(shape, int):
        shape = (shape,)
    dims = list(shape)
    if any(d is None for d in dims):
        raise ValueError(f"{owner}: every dimension of the input shape must be known, got {shape}")
    return [int(d) for d in dims]


def _engine_layer(class_name: str, **config: Any) -> "_core.Layer":
    """The engine's layer of a Keras class, made through the engine's registry from a Keras
    config, as a model file's layer is read (src/nn/layers/<kind>.cpp): each argument under its
    Keras name, the engine's defaults for the rest, anything it cannot run refused naming the
    argument."""
    for argument, value in config.items():  # JSON has no NaN or infinity
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ValueError(
                f"{class_name}: argument {argument}: must hold finite numbers, got {value!r}"
            ) from None
    return _core.layer_from_config(class_name, json.dumps(config))


def _built(layer: Any, shapes: list[tuple[int, ...]]) -> tuple[list[int], list[Any]]:
    """The engine's build of one layer on per-sample input shapes (nn/layers/kind.h,
    build_layer): its output shape and its parameters (name, shape, trainable). Each kind's shape
    rule and weights are its unit's, not restated here."""
    return _core.build_layer(layer._core_layer(), [[int(d) for d in s] for s in shapes])


def _is_custom(layer: Any) -> bool:
    """A user's direct subclass of keras.layers.Layer with its own call(), or a Lambda: a call()
    in Python, traced into the model's graph (keras/_trace.py) and run in Python on data."""
    for cls in type(layer).__mro__:
        if cls.__module__.startswith("crossover."):
            user_call = cls is Layer and any("call" in vars(c) for c in _user_classes(layer))
            return user_call or getattr(cls, "_python_call", False)
    return False


def _user_classes(layer: Any) -> list[type]:
    out = []
    for cls in type(layer).__mro__:
        if cls.__module__.startswith("crossover."):
            break
        out.append(cls)
    return out


def _deserialized_activation(activation: ActivationArg) -> ActivationArg:
    """An activation as a config holds it, serialized (Keras's activations.get): a LeakyReLU or
    ELU layer's dict (what model files write for one given as the activation) is that layer, a
    function's ({"class_name": "function", "config": "relu"}) its name."""
    if not isinstance(activation, dict):
        return activation
    name, config = activation.get("class_name"), activation.get("config")
    if name in ("LeakyReLU", "ELU") and isinstance(config, dict):
        return (LeakyReLU if name == "LeakyReLU" else ELU).from_config(dict(config))
    if name == "function" and isinstance(config, str):
        return config
    raise ValueError(f"activation: cannot read the serialized activation {activation!r}")


def _activation_name(activation: ActivationArg) -> str:
    if activation is None:
        return "linear"
    if isinstance(activation, (LeakyReLU, ELU)):  # a layer given as the activation
        return "leaky_relu" if isinstance(activation, LeakyReLU) else "elu"
    if callable(activation):  # keras.activations.relu, tf.nn.relu, ...
        return str(getattr(activation, "__name__", activation))
    return str(activation)


def _activation_config(activation: ActivationArg) -> Any:
    """The activation as the engine's config reader takes it: its name, or a LeakyReLU or ELU
    layer given as the activation serialized as Keras writes one (with its slope or alpha)."""
    if isinstance(activation, LeakyReLU):
        return {"class_name": "LeakyReLU", "config": {"negative_slope": activation.negative_slope}}
    if isinstance(activation, ELU):
        return {"class_name": "ELU", "config": {"alpha": activation.alpha}}
    return _activation_name(activation)


def _initializer_config(layer: "Layer", **given: Any) -> dict[str, Any]:
    """Keras's kernel_initializer=... arguments: each read by keras.initializers.get (a name,
    an object, a serialized dict), kept on the layer as Keras does, and returned serialized for
    the engine's layer (whose config reader checks it: ValueError naming the argument)."""
    config = {}
    for argument, value in given.items():
        init = initializers.get(value)
        if init is None:
            raise ValueError(f"{type(layer).__name__}: {argument} must not be None")
        setattr(layer, argument, init)
        config[argument] = json.loads(initializers._to_json(init))
    return config


class _ModelBase(mixed_precision.HasDTypePolicy):
    """What every model class derives from (keras.Sequential, _sequential.py): it lets this
    module and the ones below _sequential.py tell a model (which can be used as a layer) without
    importing it."""

    _functional_class = False  # a functional model (functional.py's Functional, Subclassed)
    _subclassed = False  # a subclassed keras.Model (functional.py's Subclassed)


class Layer(mixed_precision.HasDTypePolicy):
    """What every layer takes: name, input_shape (or input_dim), dtype (a dtype policy: the
    global one when not given; keras.mixed_precision), trainable."""

    def __init__(
        self,
        name: Optional[str] = None,
        input_shape: ShapeArg = None,
        input_dim: Optional[int] = None,
        dtype: Any = None,
        trainable: bool = True,
        activity_regularizer: Any = None,
        **kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        kwargs.pop("batch_size", None)  # the batch size comes from fit
        batch_input_shape = kwargs.pop("batch_input_shape", None)
        reject_unknown(owner, kwargs)
        if not isinstance(trainable, bool):
            raise ValueError(
                "Expected `trainable` to be a boolean. "
                f"Received: trainable={trainable} (of type {type(trainable)})"
            )
        # Keras's frozen layer (trainable=False): its weights are not trained; fit sees a change
        # at the next compile (the model reads the flags then), as in Keras.
        self._trainable = trainable
        # Keras's: a penalty on the layer's output, divided by the batch's size, in the loss of
        # fit and evaluate (a built-in layer's engine layer holds it; a custom layer's traced
        # call() ends in an ActivityRegularization op).
        self.activity_regularizer = regularizers.get(activity_regularizer)
        # Keras's: the policy is fixed when the layer is made (the global one unless given).
        self._dtype_policy = mixed_precision.get(dtype)
        mixed_precision.engine_precision(self._dtype_policy)  # refuses what crossover lacks
        if batch_input_shape is not None:
            input_shape = tuple(batch_input_shape)[1:]
        if input_dim is not None:
            input_shape = (input_dim,)
        # Keras's automatic name: the class in snake case, numbered (dense, dense_1, ...).
        # The engine's layer keeps the name given only: its own names (dense, dense_1 per model)
        # key safetensors files and the saved thread choices, as before Keras's names here.
        self.name = name if name else _names.auto_name(type(self).__name__)
        self._given_name = name
        self._input_shape = _shape(input_shape, owner)
        # Where this layer's current weights are (_sequential.py keeps them in step): the model
        # whose engine holds them, or arrays kept while no model holds them; and the model it was
        # last added to (to build it on a first get_weights).
        self._weights_in: Any = None
        self._home: Optional["Sequential"] = None

    # The library's layer, made (and so checked) when the Keras layer is: each subclass sets it.
    _layer: "_core.Layer"

    # --- custom layers (keras/_trace.py): build() makes weights, call() is traced ----------
    def build(self, input_shape: Any) -> None:
        """Keras's default: nothing to make."""

    def add_weight(
        self,
        shape: Any = None,
        initializer: Any = None,
        dtype: Any = None,
        trainable: bool = True,
        autocast: bool = True,
        regularizer: Any = None,
        constraint: Any = None,
        aggregation: str = "none",
        overwrite_with_gradient: bool = False,
        name: Optional[str] = None,
    ) -> "Weight":
        """A custom layer's weight (Keras's add_weight): recorded here, made by the engine
        (its initializer drawn there) when the model is built; the op of call() that uses it
        (matmul, x + w, x * w) holds it. A regularizer (L1, L2, L1L2) joins the step's loss
        and the weight's gradient in the engine, as a Dense's kernel_regularizer does."""
        regularizer = regularizers.get(regularizer)
        if regularizer is not None and not isinstance(regularizer, regularizers.Regularizer):
            raise NotImplementedError(
                f"{type(self).__name__}.add_weight: regularizer {regularizer!r} is not supported "
                f"(yet): the engine runs keras.regularizers' L1, L2 and L1L2; {SEE_SUPPORTED}"
            )
        reject_unsupported(
            f"{type(self).__name__}.add_weight",
            constraint=(constraint, None),
            overwrite_with_gradient=(overwrite_with_gradient, False),
        )
        if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
            raise NotImplementedError(
                f"{type(self).__name__}.add_weight: dtype={dtype!r} is not supported (yet): "
                f"crossover's weights are float32; {SEE_SUPPORTED}"
            )
        dims = tuple(int(d) for d in (shape or ()))
        if initializer is None:
            initializer = "glorot_uniform"
        init = initializers.get(initializer)
        weights = self.__dict__.setdefault("_custom_weights", [])
        # Keras's automatic name: variable, variable_1, ... numbered in the process.
        weight = Weight(self, name or _names.uniquify("variable"), dims, init, bool(trainable))
        weight.regularizer = regularizer
        weight._scope = _name_scope()  # Keras's path: the outer layers called on data
        weights.append(weight)
        return weight

    # --- custom layers in Python: nested layers, weights, losses, config (keras/_eager.py) --
    _NOT_SUBLAYERS = frozenset({"_home", "_owner", "_weights_in", "_eager_model"})  # our links

    def __setattr__(self, name: str, value: Any) -> None:
        # Keras tracks a variable set as an attribute (self.w = tf.Variable(...)): a weight of
        # this layer, after those add_weight made before it.
        if isinstance(value, Weight) and value._layer is None:
            value._layer = self
            self.__dict__.setdefault("_custom_weights", []).append(value)
        super().__setattr__(name, value)

    def _keeps_python_weights(self) -> bool:
        """A custom layer: its weights are add_weight's (and its sublayers'), as Keras's."""
        return "_custom_weights" in self.__dict__ or _is_custom(self)

    def _sublayers(self) -> list["Layer"]:
        """The layers held in this layer's attributes (directly, or in a list, tuple or dict),
        in the order they were set: Keras tracks them, and their weights and losses are this
        layer's too."""
        found: list[Layer] = []
        for name, value in vars(self).items():
            if name in self._NOT_SUBLAYERS:
                continue
            if isinstance(value, dict):
                values: Any = list(value.values())
            elif isinstance(value, (list, tuple)):
                values = value
            else:
                values = [value]
            for v in values:
                if isinstance(v, Layer) and not isinstance(v, _OpLayer) and v is not self:
                    if not any(v is f for f in found):
                        found.append(v)
        return found

    def _all_sublayers(self) -> list["Layer"]:
        """Keras's _flatten_layers(include_self=False): every layer inside, depth first."""
        out: list[Layer] = []
        seen: set[int] = set()
        queue = list(self._sublayers())
        while queue:
            layer = queue.pop(0)
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            out.append(layer)
            queue[:0] = list(reversed(layer._sublayers()))  # Keras's deque.extendleft
        return out

    def _own_weights(self) -> list["Weight"]:
        """add_weight's weights in Keras's order: the trainable ones, then the others."""
        own = self.__dict__.get("_custom_weights", [])
        return [w for w in own if w.trainable] + [w for w in own if not w.trainable]

    @property
    def losses(self) -> list[_tensor.Tensor]:
        """Keras's: the losses add_loss() added in the last call on data (of this layer and the
        layers inside it; reset at each call of the outermost layer)."""
        out = list(self.__dict__.get("_eager_losses", []))
        for layer in self._all_sublayers():
            out.extend(layer.__dict__.get("_eager_losses", []))
        return out

    def add_loss(self, loss: Any) -> None:
        """Keras's add_loss in a call() on data: kept in `losses` until the next call."""
        _eager.add_loss(self, loss)

    def _clear_losses(self) -> None:
        self.__dict__["_eager_losses"] = []
        for layer in self._sublayers():
            layer._clear_losses()

    def get_config(self) -> dict[str, Any]:
        """Keras's get_config. A custom layer's: the base config (name, trainable and the dtype
        policy), to which its class adds its own arguments. A built-in layer's: every argument
        as Keras 3.15 writes it, defaults spelled out, which is the engine's config of it (the
        one model.to_json() and model.save() write), with this layer's name, trainable and
        dtype policy."""
        if self._keeps_python_weights():
            return self._base_config()
        engine = self.__dict__.get("_layer")
        # Only where the engine's layer is this class's own: ReLU and Softmax, made as the
        # engine's Activation, write Keras's config of their own below.
        if engine is None or getattr(engine, "type", None) != type(self).__name__:
            raise NotImplementedError(
                f"{type(self).__name__}.get_config is not supported (yet): it has no config of "
                f"its own; {SEE_SUPPORTED}"
            )
        return {**json.loads(engine.keras_config()), **self._base_config()}

    def _base_config(self) -> dict[str, Any]:
        """Keras 3's Layer.get_config: name, trainable and the dtype policy."""
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": {
                "module": "keras",
                "class_name": "DTypePolicy",
                "config": {"name": self._dtype_policy.name},
                "registered_name": None,
            },
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Layer":
        """Keras's: the class called with the config's entries as keyword arguments."""
        return cls(**config)

    def _refuse_python_code(self) -> None:
        """A user's subclass that computes in Python (its own call(), build() or
        convolution_op()) cannot run: crossover runs its layers in C++. Said in one line, rather
        than training the built-in layer silently in its place."""
        if _is_custom(self):  # traced where the input shape is known (keras/_trace.py)
            raise NotImplementedError(
                f"custom layer '{self.name}' ({type(self).__name__}) in a model whose input "
                "shape is not known yet is not supported (yet): crossover traces its call() on "
                "the input's shape; start the model with keras.Input(shape=...) or call "
                f"model.build((None, ...)) first; {SEE_SUPPORTED}"
            )
        for cls in type(self).__mro__:
            if cls.__module__.startswith("crossover."):
                break
            own = [m for m in ("call", "build", "convolution_op") if m in vars(cls)]
            if own:
                mine = type(self).__mro__
                base = next(c.__name__ for c in mine if c.__module__.startswith("crossover."))
                methods = ", ".join(m + "()" for m in own)
                raise NotImplementedError(
                    f"layer '{self.name}' ({type(self).__name__}, a subclass of {base}) has its "
                    f"own {methods}: custom layers computing in Python are not supported (yet): "
                    f"crossover runs its built-in layers in C++; {SEE_SUPPORTED}"
                )

    def _core_layer(self) -> "_core.Layer":
        self._refuse_python_code()
        if self._given_name:
            self._layer.name = self._given_name
        if not isinstance(self, InputLayer):  # an InputLayer's dtype is its input's: float32
            self._layer.dtype_policy = self._dtype_policy.name  # written to model files
        return self._layer

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        """(name, trainable) of each weight array the engine keeps for this layer, in Keras's
        order (get_weights)."""
        return [(w.name, w.trainable) for w in self.__dict__.get("_custom_weights", [])]

    @property
    def trainable(self) -> bool:
        return getattr(self, "_trainable", True)

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)

    # --- weights, as Keras's layer has them ------------------------------------------------
    def get_weights(self) -> list[np.ndarray]:
        """This layer's weights as numpy, in Keras's order ([] until the model is built)."""
        if self._keeps_python_weights():  # add_weight's (Weight), then the sublayers'
            return [np.array(w, dtype=np.float32) for w in self.weights]
        return _layer_weights(self)

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Replaces this layer's weights (same count and shapes as get_weights())."""
        if self._keeps_python_weights():
            expected = len(self.weights)
            if len(weights) != expected:
                raise ValueError(
                    f"You called `set_weights(weights)` on layer '{self.name}' with a weight "
                    f"list of length {len(weights)}, but the layer was expecting {expected} "
                    "weights."
                )
            values = list(weights)
            for w in self._own_weights():
                w.assign(values.pop(0))
            for layer in self._sublayers():
                n = len(layer.weights)
                layer.set_weights(values[:n])
                del values[:n]
            return
        _set_layer_weights(self, list(weights))

    @property
    def weights(self) -> list[Any]:
        if not self._keeps_python_weights():
            # The engine's arrays, named as Keras names its variables (name "kernel", path
            # "dense/kernel", trainable).
            values, kinds = self.get_weights(), self._weight_kinds()
            out = [_tensor.tensor(w) for w in values]
            if len(kinds) == len(out):
                for t, (name, trainable) in zip(out, kinds):
                    t.name, t.path, t.trainable = name, f"{self.name}/{name}", trainable
            return out
        return self._gathered("weights", self._own_weights())

    @property
    def variables(self) -> list[_tensor.Tensor]:
        return self.weights

    def _gathered(self, which: str, own: list["Weight"]) -> list[Any]:
        """Own weights, then each sublayer's `which` (Keras's order), each weight once."""
        out, seen = list(own), {id(w) for w in own}
        for layer in self._sublayers():
            for w in getattr(layer, which):
                if id(w) not in seen:
                    out.append(w)
                    seen.add(id(w))
        return out

    @property
    def trainable_weights(self) -> list[_tensor.Tensor]:
        if not self.trainable:
            return []
        if self._keeps_python_weights():
            own = [w for w in self._own_weights() if w.trainable]
            return self._gathered("trainable_weights", own)
        kinds = self._weight_kinds()
        return [w for w, (_, t) in zip(self.weights, kinds) if t]

    @property
    def trainable_variables(self) -> list[_tensor.Tensor]:
        return self.trainable_weights

    @property
    def non_trainable_variables(self) -> list[_tensor.Tensor]:
        return self.non_trainable_weights

    @property
    def non_trainable_weights(self) -> list[_tensor.Tensor]:
        if not self.trainable:
            return self.weights
        if self._keeps_python_weights():
            own = [w for w in self._own_weights() if not w.trainable]
            return self._gathered("non_trainable_weights", own)
        kinds = self._weight_kinds()
        return [w for w, (_, t) in zip(self.weights, kinds) if not t]

    @property
    def built(self) -> bool:
        if self._keeps_python_weights():
            return bool(getattr(self, "_custom_built", False))
        return bool(self.get_weights()) or not self._weight_kinds()

    @built.setter
    def built(self, value: bool) -> None:
        """`self.built = True` in a custom layer's build() (Keras 2's habit): its build is done."""
        self._custom_built = bool(value)

    def count_params(self) -> int:
        weights = self.get_weights()
        if self._weight_kinds() and not weights:
            raise ValueError(
                f"You tried to call `count_params` on layer '{self.name}', but the layer isn't "
                "built. You can build it manually via: `layer.build(input_shape)`."
            )
        return int(sum(w.size for w in weights))

    def _weight(self, kind: str) -> Optional[_tensor.Tensor]:
        names = [n for n, _ in self._weight_kinds()]
        if kind not in names:
            return None
        weights = self.get_weights()
        if not weights:
            raise AttributeError(
                f"layer '{self.name}' is not built yet: its {kind} exists once its model knows "
                "its input shape (keras.Input(shape=...)) and was used or compiled"
            )
        return _tensor.tensor(weights[names.index(kind)])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"

    # --- the functional API (functional.py) ------------------------------------------------
    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """layer(x) on symbolic tensors (keras.Input(...), another layer's output): the output
        tensor of a functional model's layer."""
        if _is_custom(self) and not _symbolic.is_symbolic(inputs):
            return _eager.call(self, inputs, args, kwargs)  # on data: call() run in Python
        if args:
            raise TypeError(f"{type(self).__name__}.__call__ takes the inputs only, got {args!r}")
        if _symbolic.is_symbolic(inputs):
            return _symbolic_call(self, inputs, kwargs)
        if isinstance(self, InputLayer):
            raise TypeError("an InputLayer is not called: keras.Input(shape=...) makes the input")
        return _eager.builtin_call(self, inputs, kwargs)  # on data: the engine computes it

    def _first_call(self, what: str) -> Any:
        """The output tensor of the layer's first call on symbolic tensors: in a functional
        model, or in the graph of the Sequential it is in once that knows its input shape (made
        now if need be, as Keras 3 has made it); else Keras's AttributeError."""
        out = getattr(self, "_output_tensor", None)
        home = self.__dict__.get("_home")
        if out is None and isinstance(home, _ModelBase) and home is not self:
            home._symbolic_graph()
            out = getattr(self, "_output_tensor", None)
        if out is None:
            raise AttributeError(
                f"The layer {self.name} has never been called and thus has no defined {what}."
            )
        return out

    @property
    def output(self) -> Any:
        """The symbolic tensor of its first call (Keras's node 0): in a functional model, or in
        the graph of a Sequential that knows its input shape."""
        return self._first_call("output")

    @property
    def input(self) -> Any:
        """The symbolic tensor its first call read (a list for a merging layer's several); an
        InputLayer's is its own output, as in Keras."""
        out = self._first_call("input")
        if not out._inputs:
            return out
        return list(out._inputs) if len(out._inputs) > 1 else out._inputs[0]


class Weight:
    """A custom layer's weight (add_weight's result, Keras's Variable): its shape, initializer,
    name and trainable, and its values. Those are held in one place at a time: here (arrays
    drawn from the initializer when the layer is first used on data, or assigned) until a
    traced call() gives the weight to an op of a model's graph (keras/_trace.py); from then on
    that op holds them (the engine's, once its model is built: a model starts from the values
    the weight had, and what the engine trains is what the weight shows). Arithmetic with a
    symbolic tensor makes a node (x * w, x + w); elsewhere it computes on the values (numpy)."""

    def __init__(
        self, layer: Layer, name: str, shape: tuple[int, ...], initializer: Any, trainable: bool
    ) -> None:
        self._layer = layer
        self.name = name
        self.shape = shape
        self.initializer = initializer
        self.trainable = trainable
        self.dtype = "float32"
        self.regularizer = None
        self.constraint = None
        self._op: Any = None  # the op layer holding it (keras/_trace.py)
        self._array: Optional[np.ndarray] = None  # its values while no op holds them
        self._scope = ""

    @property
    def path(self) -> str:
        scope = f"{self._scope}/" if self._scope else ""
        return f"{scope}{self._layer.name}/{self.name}" if self._layer else scope + self.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def _value(self) -> Optional[np.ndarray]:
        """The current values (a copy), or None before any were drawn or assigned."""
        if self._op is not None:
            values = self._op.get_weights()
            if values:
                return values[0]
        return None if self._array is None else self._array.copy()

    def _drawn(self) -> np.ndarray:
        """The current values, drawn from the initializer first when there are none yet (as
        Keras's variable has values from add_weight on)."""
        value = self._value()
        if value is None:
            seed = getattr(self.initializer, "seed", None)
            seed = _seed.draw_for_weight() if seed is None else int(seed)
            spec = initializers._to_json(self.initializer)
            drawn = _core.initial_values(spec, list(self.shape), seed)
            value = np.asarray(drawn, dtype=np.float32).reshape(self.shape)
            self._set(value)
        return value

    def _set(self, array: np.ndarray) -> None:
        op = self._op
        if op is None:
            self._array = array.copy()
        elif op._weights_in is None and not op.get_weights():
            op._weights_in = [array.copy()]  # its model starts from these when built
        else:
            op.set_weights([array])

    def _attach(self, op: Any) -> None:
        """The op layer of a traced call() that uses this weight: it holds the values now."""
        if op is self._op:
            return
        values = self._value()
        self._op = op
        self._array = None
        if values is not None and op._weights_in is None:
            op._weights_in = [values]

    def numpy(self) -> np.ndarray:
        return self._drawn()

    @property
    def value(self) -> _tensor.Tensor:
        return _tensor.tensor(self.numpy())

    def _eager_read(self) -> np.ndarray:
        """The values as TensorFlow's ops read them (_tensor.py), not a copy: an update
        replaces the array (assign, apply_gradients), so a value read before keeps its own."""
        array = self._array
        return array if self._op is None and array is not None else self._drawn()

    def _checked(self, value: Any) -> np.ndarray:
        dtype = np.dtype(self.dtype)
        if _tensor._is_var(value):
            value = value._eager_read()
        array = np.asarray(_tensor._plain(value), dtype=dtype)
        if array.shape != self.shape:
            if array.size == int(np.prod(self.shape)) and array.ndim <= len(self.shape):
                array = np.broadcast_to(array, self.shape)
            else:
                raise ValueError(
                    f"The shape of the target variable and the shape of the target value in "
                    f"`variable.assign(value)` must match. variable.shape={self.shape}, "
                    f"Received: value.shape={array.shape}. Target variable: {self!r}"
                )
        return np.array(array, dtype=dtype)

    def assign(self, value: Any) -> "Weight":
        """Keras's assign: new values of the same shape (float32)."""
        self._set(self._checked(value))
        return self

    def assign_add(self, delta: Any) -> "Weight":
        return self.assign(self._drawn() + self._checked(delta))

    def assign_sub(self, delta: Any) -> "Weight":
        return self.assign(self._drawn() - self._checked(delta))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        value = self.numpy()
        return f"<Variable path={self.path}, shape={self.shape}, dtype=float32, value={value}>"

    def _op2(self, op: str, other: Any, first: bool) -> Any:
        if (trace := _tensor._traced(other)) is not None:  # keras/_trace.py: a graph node
            return trace.binary(op, self, other) if first else trace.binary(op, other, self)
        f = getattr(_tensor, op)  # TensorFlow's op on the values, recorded by tapes
        return f(self, other) if first else f(other, self)

    def __add__(self, o: Any) -> Any:
        return self._op2("add", o, True)

    def __radd__(self, o: Any) -> Any:
        return self._op2("add", o, False)

    def __sub__(self, o: Any) -> Any:
        return self._op2("subtract", o, True)

    def __rsub__(self, o: Any) -> Any:
        return self._op2("subtract", o, False)

    def __mul__(self, o: Any) -> Any:
        return self._op2("multiply", o, True)

    def __rmul__(self, o: Any) -> Any:
        return self._op2("multiply", o, False)

    def __truediv__(self, o: Any) -> Any:
        return self._op2("divide", o, True)

    def __rtruediv__(self, o: Any) -> Any:
        return self._op2("divide", o, False)

    def __pow__(self, o: Any) -> Any:
        if (trace := _tensor._traced(o)) is not None:
            raise trace.not_supported("a weight to the power of a symbolic tensor")
        return _tensor.pow(self, o)

    def __rpow__(self, o: Any) -> Any:
        return _tensor.pow(o, self)

    def __neg__(self) -> Any:
        return _tensor.negative(self)

    def __getitem__(self, index: Any) -> Any:
        return _tensor._getitem(self, index)

    def __matmul__(self, o: Any) -> Any:
        if (trace := _tensor._traced(o)) is not None:
            raise trace.not_supported("matmul of a weight by a symbolic tensor (w @ x)")
        return _tensor.matmul(self, o)

    def __rmatmul__(self, o: Any) -> Any:
        if (trace := _tensor._traced(o)) is not None:
            return trace.matmul(o, self)
        return _tensor.matmul(o, self)


class Variable(Weight):
    """keras.Variable, keras.backend.Variable and tf.Variable: a variable made from its initial
    values (or an initializer and a shape), of their dtype as TensorFlow's (Python floats
    float32, ints int32, numpy arrays their own). Read by TensorFlow's ops (_tensor.py) and
    watched by the tapes that read it when trainable. Set as an attribute of a custom layer, it
    is one of that layer's weights, as Keras tracks it (layers.py's Layer.__setattr__); a
    model's graph holds it as float32."""

    def __init__(
        self,
        initializer: Any = None,
        shape: Any = None,
        dtype: Any = None,
        trainable: bool = True,
        name: Optional[str] = None,
        initial_value: Any = None,
        **kwargs: Any,
    ) -> None:
        for ignored in ("autocast", "aggregation", "synchronization", "validate_shape"):
            kwargs.pop(ignored, None)
        reject_unknown("Variable", kwargs, like="signature")
        value = initial_value if initializer is None else initializer
        if value is None:
            raise ValueError("Variable: give its initial value (or an initializer and a shape)")
        init: Any = None
        if isinstance(value, (str, initializers.Initializer)):
            init = initializers.get(value)
            value = init(tuple(int(d) for d in shape or ()))
        if callable(value) and not isinstance(value, (np.ndarray, Weight)):
            value = value()  # TensorFlow's initial_value may be a function of no arguments
        if _tensor._is_var(value):
            value = value._eager_read()
        array = np.asarray(_tensor.convert_to_tensor(value)).view(np.ndarray)
        if dtype is not None:
            array = array.astype(_tensor.as_dtype(dtype))
        if array.dtype.kind not in "fiub":
            raise NotImplementedError(
                f"Variable of dtype {array.dtype} is not supported (yet); {SEE_SUPPORTED}"
            )
        shape = _tensor.TensorShape(array.shape)
        init = init or initializers.Zeros()
        trainable = True if trainable is None else bool(trainable)
        super().__init__(None, name or _names.uniquify("variable"), shape, init, trainable)
        self.dtype = array.dtype  # type: ignore[assignment]  (== "float32" as Keras's name)
        self._array = np.array(array)

    def _attach(self, op: Any) -> None:
        """A model's graph holds its weights as float32 (a float variable is converted)."""
        if np.dtype(self.dtype).kind != "f":
            raise NotImplementedError(
                f"a Variable of dtype {np.dtype(self.dtype).name} in a model's graph is not "
                f"supported (yet): the engine's weights are float32; {SEE_SUPPORTED}"
            )
        if self._array is not None:
            self._array = self._array.astype(np.float32)
        self.dtype = np.dtype("float32")
        super()._attach(op)

    def read_value(self) -> _tensor.Tensor:
        return _tensor.identity(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = np.array(self._eager_read())
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        value = self._eager_read()
        return (
            f"<tf.Variable '{self.name}:0' shape={tuple(self.shape)} "
            f"dtype={np.dtype(self.dtype).name}, numpy={value!r}>"
        )

    def __len__(self) -> int:
        return int(self.shape[0])


class _OpLayer(Layer):
    """One op of a custom layer's traced call() (keras/_trace.py): an engine layer of the model's
    graph, not a Keras layer (model.layers shows the custom layer)."""

    def __init__(
        self,
        core: "_core.Layer",
        name: str,
        owner: Optional[Layer],
        weight: Optional[Weight],
        signature: tuple[Any, ...],
    ) -> None:
        super().__init__(name=name)
        self._layer = core
        self._owner = owner
        self._weight_of = weight
        self._signature = signature

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        w = self._weight_of
        return [] if w is None else [(w.name, w.trainable)]

    @property
    def trainable(self) -> bool:
        owner = self._owner
        return owner.trainable if owner is not None else getattr(self, "_trainable", True)

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)


class InputLayer(Layer):
    """Keras's InputLayer: the per-sample shape (shape=, or tf.keras 2's input_shape=)."""

    def __init__(
        self,
        shape: ShapeArg = None,
        batch_size: Optional[int] = None,
        dtype: Any = None,
        sparse: Optional[bool] = None,
        ragged: Optional[bool] = None,
        batch_shape: ShapeArg = None,
        input_tensor: Any = None,
        optional: bool = False,
        name: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        # Its dtype is the input's (Keras: floatx when not given), not a policy: float32 only.
        if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
            raise ValueError(
                f"InputLayer: dtype {dtype!r} is not supported: crossover takes float32 inputs"
            )
        if batch_shape is not None:
            batch_size = tuple(batch_shape)[0] if batch_size is None else batch_size
            shape = tuple(batch_shape)[1:]
        if shape is None:
            shape = kwargs.pop("input_shape", None)
        super().__init__(name=name, input_shape=shape, **kwargs)
        if self._input_shape is None:
            raise ValueError("InputLayer: give the per-sample shape, e.g. shape=(28, 28)")
        self.batch_size = batch_size
        # sparse, ragged, optional and a tensor are the engine's reader's to refuse, naming them.
        self._layer = _engine_layer(
            "InputLayer",
            shape=list(self._input_shape),
            sparse=bool(sparse),
            ragged=bool(ragged),
            optional=bool(optional),
            input_tensor=None if input_tensor is None else type(input_tensor).__name__,
        )

    def get_config(self) -> dict[str, Any]:
        """Keras 3.15's InputLayer config: the batch shape, the input's dtype as a name."""
        return {
            "batch_shape": (self.batch_size, *self._input_shape),
            "dtype": "float32",
            "sparse": False,
            "ragged": False,
            "name": self.name,
            "optional": False,
        }


def Input(
    shape: ShapeArg = None,
    batch_size: Optional[int] = None,
    dtype: Any = None,
    sparse: Optional[bool] = None,
    ragged: Optional[bool] = None,
    batch_shape: ShapeArg = None,
    name: Optional[str] = None,
    tensor: Any = None,
    optional: bool = False,
) -> Any:
    """keras.Input: the symbolic input of a functional model (keras.Model(inputs, outputs)); in a
    Sequential list, the model's input shape."""
    return _symbolic.input_tensor(
        InputLayer(
            shape=shape,
            batch_size=batch_size,
            dtype=dtype,
            sparse=sparse,
            ragged=ragged,
            batch_shape=batch_shape,
            name=name,
            input_tensor=tensor,
            optional=optional,
        )
    )


# --- the built-in layers: each class's signature, defaults and refusals are its engine kind's --
_KINDS = {k["class_name"]: k for k in _core.layer_kinds() if k["arguments"] is not None}


def _config_value(owner: str, argument: str, value: Any) -> Any:
    """An argument as a Keras config holds it (JSON): tuples as lists, numpy's numbers as
    Python's, an object with a config (a regularizer, a constraint) serialized as Keras does, a
    function by its name. The engine's reader then takes it or refuses it, naming the argument."""
    if isinstance(value, (list, tuple)):
        return [_config_value(owner, argument, v) for v in value]
    if isinstance(value, dict):
        return {str(k): _config_value(owner, argument, v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return _config_value(owner, argument, value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Layer):  # a wrapper's layer
        return _serialized(value)
    if hasattr(value, "get_config"):
        return {"class_name": type(value).__name__, "config": value.get_config()}
    if callable(value):
        return str(getattr(value, "__name__", value))
    raise TypeError(f"{owner}: argument {argument}: cannot take {value!r} ({type(value).__name__})")


# The weights whose regularizers the engine runs (L1, L2, L1L2), in Keras's order of the weights.
_REGULARIZED_WEIGHTS = ("kernel", "bias", "gamma", "beta")
_REGULARIZED = tuple(f"{w}_regularizer" for w in _REGULARIZED_WEIGHTS)


def _attribute(argument: str, value: Any) -> Any:
    """A config's value as Keras keeps the argument on the layer: sizes and shapes as tuples
    (kernel_size, strides, padding, target_shape), an axis list as a list."""
    if isinstance(value, list) and argument != "axis":
        return tuple(_attribute(argument, v) for v in value)
    return value


class _Builtin(Layer):
    """A Keras class the engine has a kind of (src/nn/layers/<kind>.cpp). Its arguments, their
    order and Keras's defaults are the kind's (LayerKind::keras_arguments, through
    _core.layer_kinds()); a class states `kind=` and nothing of them. The values given go to the
    engine's reader, which refuses what crossover cannot run, naming the argument; the layer then
    keeps each argument as Keras does, as the engine read it (a pool's strides resolved, sizes
    as tuples), the activation by its name and the initializers as objects."""

    _kind: str
    _arguments: list[tuple[str, Any, bool, bool]]  # (name, default, required, keyword only)
    _declares_input = False

    def __init_subclass__(cls, kind: Optional[str] = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is None:
            return  # a user's subclass, or a base shared by classes
        spec = _KINDS[kind]
        cls._kind = kind
        cls._arguments = [(n, json.loads(d), r, k) for n, d, r, k in spec["arguments"]]
        cls._declares_input = spec["declares_input"]  # Flatten: it may declare the model's input
        if "__init__" not in vars(cls):
            cls.__init__ = _builtin_init(cls)  # type: ignore[method-assign]

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The class's own arguments from a call (as Python binds a signature), each given one or
        its default; what is left in kwargs is every layer's (name, input_shape, ...)."""
        owner = type(self).__name__
        positional = [a for a in self._arguments if not a[3]]
        if len(args) > len(positional):
            raise TypeError(
                f"{owner}() takes at most {len(positional)} positional arguments "
                f"({', '.join(a[0] for a in positional)}), got {len(args)}"
            )
        values: dict[str, Any] = {}
        for (name, _, _, _), value in zip(positional, args):
            if name in kwargs:
                raise TypeError(f"{owner}() got multiple values for argument '{name}'")
            values[name] = value
        missing = []
        for name, default, required, _ in self._arguments:
            if name in values:
                continue
            if name in kwargs:
                values[name] = kwargs.pop(name)
            elif required:
                missing.append(name)
            else:
                values[name] = default
        if missing:
            raise TypeError(
                f"{owner}() missing {len(missing)} required argument"
                f"{'s' if len(missing) > 1 else ''}: {', '.join(repr(m) for m in missing)}"
            )
        return values

    def _set_up(self, values: dict[str, Any]) -> None:
        """The engine's layer from the arguments, and the arguments kept as Keras keeps them."""
        owner = type(self).__name__
        config: dict[str, Any] = {}
        initializers_given = {}
        for name, value in values.items():
            if name == "activation":
                value = _deserialized_activation(value)  # a model file's dict
                self.activation = _activation_name(value)
                config[name] = _activation_config(value)
            elif name.endswith("_initializer"):
                initializers_given[name] = value
            elif name in _REGULARIZED or name == "activity_regularizer":
                # Kept as Keras keeps it (an L2 object for 'l2'); the engine reads its config.
                value = regularizers.get(value)
                setattr(self, name, value)
                config[name] = _config_value(owner, name, value)
            else:
                config[name] = _config_value(owner, name, value)
        config.update(_initializer_config(self, **initializers_given))
        if "activity_regularizer" not in values and self.activity_regularizer is not None:
            # Every layer's (Keras's base Layer), where the class does not list it.
            config["activity_regularizer"] = _config_value(
                owner, "activity_regularizer", self.activity_regularizer
            )
        if self._declares_input and self._input_shape:
            config["input_shape"] = list(self._input_shape)
        self._layer = _engine_layer(self._kind, **config)
        written = json.loads(self._layer.keras_config())
        for name, value in values.items():
            if (
                name == "activation"
                or name.endswith("_initializer")
                or name in _REGULARIZED
                or name == "activity_regularizer"
            ):
                continue
            if name == "axis" or written.get(name) is None:
                # Keras keeps an axis as given (-1, or [-1]); a seed the engine does not use
                # (its noise comes from the model's) is kept as given too.
                setattr(self, name, value)
            else:
                setattr(self, name, _attribute(name, written[name]))


def _builtin_init(cls: type) -> Callable[..., None]:
    """The __init__ of a _Builtin class, with its Keras signature (inspect.signature shows it)."""

    def __init__(self: _Builtin, *args: Any, **kwargs: Any) -> None:
        values = self._bind(args, kwargs)
        Layer.__init__(self, **kwargs)
        self._set_up(values)

    kinds = inspect.Parameter
    parameters = [inspect.Parameter("self", kinds.POSITIONAL_OR_KEYWORD)]
    for name, default, required, keyword in cls._arguments:
        kind = kinds.KEYWORD_ONLY if keyword else kinds.POSITIONAL_OR_KEYWORD
        if required:
            parameters.append(inspect.Parameter(name, kind))
        else:
            parameters.append(inspect.Parameter(name, kind, default=_attribute(name, default)))
    # The kind lists its keyword-only arguments last (LayerKinds.KerasArgumentsAreTheReaders-
    # Defaults checks it), as a signature has them.
    parameters.append(inspect.Parameter("kwargs", kinds.VAR_KEYWORD))
    __init__.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__name__}.__init__"
    return __init__


class _KernelAndBias(_Builtin):
    """Dense and the convolutions: a kernel and, with use_bias, a bias."""

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        return [("kernel", True)] + ([("bias", True)] if self.use_bias else [])

    @property
    def kernel(self) -> Optional[_tensor.Tensor]:
        return self._weight("kernel")

    @property
    def bias(self) -> Optional[_tensor.Tensor]:
        return self._weight("bias")


class Flatten(_Builtin, kind="Flatten"):
    pass


class Dense(_KernelAndBias, kind="Dense"):
    def get_config(self) -> dict[str, Any]:
        # Keras 3.15's Dense writes its quantization (none here) too.
        return {**super().get_config(), "quantization_config": None}


class Dropout(_Builtin, kind="Dropout"):
    """Keras's Dropout. Its masks come from the model's seed (compile), not a seed of its own:
    `seed` is taken and has no effect, as for the noise layers."""


class GaussianNoise(_Builtin, kind="GaussianNoise"):
    """Keras's GaussianNoise: x + N(0, stddev) in training, the identity in evaluate and predict.
    The noise comes from the model's seed (compile), as Dropout's masks."""


class GaussianDropout(_Builtin, kind="GaussianDropout"):
    """Keras's GaussianDropout: x * N(1, sqrt(rate / (1 - rate))) in training, the identity in
    evaluate and predict."""


class SpatialDropout2D(_Builtin, kind="SpatialDropout2D"):
    """Keras's SpatialDropout2D: whole channels of each (height, width, channels) sample dropped
    in training (the rest scaled by 1 / (1 - rate)), the identity in evaluate and predict."""

    def get_config(self) -> dict[str, Any]:
        # Keras 3.15's own: no "trainable", and the variables' dtype rather than the policy.
        return {**json.loads(self._layer.keras_config()), "name": self.name}


class Activation(_Builtin, kind="Activation"):
    pass


class _Convolution2D(_KernelAndBias):
    """Conv2D, Conv1D and Conv2DTranspose."""


class Conv2D(_Convolution2D, kind="Conv2D"):
    pass


class Conv1D(_Convolution2D, kind="Conv1D"):
    """Keras's Conv1D (channels_last) over (steps, channels) samples: kernel (kernel_size,
    in_channels, filters); padding 'valid' or 'same' ('causal' is not supported)."""


class Conv2DTranspose(_Convolution2D, kind="Conv2DTranspose"):
    """Keras's Conv2DTranspose (channels_last): the transposed convolution, kernel (kernel_h,
    kernel_w, filters, in_channels); output_padding None only (Keras's output size: 'valid' (in -
    1) * stride + max(span, stride), 'same' in * stride, span the kernel's dilated extent,
    (kernel - 1) * dilation_rate + 1)."""


Convolution1D = Conv1D
Convolution2D = Conv2D
Convolution2DTranspose = Conv2DTranspose


class _Pooling2D(_Builtin):
    """MaxPooling2D, AveragePooling2D and the 1-D ones."""


class MaxPooling2D(_Pooling2D, kind="MaxPooling2D"):
    """Keras's MaxPooling2D: each window's maximum."""


class AveragePooling2D(_Pooling2D, kind="AveragePooling2D"):
    """Keras's AveragePooling2D: each window's mean."""


class _GlobalPooling2D(_Builtin):
    """(height, width, channels) -> (channels), or (steps, channels) -> (channels): each
    channel's mean or maximum."""


class GlobalAveragePooling2D(_GlobalPooling2D, kind="GlobalAveragePooling2D"):
    pass


class GlobalMaxPooling2D(_GlobalPooling2D, kind="GlobalMaxPooling2D"):
    pass


class _Pooling1D(_Pooling2D):
    """MaxPooling1D and AveragePooling1D over (steps, channels) samples."""


class MaxPooling1D(_Pooling1D, kind="MaxPooling1D"):
    """Keras's MaxPooling1D: each window of steps' maximum."""


class AveragePooling1D(_Pooling1D, kind="AveragePooling1D"):
    """Keras's AveragePooling1D: each window of steps' mean."""


class GlobalAveragePooling1D(_GlobalPooling2D, kind="GlobalAveragePooling1D"):
    """(steps, channels) -> (channels): each channel's mean over the steps."""


class GlobalMaxPooling1D(_GlobalPooling2D, kind="GlobalMaxPooling1D"):
    """(steps, channels) -> (channels): each channel's maximum over the steps."""


MaxPool1D = MaxPooling1D
AvgPool1D = AveragePooling1D
GlobalAvgPool1D = GlobalAveragePooling1D
GlobalMaxPool1D = GlobalMaxPooling1D


class Reshape(_Builtin, kind="Reshape"):
    pass


class UpSampling2D(_Builtin, kind="UpSampling2D"):
    """Keras's UpSampling2D with interpolation 'nearest': each value of a (height, width,
    channels) sample repeated over a size[0] x size[1] block."""


class ZeroPadding2D(_Builtin, kind="ZeroPadding2D"):
    """Keras's ZeroPadding2D: zeros added around each (height, width, channels) sample, padding
    ((top, bottom), (left, right)) rows and columns."""


class Cropping2D(_Builtin, kind="Cropping2D"):
    """Keras's Cropping2D: cropping ((top, bottom), (left, right)) rows and columns removed from
    each (height, width, channels) sample."""


class Permute(_Builtin, kind="Permute"):
    """Keras's Permute: each sample's axes reordered, dims a permutation of 1..rank (the batch
    axis not counted): output axis i is input axis dims[i]."""

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "dims": self.dims}


class RepeatVector(_Builtin, kind="RepeatVector"):
    """Keras's RepeatVector: each (features) sample repeated n times, giving (n, features)."""

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "n": self.n}


class TimeDistributed(Layer):
    """Keras's TimeDistributed: `layer` applied to each time step of (steps, ...) samples, with
    the same weights. The engine's kind holds the layer (its weights are kept under the wrapper's
    attribute "layer" in Keras's files); `layer` takes one input, and a BatchNormalization is
    refused (Keras computes its statistics per time step)."""

    def __init__(self, layer: Any, **kwargs: Any) -> None:
        if isinstance(layer, dict):  # a model file's config: the layer serialized
            layer = _layer_from_serialized(layer, "TimeDistributed")
        if not isinstance(layer, Layer):
            raise ValueError(
                "Please initialize `TimeDistributed` layer with a `keras.layers.Layer` instance. "
                f"Received: {layer}"
            )
        super().__init__(**kwargs)
        self.layer = layer
        self._layer = _engine_layer("TimeDistributed", layer=_serialized(layer))

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        return self.layer._weight_kinds()

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "layer": _serialized(self.layer)}


class _RecurrentWeights(_Builtin):
    """A recurrent layer's or cell's weights, the cell's in Keras's order: kernel (features,
    gates * units), recurrent_kernel (units, gates * units) and, with use_bias, bias."""

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        kinds = [("kernel", True), ("recurrent_kernel", True)]
        return kinds + ([("bias", True)] if self.use_bias else [])

    @property
    def kernel(self) -> Optional[_tensor.Tensor]:
        return self._weight("kernel")

    @property
    def recurrent_kernel(self) -> Optional[_tensor.Tensor]:
        return self._weight("recurrent_kernel")

    @property
    def bias(self) -> Optional[_tensor.Tensor]:
        return self._weight("bias")


class SimpleRNN(_RecurrentWeights, kind="SimpleRNN"):
    """Keras's SimpleRNN over (steps, features) samples: h = activation(x . kernel + h .
    recurrent_kernel + bias) from h = 0, activation tanh, relu or sigmoid; the last step's state,
    or every step's with return_sequences. The whole sequence is one oneDNN RNN primitive."""


class LSTM(_RecurrentWeights, kind="LSTM"):
    """Keras's LSTM (activation tanh, recurrent_activation sigmoid, Keras 3's defaults:
    unit_forget_bias, the orthogonal recurrent kernel) over (steps, features) samples, on
    oneDNN's LSTM primitive. dropout, recurrent_dropout, return_state and stateful are refused
    (not yet)."""


class GRU(_RecurrentWeights, kind="GRU"):
    """Keras's GRU (reset_after=True, Keras 3's default and cuDNN's, on oneDNN's
    linear-before-reset GRU; reset_after=False on its GRU) over (steps, features) samples."""


class SimpleRNNCell(_RecurrentWeights, kind="SimpleRNNCell"):
    """SimpleRNN's cell, for keras.layers.RNN(cell)."""


class LSTMCell(_RecurrentWeights, kind="LSTMCell"):
    """LSTM's cell, for keras.layers.RNN(cell)."""


class GRUCell(_RecurrentWeights, kind="GRUCell"):
    """GRU's cell, for keras.layers.RNN(cell)."""


class RNN(Layer):
    """Keras's RNN of one of Keras's cells (SimpleRNNCell, LSTMCell, GRUCell): the layer of that
    cell (RNN(LSTMCell(n)) is LSTM(n)). A list of cells (a stacked cell) or a custom cell is not
    supported (yet)."""

    def __init__(
        self,
        cell: Any,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        zero_output_for_mask: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(cell, dict):  # a model file's config: the cell serialized
            cell = _layer_from_serialized(cell, "RNN")
        if not isinstance(cell, (SimpleRNNCell, LSTMCell, GRUCell)):
            raise ValueError(
                "RNN: argument cell: crossover runs Keras's SimpleRNNCell, LSTMCell and GRUCell, "
                f"one at a time; got {cell!r}"
            )
        super().__init__(**kwargs)
        self.cell = cell
        self.return_sequences = return_sequences
        self.go_backwards = go_backwards
        self._rnn_arguments = {
            "return_sequences": return_sequences,
            "return_state": return_state,
            "go_backwards": go_backwards,
            "stateful": stateful,
            "unroll": unroll,
            "zero_output_for_mask": zero_output_for_mask,
        }
        self._layer = _engine_layer("RNN", cell=_serialized(cell), **self._rnn_arguments)

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        return self.cell._weight_kinds()

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), **self._rnn_arguments, "cell": _serialized(self.cell)}


def _serialized(layer: Layer) -> dict[str, Any]:
    """A layer as Keras serializes one inside another's config."""
    return {
        "module": "keras.layers",
        "class_name": type(layer).__name__,
        "config": layer.get_config(),
        "registered_name": None,
    }


def _layer_from_serialized(value: dict[str, Any], owner: str) -> Layer:
    """The layer a serialized one ({"class_name", "config"}) names, made by its class's
    from_config; one of crossover's classes only."""
    name = value.get("class_name")
    cls = globals().get(name) if isinstance(name, str) and name in __all__ else None
    if not (isinstance(cls, type) and issubclass(cls, Layer)):
        raise ValueError(
            f"{owner}: argument layer: cannot make the layer {value!r}: {SEE_SUPPORTED}"
        )
    return cls.from_config(dict(value.get("config") or {}))


class ZeroPadding1D(_Builtin, kind="ZeroPadding1D"):
    """Keras's ZeroPadding1D: `padding` (left, right) zero steps added to each (steps, features)
    sample."""


class Cropping1D(_Builtin, kind="Cropping1D"):
    """Keras's Cropping1D: `cropping` (left, right) steps removed from each (steps, features)
    sample."""


class BatchNormalization(_Builtin, kind="BatchNormalization"):
    """Keras's BatchNormalization over the last axis: the batch's statistics in fit (updating
    the moving ones), the moving statistics in evaluate and predict."""

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        kinds = [("gamma", True)] if self.scale else []
        kinds += [("beta", True)] if self.center else []
        return kinds + [("moving_mean", False), ("moving_variance", False)]

    @property
    def gamma(self) -> Optional[_tensor.Tensor]:
        return self._weight("gamma")

    @property
    def beta(self) -> Optional[_tensor.Tensor]:
        return self._weight("beta")

    @property
    def moving_mean(self) -> Optional[_tensor.Tensor]:
        return self._weight("moving_mean")

    @property
    def moving_variance(self) -> Optional[_tensor.Tensor]:
        return self._weight("moving_variance")


class LayerNormalization(_Builtin, kind="LayerNormalization"):
    """Keras's LayerNormalization over the last axis: each sample's last-axis vector normalized
    by its own mean and variance, then scaled by gamma and shifted by beta."""

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "axis": self.axis}

    def _weight_kinds(self) -> list[tuple[str, bool]]:
        kinds = [("gamma", True)] if self.scale else []
        return kinds + ([("beta", True)] if self.center else [])

    @property
    def gamma(self) -> Optional[_tensor.Tensor]:
        return self._weight("gamma")

    @property
    def beta(self) -> Optional[_tensor.Tensor]:
        return self._weight("beta")


class Softmax(Layer):
    """Keras's Softmax layer over the last axis: the engine's softmax activation (a model file
    records it as an Activation('softmax') layer, which Keras reads as the same function)."""

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        reject_unsupported("Softmax", axis=(axis if axis != [-1] else -1, -1))
        self.axis = -1
        self._layer = _engine_layer("Activation", activation="softmax")

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "axis": self.axis}


class ReLU(Layer):
    """Keras's ReLU layer with its defaults: the engine's relu activation (recorded as an
    Activation('relu') layer in model files). max_value, negative_slope and threshold other than
    the defaults are refused (LeakyReLU is not in the engine)."""

    def __init__(
        self,
        max_value: Optional[float] = None,
        negative_slope: float = 0.0,
        threshold: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        reject_unsupported(
            "ReLU",
            max_value=(max_value, None),
            negative_slope=(float(negative_slope), 0.0),
            threshold=(float(threshold), 0.0),
        )
        self._layer = _engine_layer("Activation", activation="relu")

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "max_value": None, "negative_slope": 0.0, "threshold": 0.0}


class LeakyReLU(_Builtin, kind="LeakyReLU"):
    """Keras's LeakyReLU: x where x >= 0, else negative_slope * x (Keras 3's default 0.3; the
    activation 'leaky_relu' has 0.2). tf.keras 2's `alpha` is read as negative_slope, as Keras 3
    does."""


class Rescaling(_Builtin, kind="Rescaling"):
    """Keras's Rescaling: x * scale + offset, element by element, in training and inference alike
    (scale=1 / 255 makes pixels of 0-255 into 0-1); no weights. scale and offset are numbers:
    Keras's per-channel arrays are not supported (yet)."""


class ELU(_Builtin, kind="ELU"):
    """Keras's ELU: x where x > 0, else alpha * (exp(x) - 1)."""


class Lambda(Layer):
    """Keras's Lambda(function, output_shape=None, mask=None, arguments=None): the function of
    the layer's input (a tensor, or the list it is called on), with `arguments` as keywords (and
    `training` where the function takes it). Its ops on symbolic tensors are traced into the
    model's graph as a custom layer's call() is (keras/_trace.py: the ops crossover has; any
    other is one NotImplementedError naming it); on data it runs in Python. The output's shape
    is the traced one's (`output_shape` is kept, as Keras keeps it). A mask is not supported
    (yet); a model holding a Lambda cannot be written as a Keras model file (Keras writes the
    function's bytecode), its weights can."""

    _python_call = True  # _is_custom: traced like a custom layer's call()

    def __init__(
        self,
        function: Callable[..., Any],
        output_shape: Any = None,
        mask: Any = None,
        arguments: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {type(function).__name__}")
        reject_unsupported("Lambda", mask=(mask, None))
        self.function = function
        self.arguments = dict(arguments or {})
        self.mask = mask
        self.supports_masking = False
        self._output_shape = output_shape
        try:
            names = inspect.getfullargspec(function).args
        except TypeError:
            names = []
        self._fn_expects_training_arg = "training" in names
        self._fn_expects_mask_arg = "mask" in names

    def call(self, inputs: Any, mask: Any = None, training: Any = None) -> Any:
        kwargs = dict(self.arguments)
        if self._fn_expects_mask_arg:
            kwargs["mask"] = mask
        if self._fn_expects_training_arg:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError(
            "Lambda.get_config: crossover does not serialize a Python function (Keras writes "
            f"its bytecode); save the model's weights instead; {SEE_SUPPORTED}"
        )


class ActivityRegularization(_Builtin, kind="ActivityRegularization"):
    """Keras's ActivityRegularization(l1, l2): the identity, whose output's penalty l1 sum(|y|) +
    l2 sum(y^2), divided by the batch's size, joins the loss of fit and evaluate."""

    def _set_up(self, values: dict[str, Any]) -> None:
        super()._set_up(values)
        self.activity_regularizer = regularizers.L1L2(l1=self.l1, l2=self.l2)  # Keras's


class _Merge(_Builtin):
    """What Add, Concatenate and the element-wise merges share: two or more inputs, in a
    functional model."""

    _merges = True

    def _merged_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        raise NotImplementedError


class Add(_Merge, kind="Add"):
    """keras.layers.Add: the element-wise sum of inputs of one shape (a skip connection)."""

    def _merged_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        for s in shapes[1:]:
            if s != shapes[0]:
                raise ValueError(
                    "Inputs have incompatible shapes. Received shapes "
                    f"{(None, *shapes[0])} and {(None, *s)}"
                )
        return shapes[0]


class Concatenate(_Merge, kind="Concatenate"):
    """keras.layers.Concatenate along the last axis (axis=-1, Keras's default)."""

    def _merged_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        if self.axis not in (-1, len(shapes[0])):
            raise NotImplementedError(
                f"Concatenate: axis={self.axis} is not supported (yet): crossover joins along "
                "the last axis (axis=-1)"
            )
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or s[:-1] != shapes[0][:-1]:
                raise ValueError(
                    "A `Concatenate` layer requires inputs with matching shapes except for the "
                    f"concatenation axis. Received: input_shape={[(None, *x) for x in shapes]}"
                )
        return (*shapes[0][:-1], sum(s[-1] for s in shapes))


class _Elementwise(_Merge):
    """Subtract, Multiply, Maximum, Minimum, Average: two inputs of one shape, or one whose last
    axis is 1 (broadcast)."""

    def _merged_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        if len(shapes) != 2:
            raise NotImplementedError(
                f"{type(self).__name__} with {len(shapes)} inputs is not supported (yet): "
                f"crossover's takes two; {SEE_SUPPORTED}"
            )
        a, b = shapes
        rest = len(a) == len(b) and len(a) > 0 and a[:-1] == b[:-1]
        if a == b or (rest and b[-1] == 1):
            return a
        if rest and a[-1] == 1:
            return b
        raise ValueError(
            f"Inputs have incompatible shapes. Received shapes {(None, *a)} and {(None, *b)}"
        )


class Subtract(_Elementwise, kind="Subtract"):
    """keras.layers.Subtract: the first input minus the second."""


class Multiply(_Elementwise, kind="Multiply"):
    """keras.layers.Multiply: the element-wise product."""


class Maximum(_Elementwise, kind="Maximum"):
    """keras.layers.Maximum: the element-wise maximum."""


class Minimum(_Elementwise, kind="Minimum"):
    """keras.layers.Minimum: the element-wise minimum."""


class Average(_Elementwise, kind="Average"):
    """keras.layers.Average: the element-wise mean."""

def subtract(inputs: Sequence[Any], **kwargs: Any) -> Any:
    return Subtract(**kwargs)(inputs)


def multiply(inputs: Sequence[Any], **kwargs: Any) -> Any:
    return Multiply(**kwargs)(inputs)


def maximum(inputs: Sequence[Any], **kwargs: Any) -> Any:
    return Maximum(**kwargs)(inputs)


def minimum(inputs: Sequence[Any], **kwargs: Any) -> Any:
    return Minimum(**kwargs)(inputs)


def average(inputs: Sequence[Any], **kwargs: Any) -> Any:
    return Average(**kwargs)(inputs)


def add(inputs: Sequence[Any], **kwargs: Any) -> Any:
    """keras.layers.add([a, b]): Add()([a, b])."""
    return Add(**kwargs)(inputs)


def concatenate(inputs: Sequence[Any], axis: int = -1, **kwargs: Any) -> Any:
    """keras.layers.concatenate([a, b]): Concatenate(axis)([a, b])."""
    return Concatenate(axis=axis, **kwargs)(inputs)


# --- a layer's weights wherever they are (_sequential.py keeps them in step) -----------------
def _floats(a: Any, what: str) -> np.ndarray:
    """A C-contiguous float32 array: the same array when it is one already (no copy)."""
    try:
        return np.ascontiguousarray(a, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be a numeric array: {e}") from None


def _place_of(layer: Layer) -> Any:
    """Where the layer's latest weights are: a model, a list of arrays, or None (not built:
    its model is built first when it knows its input shape)."""
    if isinstance(layer._weights_in, (list, _ModelBase)):
        if isinstance(layer._weights_in, list) or layer._weights_in._core is not None:
            return layer._weights_in
    home = layer._home
    if home is not None and home.built:
        home._device_model()  # draws the model's weights (Keras builds a model with a shape)
        return home
    return None


def _layer_weights(layer: Layer) -> list[np.ndarray]:
    """Layer.get_weights: its latest weights, wherever they are."""
    if not layer._weight_kinds():
        return []
    place = _place_of(layer)
    if isinstance(place, list):
        return [np.array(w, dtype=np.float32) for w in place]
    if isinstance(place, _ModelBase):
        return place._own_layer_weights(layer) or []
    return []


def _set_layer_weights(layer: Layer, weights: list[Any]) -> None:
    """Layer.set_weights: Keras's checks (count, then each shape), then into where the layer's
    weights are."""
    current = _layer_weights(layer)
    if len(weights) != len(current):
        raise ValueError(
            f"You called `set_weights(weights)` on layer '{layer.name}' with a weight list of "
            f"length {len(weights)}, but the layer was expecting {len(current)} weights."
        )
    arrays = [_floats(w, f"set_weights: weight {i}") for i, w in enumerate(weights)]
    for ref, new in zip(current, arrays):
        if ref.shape != new.shape:
            raise ValueError(
                f"Layer {layer.name} weight shape {ref.shape} is not compatible with provided "
                f"weight shape {new.shape}."
            )
    place = _place_of(layer)
    if isinstance(place, list):
        layer._weights_in = [a.copy() for a in arrays]
        return
    assert isinstance(place, _ModelBase) and place._core is not None
    named = place._core.get_weights()
    for l, a, _ in place._weight_slices():
        if l is layer:
            for i, w in enumerate(arrays):
                named[a + i] = (named[a + i][0], w)
    place._core.set_weights(named)
    layer._weights_in = place


def _changed_by_training(layer: Any) -> bool:
    """Whether the training mode changes what `layer` computes (Dropout, the noise layers,
    BatchNormalization, a custom layer's traced dropout)."""
    if isinstance(layer, (Dropout, GaussianNoise, GaussianDropout, SpatialDropout2D)):
        return True
    if isinstance(layer, BatchNormalization):
        return True
    # A custom layer's traced dropout: its op layers, or the op layer itself (a model's leaf).
    ops = (getattr(layer, "_op_layers", None) or []) + [layer]
    return any((getattr(op, "_signature", None) or ("",))[0] == "dropout" for op in ops)


# Keras's other names for the same classes.
MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D
GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool2D = GlobalMaxPooling2D


# Keras's other names for the classes above.
_ALIASES = (
    "MaxPool1D",
    "AvgPool1D",
    "GlobalAvgPool1D",
    "GlobalMaxPool1D",
    "MaxPool2D",
    "AvgPool2D",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "Convolution1D",
    "Convolution2D",
    "Convolution2DTranspose",
)

# Layers a Keras user reaches for next, and what to do instead (api block).
_NOT_YET = {
    "Conv3D": "3-D convolutions",
    "Embedding": "embeddings",
    "LSTM": "recurrent layers",
    "PReLU": "parametric ReLU activations",
    "GRU": "recurrent layers",
    "SimpleRNN": "recurrent layers",
    "Normalization": "preprocessing layers",
}


def __getattr__(name: str) -> Any:
    classes = [n for n in __all__ if n[0].isupper() and n != "Layer" and n not in _ALIASES]
    supported = (
        ", ".join(classes)
        + ", custom Layer subclasses whose call() applies ops (and the aliases "
        + ", ".join(_ALIASES)
        + ")"
    )
    if name in _NOT_YET:
        supported += f"; {_NOT_YET[name]} are not in the engine"
    raise unsupported_attribute("keras.layers", name, supported)


__all__ = [
    "Layer",
    "Input",
    "InputLayer",
    "Flatten",
    "Dense",
    "Dropout",
    "GaussianNoise",
    "GaussianDropout",
    "SpatialDropout2D",
    "Activation",
    "Conv1D",
    "Conv2D",
    "Conv2DTranspose",
    "Convolution1D",
    "Convolution2D",
    "Convolution2DTranspose",
    "MaxPooling1D",
    "AveragePooling1D",
    "GlobalAveragePooling1D",
    "GlobalMaxPooling1D",
    "MaxPooling2D",
    "AveragePooling2D",
    "GlobalAveragePooling2D",
    "GlobalMaxPooling2D",
    "Reshape",
    "UpSampling2D",
    "ZeroPadding2D",
    "Cropping2D",
    "ZeroPadding1D",
    "Cropping1D",
    "Permute",
    "RepeatVector",
    "TimeDistributed",
    "SimpleRNN",
    "LSTM",
    "GRU",
    "SimpleRNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
    "BatchNormalization",
    "LayerNormalization",
    "Softmax",
    "ReLU",
    "LeakyReLU",
    "ELU",
    "Rescaling",
    "ActivityRegularization",
    "Lambda",
    "Add",
    "Subtract",
    "Multiply",
    "Maximum",
    "Minimum",
    "Average",
    "Concatenate",
    "add",
    "subtract",
    "multiply",
    "maximum",
    "minimum",
    "average",
    "concatenate",
    "MaxPool2D",
    "AvgPool2D",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "MaxPool1D",
    "AvgPool1D",
    "GlobalAvgPool1D",
    "GlobalMaxPool1D",
]
