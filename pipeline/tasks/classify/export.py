"""`pipeline export` of a classification run (pipeline/export.py is the stage): the SavedModel, or its QAT
fine-tuned Keras model, converted to a batch-1 TFLite model, verified, and written with its metadata, sidecar
and, for int8, RUN/quantization.json (the per-layer error against float). With --remedy, the remedy ladder
(pipeline/remedy/ladder.py) converts again, cheaper repairs first, until the model passes the gate on a tuning split.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, like the models

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from edge.pixels import preprocess
from edge.pixels.contract import PixelContract
from edge.model.integrity import sidecar_path, sidecar_record
from pipeline import metadata, tasks
from pipeline.children import child
from pipeline.quant import convention, report as quant_report, verify as quant_verify
from pipeline.quant.calibration import calibration_images
from pipeline.quant.convert import Mode, keras_function, make_converter, serving_function
from pipeline.quant.convert import convert as convert_bytes
from pipeline.rundir.files import json_bytes
from pipeline.rundir.run import Run, artifact


REPORT_KEY = "quantization_report"


@dataclass(frozen=True)
class _ModeSpec:
    key: str  # the run's artifact key (pipeline/rundir/run.py names its file)
    summary: str  # one line for the report


MODES: Dict[Mode, _ModeSpec] = {
    Mode.FLOAT32: _ModeSpec("model_float", "float32 weights and activations"),
    Mode.INT8: _ModeSpec("model_int8", "full-integer int8 (Edge TPU)"),
    Mode.FLOAT16: _ModeSpec("model_float16", "float16 weights, float32 compute"),
    Mode.DYNAMIC_RANGE: _ModeSpec("model_dynamic_range", "int8 weights, float activations"),
}


@dataclass(frozen=True)
class ExportResult:
    mode: Mode
    model_path: Path  # the .tflite written inside RUN
    sidecar_path: Path  # <model>.json for the device
    size_bytes: int
    input: Dict[str, object]  # {"dtype", "scale", "zero_point"}
    output: Dict[str, object]
    report_path: Optional[Path]  # RUN/quantization.json (int8 only)
    notes: Tuple[str, ...]  # things the user should know (fewer calibration images, non-raw-pixel input)
    table: str  # the short report printed by the CLI
    remedy: Optional[dict] = None  # --remedy: the ladder's record (every attempt), as the manifest holds it
    failures: Tuple[str, ...] = ()  # --remedy: the gate's message when no remedy passed (the best attempt was written)



def export(config, run: Run) -> ExportResult:
    """The model as `config` asks (repaired by the ladder with --remedy), its report for int8, written."""
    outcome = _repair(config, run) if config.repair else None
    model = outcome.chosen.model if outcome else convert(config, run)
    report = None
    if config.mode is Mode.INT8 and config.layer_errors:
        if isinstance(model.converter, Rebuilt):
            # A model made in a child process (the ladder's, QAT's) is reported on in another, which converts it again;
            # the float model's size comes from a third, so that the two conversions' memory never adds up in one.
            float_bytes = child.call(_float_size, run, config, what="the float model's size")
            report = child.call(_report, config, run, model, float_bytes, what="the per-layer report")
        else:
            report = _report(config, run, model)
    return _write(config, run, model, report, outcome)


def _repair(config, run: Run):
    """The remedy ladder: the export as asked, then cheaper-first repairs, scored on a tuning split. Every rung
    converts in a child process (`converted_apart`): what a conversion leaves in TensorFlow returns to the system
    when the child ends, so rungs do not pile up in this process (bench/results/remedy.md 13c)."""
    from pipeline.remedy import ladder as remedy

    def worst_layers(model: Converted) -> List[dict]:
        return child.call(_worst_layers, model.converter, model.calibration[: config.debug_samples],
                          what="the export's per-layer report")

    return remedy.repair(config, run, converted_apart, config.gate, task=tasks.of_run(run).tuning(),
                         layer_errors=worst_layers if config.layer_errors else None)


def _worst_layers(converter: Callable, calibration: np.ndarray) -> List[dict]:
    """In a child process: the layers whose int8 error is largest (the remedy table's motivation)."""
    layers = quant_report.layer_errors(converter, calibration)
    return sorted(layers, key=lambda layer: -layer["rmse_steps"])[: quant_report.WORST_LAYERS]


class Converted(NamedTuple):
    bytes: bytes  # the .tflite file
    io: Dict[str, Dict[str, object]]  # input and output quantization
    facts: Dict[str, object]  # what the manifest records of it
    notes: List[str]  # what the user should know
    info: object  # quant_verify's reading of the model
    converter: Callable  # () -> a fresh converter for the same model (the per-layer report converts again)
    calibration: Optional[np.ndarray]  # int8 only: the calibration images
    contract: PixelContract  # the pixel contract this model takes (int8: Coral's mean 128, std 128)


def convert(config, run: Run) -> Converted:
    """The SavedModel (or its QAT fine-tuned Keras model) converted to `config.mode` and verified. Fine-tuning runs
    in a child process, and the fine-tuned model's conversion in another (`converted_apart`)."""
    if not config.qat_epochs:
        return _convert(config, run)
    return converted_apart(config, run)


def converted_apart(config, run: Run) -> Converted:
    """`convert` in child processes (pipeline/children/child.py): the memory a conversion, and a fine-tuning before it,
    takes returns to the system when each ends, and their peaks do not add up (bench/results/remedy.md 13b, 13c).
    Its converter makes the same converter again in whatever process calls it (`Rebuilt`)."""
    weights = None
    if config.qat_epochs:
        serving_function(run.artifact("saved_model"), run.image_size)  # a manifest that does not describe it fails here
        what = f"the {config.remedy} rung's fine-tuning" if config.remedy else "QAT fine-tuning"
        weights = child.call(_fine_tuned_weights, config, run, what=what)
        what = f"the conversion after {what}"
    else:
        what = f"the {config.remedy} rung's conversion" if config.remedy else "the conversion"
    model = child.call(_converted_here, config, run, weights, what=what)
    return model._replace(converter=Rebuilt(config, run, weights))


class Rebuilt:
    """A converter for the model `config` makes, made again (the fine-tuned `weights` on the same quantization-aware
    graph, for QAT) in the process that calls it: unlike a converter, it can be sent to a child process."""

    def __init__(self, config, run: Run, weights=None):
        self.config, self.run, self.weights = config, run, weights

    def __call__(self):
        config, run = self.config, self.run
        tuned = _tuned(run, self.weights)
        calibration = calibration_images(run, config, run.image_size)[0] if config.mode is Mode.INT8 else None
        concrete, trackable, calibration = _functions(config, run, calibration, tuned)
        return make_converter(concrete, trackable, config.mode, config, calibration)


def _fine_tuned_weights(config, run: Run):
    """In a child process: RUN's Keras model made quantization-aware and fine-tuned; its weights."""
    from pipeline.quant import qat

    tuned = (qat.distil(run, config.qat_epochs, config.seed, config.calibration_exclude) if config.qat_distil
             else qat.fine_tune(run, epochs=config.qat_epochs, seed=config.seed))
    return tuned.get_weights()


def _converted_here(config, run: Run, weights=None) -> Converted:
    """In a child process: the model converted and verified (the fine-tuned weights on the quantization-aware graph,
    for QAT); its reading of the file comes back with it, the converter (a closure over this process's objects)
    does not."""
    return _convert(config, run, _tuned(run, weights))._replace(converter=None)


def _tuned(run: Run, weights):
    """The fine-tuned `weights` on the run's quantization-aware graph, or None when there are none (no QAT)."""
    if weights is None:
        return None
    from pipeline.quant import qat

    return qat.rebuilt(run, weights)


def _functions(config, run: Run, calibration: Optional[np.ndarray], tuned=None):
    """(concrete function, its trackable object, the calibration images as it takes them) for the converter: the
    SavedModel's, `tuned`'s (the QAT fine-tuned Keras model) or the float-edited Keras model's, wrapped for int8."""
    if tuned is not None:  # the SavedModel is not loaded: the child that fine-tunes has no use for it
        concrete, trackable = keras_function(tuned, run.image_size)
    elif config.float_edits and config.mode is Mode.INT8:
        from pipeline.remedy import float_edits

        edited = float_edits.apply(_keras_model(run), config.float_edits, calibration, config.per_tensor)
        concrete, trackable = keras_function(edited, run.image_size)
    else:
        concrete, trackable = serving_function(run.artifact("saved_model"), run.image_size)
    if config.mode is Mode.INT8:  # the input takes normalized pixels on Coral's grid; the SavedModel stays as it is
        concrete, calibration = convention.wrap(concrete, calibration)
    return concrete, trackable, calibration


def _convert(config, run: Run, tuned=None) -> Converted:
    """The SavedModel, or `tuned` (the QAT fine-tuned Keras model), converted to `config.mode` and verified."""
    image_size = run.image_size
    if tuned is None:  # the SavedModel first: a manifest that does not describe it fails before calibration images load
        serving_function(run.artifact("saved_model"), image_size)
    calibration = None
    notes: List[str] = []
    facts: Dict[str, object] = {"mode": config.mode.value}
    if config.mode is Mode.INT8:
        calibration, _, calib_facts, calib_notes = calibration_images(run, config, image_size)
        notes += calib_notes
        facts.update(io_type=config.io_type or "uint8", per_channel=not config.per_tensor, calibration=calib_facts)
        if config.remedy:
            facts["remedy"] = config.remedy  # which rung of the remedy ladder made this model
    if tuned is not None:
        facts["qat"] = {"epochs": config.qat_epochs, **({"learns": "the float model's scores"} if config.qat_distil else {})}
    elif config.float_edits and config.mode is Mode.INT8:
        facts["float_edits"] = list(config.float_edits)
    concrete, trackable, calibration = _functions(config, run, calibration, tuned)

    def converter():
        return make_converter(concrete, trackable, config.mode, config, calibration)

    model_bytes = convert_bytes(converter())
    info = _verify(model_bytes, config)
    io = _io_quantization(info)
    facts.update(io)
    contract = convention.contract(run.contract, int8=config.mode is Mode.INT8)  # what this model truly takes
    if config.mode is Mode.INT8:
        convention.check(io["input"], config.io_type or "uint8")
        facts["raw_pixels"] = preprocess.passes_raw(contract.norm, io["input"]["scale"], io["input"]["zero_point"], io["input"]["dtype"])
        if not facts["raw_pixels"]:
            notes.append(f"the {io['input']['dtype']} input is quantized with scale {io['input']['scale']:.6g}, zero point "
                         f"{io['input']['zero_point']}: the device must quantize camera pixels, they do not go in as they are")
    written = metadata.embed(model_bytes, run, artifact(MODES[config.mode].key).name, contract, facts)
    model_bytes, info = written.model, _verify(written.model, config)  # packing changes no op or tensor; checked anyway
    notes += written.notes
    facts.update(preprocessing=contract.as_record(), metadata=written.facts)
    return Converted(model_bytes, io, facts, notes, info, converter, calibration, contract)


def _keras_model(run: Run):
    import tf_keras as keras

    return keras.models.load_model(str(run.artifact("keras_model")), compile=False)


def _report(config, run: Run, model: Converted, float_bytes: Optional[int] = None) -> dict:
    """quantization.json: sizes, verification and the per-layer error of the int8 model against float (whose size is
    `float_bytes`, or found here)."""
    float_bytes = _float_size(run, config) if float_bytes is None else float_bytes
    debug = quant_report.layer_errors(model.converter, model.calibration[: config.debug_samples])
    return quant_report.build(model.info, len(model.bytes), float_bytes, debug,
                              min(config.debug_samples, len(model.calibration)), model.facts, model.notes)


def _write(config, run: Run, model: Converted, report: Optional[dict], outcome=None) -> ExportResult:
    """The model, its sidecar and the report with the manifest that records them: all change together, or none."""
    spec = MODES[config.mode]
    record = outcome.record() if outcome else None
    with run.transaction() as t:
        if record is not None or (config.mode is Mode.INT8 and run.remedy is not None):
            t.set("remedy", record)  # an int8 export without --remedy leaves no older ladder's record behind
        model_path = t.write(spec.key, model.bytes, **model.facts, size_bytes=len(model.bytes))
        side = t.write_file(sidecar_path(model_path),
                            json_bytes(sidecar(model_path.name, model.bytes, run, model.io["input"], model.contract)))
        if report is not None:
            report_path = t.write(REPORT_KEY, json_bytes(report))
        elif config.mode is Mode.INT8 and run.has(REPORT_KEY):
            t.forget(REPORT_KEY)  # --no-layer-errors: an earlier export's report would describe another model
    table = quant_report.table(report) if report else f"{model_path.name}: {len(model.bytes):,} bytes ({spec.summary})"
    if outcome:
        from pipeline.remedy import ladder as remedy

        table = remedy.table(outcome) + "\n" + table
    return ExportResult(mode=config.mode, model_path=model_path, sidecar_path=side, size_bytes=len(model.bytes),
                        input=model.io["input"], output=model.io["output"],
                        report_path=report_path if report is not None else None, notes=tuple(model.notes), table=table,
                        remedy=record, failures=tuple(outcome.failures()) if outcome else ())


def _verify(model: bytes, config):
    if config.mode is Mode.INT8:
        return quant_verify.verify_int8(model, config.io_type or "uint8")
    return quant_verify.verify_static(model)


def _io_quantization(info) -> Dict[str, Dict[str, object]]:
    out = {}
    for role, indices in (("input", info.inputs), ("output", info.outputs)):
        tensor = info.tensors[indices[0]]
        if tensor.dtype.lower() in ("int8", "uint8"):
            out[role] = quant_verify.quantization_of(info, indices[0])
        else:
            out[role] = {"dtype": tensor.dtype.lower(), "scale": None, "zero_point": None}
    return out


def _float_size(run: Run, config) -> int:
    """Bytes of the float32 TFLite model: the recorded one if there is one, else converted here (not written)."""
    if run.has("model_float"):
        return run.artifact("model_float").stat().st_size
    concrete, trackable = serving_function(run.artifact("saved_model"), run.image_size)
    return len(convert_bytes(make_converter(concrete, trackable, Mode.FLOAT32, config, None)))


def sidecar(model_name: str, model_bytes: bytes, run: Run, input_q: Dict[str, object], contract: PixelContract) -> dict:
    """What the device checks the model against: its sha256, labels, image size, input quantization and the
    pixel contract it feeds the model by (this model's own)."""
    return sidecar_record(model_name, model_bytes, run.labels, image_size=run.image_size, input=dict(input_q),
                          preprocessing=contract.as_record())
