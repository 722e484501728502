"""The detector as a file that stands alone: its graph ended in TFLite's `TFLite_Detection_PostProcess` op,
converted to a float TFLite twin or a full-integer int8 model for the Edge TPU.

    from pipeline.tasks.detect.heads.ssd.postprocess import Settings, convert
    model_bytes = convert(detector, spec, image_size, labels, Settings(), int8=True, calibration=images)

`convert(detector, spec, image_size, labels, settings=Settings(), *, int8, calibration=None, name=None,
record=None) -> bytes`:
  - `detector`: the trained Keras detector of pipeline/tasks/detect/heads/ssd/model.py (raw pixels in, box_codes and class_logits out);
  - `spec`, `image_size`: the AnchorSpec and square input side it was trained with (the anchors become a
    constant of the graph);
  - `labels`: the class names, in class-id order (no background);
  - `settings`: the post-processing op's attributes (max detections, score and IoU thresholds);
  - `int8`: full-integer int8 up to the op, Coral's uint8 input (scale 1/128, zero point 128: camera bytes go
    in unchanged), calibrated on `calibration`, an iterable of uint8 [S, S, 3] images; or the float32 twin,
    which takes raw float pixels 0..255;
  - `name`, `record`: the model's name in its metadata, and a JSON-able dict packed in the model as its
    edgeflow record (pipeline.metadata's record: labels, image size, pixel contract, provenance); the
    metadata itself (labels packed, normalization, the four outputs described) is always written.
It returns the verified bytes (for int8: integer-only up to the op, Edge TPU op versions, batch 1, static).

The op takes box codes [1, A, 4], class scores [1, A, C + 1] (sigmoid, column 0 the background) and the anchors
[A, 4], and writes four float32 outputs: boxes [1, N, 4] (ymin, xmin, ymax, xmax, normalized to the input),
class ids [1, N] (0-based, no background), scores [1, N], count [1]. Clients read them two ways, and the file
satisfies both: pycoral reads the signature's names (output_0 count, output_1 scores, output_2 class ids,
output_3 boxes), Frigate and Google's older models read the subgraph's positions (boxes, class ids, scores,
count). The converter orders the subgraph's outputs its own way, so they are put in that order afterwards
(the signature names tensors by index, so it is unchanged).

The graph reaches the op the way TensorFlow's Object Detection API exports its detectors: a `tf.function`
whose `experimental_implements` attribute names the op and its attributes, with a body of placeholders; the
converter replaces the function by the custom op (hence `allow_custom_ops`). In the int8 model the op's two
inputs are dequantized just before it (TF 2.21's quantizer leaves the custom op float), so the model ends in
two DEQUANTIZE ops and the op, all on the CPU after the part the Edge TPU runs.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, like the models

from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.ssd.anchors import SCALE_FACTORS, AnchorSpec, anchors
from pipeline.errors import DataError, PipelineError
from pipeline.quant import convention
from pipeline.quant.convert import convert as convert_bytes
from pipeline.quant.verify import POSTPROCESS_OP, verify_int8, verify_static

# Signature output names -> what pycoral's detect.get_objects reads under each.
SIGNATURE_OUTPUTS = {"output_0": "count", "output_1": "scores", "output_2": "classes", "output_3": "boxes"}
# The subgraph's output positions Frigate's SSD reader and pycoral's signature-less path read.
POSITION_ORDER = ("boxes", "classes", "scores", "count")


class Settings(NamedTuple):
    """The post-processing op's attributes. IoU 0.6, fast (class-agnostic) NMS and one class per box are
    Google's SSD models' values; 25 detections is EfficientDet-Lite's (an SSD's 10 cuts images with many objects)."""

    max_detections: int = 25  # N, the length of the outputs
    score_threshold: float = 0.01  # candidates below are dropped before NMS (clients apply their own, e.g. 0.4)
    iou_threshold: float = 0.6  # NMS overlap above which the lower-scoring box goes
    use_regular_nms: bool = False  # False: the op's fast NMS, as Google's SSD models use
    detections_per_class: int = 100  # regular NMS only

    def check(self) -> None:
        if not (isinstance(self.max_detections, int) and self.max_detections >= 1):
            raise DataError(f"max detections {self.max_detections!r}, expected a whole number of at least 1")
        for name, value in (("score threshold", self.score_threshold), ("IoU threshold", self.iou_threshold)):
            if not 0.0 <= float(value) <= 1.0:
                raise DataError(f"{name} {value!r}, expected a number from 0 to 1")

    def attributes(self, num_classes: int) -> Dict[str, Any]:
        y, x, h, w = SCALE_FACTORS
        return {"max_detections": self.max_detections, "max_classes_per_detection": 1,
                "detections_per_class": self.detections_per_class, "use_regular_nms": bool(self.use_regular_nms),
                "nms_score_threshold": float(self.score_threshold), "nms_iou_threshold": float(self.iou_threshold),
                "num_classes": int(num_classes), "y_scale": y, "x_scale": x, "h_scale": h, "w_scale": w}


def implements(attributes: Dict[str, Any]) -> str:
    """The `experimental_implements` string: the op's name and attributes in the NameAttrList text form."""
    def value(v):
        if isinstance(v, bool):
            return f"b: {str(v).lower()}"
        if isinstance(v, int):
            return f"i: {v}"
        return f"f: {float(v)!r}"

    parts = [f'name: "{POSTPROCESS_OP}"'] + [f'attr {{ key: "{k}" value {{ {value(v)} }} }}' for k, v in attributes.items()]
    return " ".join(parts)


