"""A nested tf-keras functional model (a Keras application used as a layer) rebuilt as one flat functional graph.

tfmot's quantize wrappers and the float weight edits (pipeline/remedy/float_edits.py) work layer by layer on one
graph; a base network called as a layer hides its convolutions inside one `Functional` layer. The flat model is
built from fresh copies of every layer with the trained weights, so editing it never touches the original.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the models are tf-keras models

from typing import Callable, Dict, List, Optional

import tensorflow as tf
import tf_keras as keras


def is_nested(model: "keras.Model") -> bool:
    return any(_is_graph(layer) for layer in model.layers)


def rebuilt(model: "keras.Model", after: Optional[Callable] = None) -> "keras.Model":
    """`model`'s graph, nested models spliced in, on new inputs (each layer's outputs replaced by `after(layer,
    outputs)` when given); it shares `model`'s layers."""
    inputs = [keras.Input(batch_shape=t.shape, dtype=t.dtype, name=t.name.split(":")[0]) for t in model.inputs]
    outputs = _call(model, inputs, after)
    return keras.Model(inputs, outputs if len(outputs) > 1 else outputs[0], name=model.name)


def flatten(model: "keras.Model") -> "keras.Model":
    """An independent copy of `model` with every nested functional model's layers spliced into one graph."""
    flat = rebuilt(model)
    # The graph above reuses the original layer objects; a clone gives the flat model its own layers and weights.
    copy = keras.models.clone_model(flat)
    copy.set_weights(flat.get_weights())
    return copy


def _is_graph(layer) -> bool:
    return isinstance(layer, keras.Model) and getattr(layer, "_is_graph_network", False)


def _call(model: "keras.Model", inputs: List, after: Optional[Callable] = None) -> List:
    """`model`'s graph applied to `inputs`, layer by layer, descending into nested functional models;
    `after(layer, outputs)`, when given, replaces each layer's outputs (to insert ops behind some layers)."""
    tensors: Dict[int, object] = {id(x): y for x, y in zip(model.inputs, inputs)}

    def swap(structure):
        return tf.nest.map_structure(lambda t: tensors.get(id(t), t), structure)

    # The same order tf-keras runs a functional graph in: by depth, inputs first.
    for depth in sorted(model._nodes_by_depth, reverse=True):
        for node in model._nodes_by_depth[depth]:
            if node.is_input:
                continue
            args, kwargs = swap(node.call_args), swap(node.call_kwargs)
            if _is_graph(node.layer):
                outputs = _call(node.layer, tf.nest.flatten((args, kwargs)), after)
            else:
                outputs = node.layer(*args, **kwargs)
                if after is not None:
                    outputs = after(node.layer, outputs)
            for x, y in zip(tf.nest.flatten(node.outputs), tf.nest.flatten(outputs)):
                tensors[id(x)] = y
    return [tensors[id(x)] for x in model.outputs]
