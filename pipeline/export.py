"""Export stage: convert RUN's SavedModel to a batch-1 TFLite model, by default float32, or full-integer int8.

    pipeline export runs/digits --int8

int8 is post-training quantization calibrated on real training images (class-balanced, seeded, so
two exports of one run give identical bytes), or quantization-aware fine-tuning first with
`--qat-epochs N`. With `--remedy`, an int8 model that fails the parity gate on a tuning split of the
training data is repaired by the remedy ladder (pipeline/remedy/ladder.py). The int8 model is verified (integer only, static, batch 1, op versions that
edgetpu_compiler 16 parses) before anything is written; a model that fails is refused. Its input
follows Coral's convention (pipeline/quant/convention.py): uint8 with scale 1/128 and zero point 128,
so camera bytes go straight in. Each model carries TFLite metadata (pipeline/metadata: normalization,
labels, pixel contract, provenance) and gets a sidecar `<model>.json` (sha256, labels, image size,
input quantization, pixel contract) for the device.

This module is the stage: the options (ExportConfig) and the run's lock; the run's task converts and writes
(pipeline/tasks/classify/export.py, detect_export.py).
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, like the models

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from pipeline import tasks
from pipeline.errors import ConfigError
from pipeline.gate import GATE, GateLimits
from pipeline.importing.run_limits import refuse_qat
from pipeline.quant.convert import IO_TYPES, Mode
from pipeline.report import write as write_report
from pipeline.rundir.run import writing
from pipeline.tasks import options as task_options

@dataclass(frozen=True)
class ExportConfig:
    mode: Mode = Mode.FLOAT32  # float32 is the reference every quantized model is compared against
    calibration_samples: Optional[int] = None  # int8 only: training images to calibrate on (None: 300)
    io_type: Optional[str] = None  # int8 only: uint8 (None: Coral's scale 1/128, zero point 128, camera bytes as they are) or int8
    per_tensor: bool = False  # int8 only: one scale per weight tensor instead of per channel
    qat_epochs: int = 0  # int8 only: quantization-aware fine-tuning epochs before converting (0: post-training)
    calibration_data: Optional[Path] = None  # int8 only: a .npy of uint8 [N,S,S,3] instead of the run's training split
    seed: int = 0  # seeds the calibration draw (and QAT's shuffling): same seed, same bytes
    debug_samples: int = 16  # calibration images the per-layer error report runs on (small: it runs both models)
    # int8 only: quantization.json's per-layer errors. They cost a second conversion (the debugger's), and a third (the
    # float size) when no float TFLite was exported: about half an int8 export's time (bench/results/export_report.md).
    layer_errors: bool = True
    repair: bool = False  # int8 only: when the model fails the gate on a tuning split, the remedy ladder (pipeline/remedy/ladder.py)
    gate: GateLimits = GATE  # the limits the remedy ladder applies
    remedy: Optional[str] = None  # set by the ladder: the rung that made this model, recorded in its facts and metadata
    calibration_exclude: Tuple[int, ...] = ()  # set by the ladder: training-split positions calibration leaves out
    float_edits: Tuple[str, ...] = ()  # set by the ladder: weight edits on a copy of the float model (pipeline/remedy/float_edits.py)
    qat_distil: bool = False  # set by the ladder: QAT learns the float model's answers, not the labels (pipeline/quant/qat.py)
    clients: Tuple[str, ...] = ()  # with repair: clients whose feed of the tuning split the ladder judges too (remedy.py)
    calibration_clients: Tuple[str, ...] = ()  # set by the ladder: these clients' feeds of the calibration images join them
    task_options: Mapping[str, Any] = field(default_factory=dict)  # the run's task's own options (pipeline/tasks/options.py)

    def validate(self) -> None:
        task_options.check("export", self.task_options)
        if not isinstance(self.mode, Mode):
            raise ConfigError(f"mode {self.mode!r}, expected one of {', '.join(m.value for m in Mode)}")
        if self.mode is not Mode.INT8:
            used = [
                name
                for name, value in (
                    ("--calibration-samples", self.calibration_samples),
                    ("--io-type", self.io_type),
                    ("--per-tensor", self.per_tensor or None),
                    ("--qat-epochs", self.qat_epochs or None),
                    ("--calibration-data", self.calibration_data),
                    ("--remedy", self.repair or None),
                    ("--no-layer-errors", (not self.layer_errors) or None),
                )
                if value is not None
            ]
            if used:
                raise ConfigError(f"{', '.join(used)} apply to --int8 only; got mode {self.mode.value}")
        if self.clients and not self.repair:
            raise ConfigError(f"--clients {','.join(self.clients)} applies with --remedy: the export gates nothing else "
                              "(pipeline parity --clients gates the held-out images)")
        if self.calibration_samples is not None and self.calibration_samples < 1:
            raise ConfigError(f"--calibration-samples {self.calibration_samples}, expected at least 1")
        if self.io_type is not None and self.io_type not in IO_TYPES:
            raise ConfigError(f"--io-type {self.io_type!r}, expected one of {', '.join(IO_TYPES)}")
        if self.qat_epochs < 0:
            raise ConfigError(f"--qat-epochs {self.qat_epochs}, expected 0 or more")
        if self.debug_samples < 1:
            raise ConfigError(f"debug_samples {self.debug_samples}, expected at least 1")


# ---------------------------------------------------------------------------------------------
# The stage


def export_model(config: ExportConfig, run_dir: Path):
    """Convert, verify, then write the model, its sidecar and its report with the manifest, all or nothing: the run's
    task converts (an ExportResult for a classifier, the task's tasks.Exported otherwise)."""
    config.validate()
    with writing(run_dir, "pipeline export") as run:
        task = tasks.of_run(run)
        config = replace(config, task_options=task_options.for_task(task.name, "export", config.task_options))
        refuse_qat(run, config.qat_epochs)  # an imported run has no Keras model to fine-tune
        if config.clients:
            from pipeline.inference.client_scores import for_task

            config = replace(config, clients=for_task(config.clients, task.name))  # "all" as this task has them
        result = task.export(config, run)  # the task's own conversion (pipeline/tasks/<task>_export.py)
        write_report(run.dir)  # RUN/report.html; a failure to render only warns
    return result