def serving_function(detector, spec: AnchorSpec, image_size: int, num_classes: int, settings: Settings = Settings()):
    """The batch-1 graph raw pixels [1, S, S, 3] float32 -> {output_0: count, output_1: scores, output_2: classes,
    output_3: boxes}, ending in the post-processing op; a concrete function for the converter."""
    from pipeline.tasks.detect.heads.ssd.model import with_scores

    scored = with_scores(detector)
    anchor_boxes = tf.constant(anchors(image_size, spec))  # (ycenter, xcenter, h, w): the op's anchor layout
    n = settings.max_detections
    expected = int(anchor_boxes.shape[0])
    out = scored.output_shape["box_codes"] if isinstance(scored.output_shape, dict) else None
    if out is not None and out[1] != expected:
        raise DataError(f"the detector predicts {out[1]} anchors, but the anchor spec at image size {image_size} has "
                        f"{expected}; expected the spec and size it was trained with")

    @tf.function(experimental_implements=implements(settings.attributes(num_classes)))
    def postprocess(box_codes, class_scores, anchor_table):
        # Placeholders of the op's output shapes: the converter replaces this function by the op itself.
        del box_codes, class_scores, anchor_table
        return tf.zeros([1, n, 4]), tf.zeros([1, n]), tf.zeros([1, n]), tf.zeros([1])

    @tf.function(input_signature=[tf.TensorSpec([1, image_size, image_size, 3], tf.float32, name="image")])
    def serve(image):
        heads = scored(image, training=False)
        boxes, classes, scores, count = postprocess(heads["box_codes"], heads["class_scores"], anchor_boxes)
        found = {"boxes": boxes, "classes": classes, "scores": scores, "count": count}
        return {key: found[what] for key, what in SIGNATURE_OUTPUTS.items()}

    return serve.get_concrete_function(), scored


