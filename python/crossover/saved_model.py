"""tf.saved_model.save and tf.saved_model.load for a crossover Keras model, honestly: the folder
they use is NOT a TensorFlow SavedModel. TensorFlow's format (saved_model.pb, a protobuf of
TensorFlow graphs, and variables/) holds graphs crossover does not make or run. save writes the
model into the folder as Keras 3's `.keras` archive, MODEL_FILE (keras.models.load_model reads it,
here and in Keras 3); load reads that file back and returns an object that is callable (the
model's outputs as a tensor) and has `signatures["serving_default"]` (a function of the inputs
returning {"output_0": outputs}, as TensorFlow's loaded object has). A folder with TensorFlow's
saved_model.pb and no MODEL_FILE is refused by load with a NotImplementedError naming the way:
model.save('model.keras') under TensorFlow, keras.models.load_model('model.keras') here."""

import os
from typing import Any

from ._args import reject_unsupported, unsupported_attribute

# The file save writes in the folder: a `.keras` archive, named so.
MODEL_FILE = "model.keras"


def _folder(export_dir: Any, who: str) -> str:
    try:
        return os.fspath(export_dir)
    except TypeError:
        raise TypeError(f"{who}: export_dir must be a path, got {export_dir!r}") from None


def save(obj: Any, export_dir: Any, signatures: Any = None, options: Any = None) -> None:
    """tf.saved_model.save(model, export_dir): the folder (made with its parents, as TensorFlow
    does) gets the model as a Keras 3 `.keras` archive, export_dir/model.keras; not a TensorFlow
    SavedModel (no saved_model.pb)."""
    from .keras import saving
    from .keras.models import Model

    reject_unsupported(
        "tf.saved_model.save", signatures=(signatures, None), options=(options, None)
    )
    if not isinstance(obj, Model):
        raise TypeError(
            "tf.saved_model.save: crossover saves a crossover.keras model (Sequential or "
            f"functional), got {type(obj).__name__}"
        )
    folder = _folder(export_dir, "tf.saved_model.save")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise FileExistsError(f"tf.saved_model.save: {folder} exists and is not a folder")
    os.makedirs(folder, exist_ok=True)
    saving.save_model(obj, os.path.join(folder, MODEL_FILE))


class LoadedModel:
    """What tf.saved_model.load returns here: the model read from the folder's `.keras` archive
    (`keras_model`), callable on inputs, with TensorFlow's `signatures["serving_default"]`."""

    def __init__(self, model: Any, folder: str) -> None:
        self.keras_model = model
        self.signatures = {"serving_default": self._serving_default}
        self._folder = folder

    def __call__(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        return self.keras_model(inputs, training=training, mask=mask)

    def _serving_default(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        given = list(args) + list(kwargs.values())
        if len(given) != 1:
            raise TypeError(
                f"serving_default takes the model's one input, got {len(given)} arguments"
            )
        return {"output_0": self.keras_model(given[0])}

    def __repr__(self) -> str:
        return (
            f"<crossover.saved_model.LoadedModel of {os.path.join(self._folder, MODEL_FILE)} "
            "(a Keras .keras archive, not a TensorFlow SavedModel)>"
        )


def load(export_dir: Any, tags: Any = None, options: Any = None) -> LoadedModel:
    """tf.saved_model.load(export_dir): the model tf.saved_model.save wrote there (its
    model.keras), as a LoadedModel. A TensorFlow SavedModel (saved_model.pb) is refused."""
    from .keras import saving

    reject_unsupported("tf.saved_model.load", options=(options, None))
    folder = _folder(export_dir, "tf.saved_model.load")
    path = os.path.join(folder, MODEL_FILE)
    if os.path.isfile(path):
        return LoadedModel(saving.load_model(path), folder)
    tf_files = ("saved_model.pb", "saved_model.pbtxt")
    if any(os.path.isfile(os.path.join(folder, f)) for f in tf_files):
        raise NotImplementedError(
            f"tf.saved_model.load: {folder} is a TensorFlow SavedModel (saved_model.pb): crossover "
            "does not read TensorFlow graphs; save the model as a Keras archive instead "
            "(model.save('model.keras') under TensorFlow) and load it with "
            "keras.models.load_model('model.keras')"
        )
    raise OSError(
        f"tf.saved_model.load: {folder} has no {MODEL_FILE}: crossover's tf.saved_model.load "
        "reads the folders its tf.saved_model.save writes (a Keras .keras archive inside)"
    )


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "saved_model",
        name,
        "save and load (a folder holding a Keras .keras archive, not a TensorFlow SavedModel)",
    )


__all__ = ["save", "load", "LoadedModel", "MODEL_FILE"]