def convert(detector, spec: AnchorSpec, image_size: int, labels: Sequence[str], settings: Settings = Settings(), *,
            int8: bool, calibration: Optional[Iterable[np.ndarray]] = None, name: Optional[str] = None,
            record: Optional[dict] = None) -> bytes:
    """The detector as verified TFLite bytes with metadata (see the module docstring)."""
    from pipeline.tasks.detect.heads.ssd import metadata as detector_metadata

    settings.check()
    labels = [str(x) for x in labels]
    if not labels:
        raise DataError("no class names; expected one label per class")
    concrete, trackable = serving_function(detector, spec, image_size, len(labels), settings)
    if int8:
        images = _calibration_array(calibration, image_size)
        concrete, x = convention.wrap(concrete, images)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([image[None]] for image in x)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.uint8
        # The outputs stay float32: the op writes float boxes, ids, scores and count.
    else:
        if calibration is not None:
            raise DataError("calibration images are for the int8 model; the float twin takes none")
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
    converter.allow_custom_ops = True  # the post-processing op is a custom op that every TFLite runtime has built in
    model = reorder_outputs(convert_bytes(converter))
    info = verify_int8(model, "uint8") if int8 else verify_static(model)
    _check_outputs(info, settings.max_detections)
    if int8:
        convention.check(_input_quantization(info), "uint8")
    mean, std = (convention.MEAN, convention.STD) if int8 else (0.0, 1.0)
    model = detector_metadata.embed(model, labels, image_size, mean=mean, std=std,
                                    input_dtype="uint8" if int8 else "float32",
                                    name=name or f"{detector.name} {'int8' if int8 else 'float32'}", record=record)
    return model


def reorder_outputs(model: bytes) -> bytes:
    """The model with its subgraph's outputs in POSITION_ORDER, told apart by the signature's names."""
    from tensorflow.lite.python import schema_py_generated as schema
    import flatbuffers

    tree = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    if len(tree.subgraphs) != 1 or not tree.signatureDefs or len(tree.signatureDefs) != 1:
        raise PipelineError(f"the converted detector has {len(tree.subgraphs)} subgraph(s) and "
                            f"{len(tree.signatureDefs or [])} signature(s); expected 1 of each")
    by_name = {_text(t.name): t.tensorIndex for t in tree.signatureDefs[0].outputs}
    wanted = {what: by_name.get(key) for key, what in SIGNATURE_OUTPUTS.items()}
    graph = tree.subgraphs[0]
    if None in wanted.values() or sorted(wanted.values()) != sorted(int(i) for i in graph.outputs):
        raise PipelineError(f"the converted detector's signature outputs {sorted(by_name)} do not name its "
                            f"{len(graph.outputs)} outputs; expected {', '.join(SIGNATURE_OUTPUTS)}")
    graph.outputs = np.asarray([wanted[what] for what in POSITION_ORDER], np.int32)
    builder = flatbuffers.Builder(len(model) + 1024)
    builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _calibration_array(calibration: Optional[Iterable[np.ndarray]], image_size: int) -> np.ndarray:
    if calibration is None:
        raise DataError("the int8 detector needs calibration images; expected uint8 [S, S, 3] images at the input size")
    images: List[np.ndarray] = [np.asarray(image) for image in calibration]
    expected = (image_size, image_size, 3)
    for i, image in enumerate(images):
        if image.dtype != np.uint8 or image.shape != expected:
            raise DataError(f"calibration image {i} is {image.dtype} {list(image.shape)}, expected uint8 "
                            f"[{image_size}, {image_size}, 3] (raw pixels at the detector's input size)")
    if not images:
        raise DataError("calibration holds no images; expected at least 1")
    return np.stack(images)


def _check_outputs(info, n: int) -> None:
    """The four outputs in POSITION_ORDER with the op's shapes, float32, written by the post-processing op."""
    shapes = [list(info.tensors[t].shape) for t in info.outputs]
    expected = [[1, n, 4], [1, n], [1, n], [1]]
    dtypes = {info.tensors[t].dtype.lower() for t in info.outputs}
    last = info.ops[-1] if info.ops else None
    if shapes != expected or dtypes != {"float32"} or last is None or last.name != POSTPROCESS_OP \
            or sorted(last.outputs) != sorted(info.outputs):
        raise PipelineError(f"the converted detector's outputs are {shapes} {sorted(dtypes)} from "
                            f"{last.name if last else 'no op'}; expected float32 {expected} (boxes, class ids, scores, "
                            f"count) from {POSTPROCESS_OP}")


def _input_quantization(info) -> Dict[str, Any]:
    from pipeline.quant.verify import quantization_of

    return quantization_of(info, info.inputs[0])
