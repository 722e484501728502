"""Command line of the host side: `pipeline prepare | train | import | export | compile | parity | predict | run | report`.

Thin by design: each command parses options, builds its stage's config and calls the stage.

    pipeline run --out runs/digits
"""
from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import typing
from dataclasses import fields

import click

from edge.errors import EdgeError, exits_cleanly
from pipeline import console, gate, tasks
from pipeline.errors import PipelineError
from pipeline.gate import GATE
from pipeline.tasks import options as task_options
from pipeline.training.config import FLAGS, TrainConfig, plain_type, shown_default
from pipeline.training.schedule import WarmupSchedule

# Stages read models with edge/'s reader, which raises EdgeErrors: both are the user's to act on.
reports_errors = exits_cleanly(PipelineError, EdgeError)


@click.group()
@click.option("--verbose", is_flag=True, help="show TensorFlow's own logs and other packages' warnings (hidden by default)")
def main(verbose):
    """Train, quantize, compile for the Edge TPU, and check accuracy parity."""
    console.configure(verbose)  # before anything imports TensorFlow: the stage that needs it imports it, quietly


# One command per stage. Keep them thin: options -> config -> stage.run.


def _click_option(option: task_options.Option):
    """A task's option (pipeline/tasks/<task>/options.py) as click offers it: not given is None, whatever its default."""
    kind = click.Choice(option.type) if isinstance(option.type, tuple) else option.type
    shown = f"  [default: {option.default}]" if option.show_default else ""
    return click.option(option.flag, option.key, type=kind, help=option.help + shown)


def _with_task_options(command_name: str):
    """Decorate a command with every task's options of `command_name`; they come in as keyword arguments."""
    def decorate(command):
        for option in reversed(task_options.declared(command_name)):
            command = _click_option(option)(command)
        return command
    return decorate


def _given(values: dict, command_name: str) -> dict:
    """The task options of `command_name` among a command's arguments that were given."""
    keys = {o.key for o in task_options.declared(command_name)}
    return {k: v for k, v in values.items() if k in keys and v is not None}


def _gate_words(key: str) -> str:
    """Each task's words for one part of parity's gate (its options.py's GATE_HELP), "task: words; ...": the commands'
    help names no task, and a new task's words come from its own folder."""
    return "; ".join(f"{task}: {words[key]}" for task, words in task_options.said("GATE_HELP"))


MAX_DROP_HELP = "allowed drop of the gated metric, percentage points: " + _gate_words("metric")
MIN_AGREEMENT_HELP = "required agreement with the float model: " + _gate_words("agreement")
MIN_ACCURACY_HELP = "least score of the float and gated models in the gated metric; default: " + _gate_words("floor")
CLIENTS_HELP = ("clients gated like the int8 model, comma-separated, all or none; every client is reported either way "
                "(default none). Those that read each task's model: " + _gate_words("clients"))
COCO_IMAGES_HELP = "COCO data: a folder the annotations' file_names are relative to, searched after the JSON's own"


# `pipeline train`'s options in the order --help lists them: TrainConfig's fields (each with its option, help and type in
# pipeline/training/config.py), the schedule's ("schedule.FIELD"), and the two that are not the config's.
# "tasks": every task's own train options (pipeline/tasks/<task>/options.py), in their order.
_TRAIN_HELP_ORDER = ("task", "data", "--out", "val_data", "images", "model", "image_size", "model_options", "tasks", "weights",
                     "epochs",
                     "frozen_epochs", "unfreeze_from", "fine_tune_learning_rate", "batch_size", "schedule.max",
                     "schedule.start", "schedule.min", "schedule.warmup_epochs", "schedule.sustain_epochs", "schedule.decay",
                     "cache_mb", "steps_per_execution", "tpu", "cpu_replicas", "seed", "tuning_fraction", "--config", "resume", "tensorboard",
                     "client_fits")
_TRAIN_OWN_OPTIONS = {
    "--out": click.option("--out", "run_dir", required=True, type=click.Path(file_okay=False), help="run directory to write"),
    "--config": click.option("--config", "config_file", type=click.Path(dir_okay=False), help="JSON file of train options"),
}


def _with_default(help: str, name: str) -> str:
    """The option's help with its default as TrainConfig (and each task) writes it; the option itself defaults to None,
    "not given", so that a config file's value or the task's default applies."""
    shown = shown_default(name)
    return help if shown is None else f"{help}  [default: {shown}]"


def _train_options(command):
    """Decorate `command` with every `pipeline train` option; each TrainConfig field's comes in as its field name
    (None when not given), each schedule field's as schedule.FIELD's parameter, schedule_FIELD."""
    hints = {**typing.get_type_hints(TrainConfig), **{f"schedule.{k}": v for k, v in typing.get_type_hints(WarmupSchedule).items()}}
    made = dict(_TRAIN_OWN_OPTIONS, tasks=_with_task_options("train"))
    for name, flag in FLAGS.items():
        kind = flag.type() if callable(flag.type) and not isinstance(flag.type, type) else flag.type
        kind = plain_type(hints[name]) if kind is None else kind
        flag_kwargs = dict(is_flag=True, default=None) if kind is bool else dict(type=None if kind is str else kind)
        if kind == typing.Tuple[str, ...]:  # a tuple of strings: the option is given once per value
            flag_kwargs = dict(multiple=True)
        words = flag.help() if callable(flag.help) else flag.help
        made[name] = click.option(flag.name, name, help=_with_default(words, name), **flag_kwargs)
    for f in fields(WarmupSchedule):
        made[f"schedule.{f.name}"] = click.option(f.metadata["flag"], f"schedule_{f.name}", type=hints[f"schedule.{f.name}"],
                                                  help=_with_default(f.metadata["help"], f"schedule.{f.name}"))
    assert set(made) == set(_TRAIN_HELP_ORDER), "every train option has its place in --help"
    for name in reversed(_TRAIN_HELP_ORDER):
        command = made[name](command)
    return command


@main.command("train")
@_train_options
@reports_errors
def train_command(run_dir, config_file, **given):
    """Train a model for a task (--task: a classifier by default) under tf.distribute and write RUN."""
    # Before TensorFlow's import, which reads it: tf.keras is tf-keras, as pipeline.train has it. Set only
    # there, TensorFlow had already loaded Keras 3 (and scikit-learn and SciPy with it) for nothing.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from pipeline.rundir.run import artifact
    from pipeline.training.config import config_from_flags

    # Refused options, config files and weights files answer before TensorFlow loads (train_model checks again).
    config = config_from_flags(given, config_file).validate()
    from pipeline import train

    out = train.train_model(config, run_dir)
    manifest, report = (out / artifact(key).name for key in ("manifest", "report"))
    if manifest.exists():  # a non-chief worker writes nothing
        click.echo(f"run written to {out}" + (f"; report: {report}" if report.exists() else ""))


@main.command("prepare")
@click.argument("folder", type=click.Path())
@click.option("--task", type=click.Choice(tasks.NAMES), default=tasks.DEFAULT, show_default=True,
              help="the task FOLDER's data is for: classify, FOLDER of class folders; the other tasks, FOLDER is a data "
              "spec of theirs (see `pipeline train --help`'s --data)")
@click.option("--out", required=True, help="folder for the shards and labels.txt: local or gs://bucket/path")
@click.option("--seed", type=int, default=1234, show_default=True, help="seed of the shuffle")
@click.option("--shard-mb", type=float, default=100.0, show_default=True, help="target shard size in MB")
@click.option("--jpeg-quality", type=int, default=95, show_default=True, help="quality for re-encoding images that are not JPEG")
@click.option("--images", multiple=True, help=COCO_IMAGES_HELP + "; repeat for more, searched in order")
@reports_errors
def prepare_command(folder, task, out, seed, shard_mb, jpeg_quality, images):
    """Write FOLDER's class folders as TFRecord shards (Kaggle TPU flowers schema) and labels.txt; with another --task,
    that task's data (COCO or YOLO layouts) as TFRecords in its schema (detection: the TF Object Detection API's)."""
    from pipeline import prepare

    config = prepare.PrepareConfig(seed=seed, shard_mb=shard_mb, jpeg_quality=jpeg_quality, images=tuple(images))
    result = prepare.write_shards(config, folder, out, task)
    click.echo(f"wrote {result.count} records in {len(result.shards)} shard(s) and {result.labels_path}"
               + (f"; {result.reencoded} image(s) were not JPEG and were re-encoded (their pixels changed)" if result.reencoded else ""))
    click.echo(f"train on them with: pipeline train{tasks.option(task)} --data '{result.pattern}' --out RUN")


@main.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--int8", "int8", is_flag=True, help="full-integer int8 (the Edge TPU's format), calibrated on training images")
@click.option("--float16", "float16", is_flag=True, help="float16 weights, float32 compute")
@click.option("--dynamic-range", "dynamic_range", is_flag=True, help="int8 weights, float activations")
@click.option("--calibration-samples", type=int, help="int8: training images to calibrate on (default 300)")
@click.option("--calibration-data", type=click.Path(dir_okay=False),
              help="int8: a .npy of uint8 images [N,S,S,3] to calibrate on instead of the training split")
@click.option("--io-type", type=click.Choice(["uint8", "int8"]), help="int8: input/output type (default uint8: raw pixels)")
@click.option("--per-tensor", is_flag=True, help="int8: one scale per weight tensor instead of per channel")
@click.option("--qat-epochs", type=int, default=0, help="int8: quantization-aware fine-tuning epochs first (default 0)")
@click.option("--remedy", is_flag=True, help="int8: when the model fails the parity gate on a tuning split of the training "
              "data, try repairs cheapest first (calibration, equalization, bias correction, per-channel, QAT) that keep the Edge TPU "
              "mapping; exit 1 if none passes")
@click.option("--clients", "clients", default="none", help="with --remedy: clients whose feed the ladder judges too (the "
              "int8 model fed the tuning views as each client feeds them, against float fed the same), comma-separated: "
              "pycoral, mediapipe, all or none (default none)")
@click.option("--layer-errors/--no-layer-errors", default=True, show_default=True,
              help="int8: write quantization.json, the per-layer error of the int8 model against float (it converts the "
              "model again, and the float model too when none was exported: about half of the export's time; a detector's export writes none)")
@_with_task_options("export")
@reports_errors
def export_command(run_dir, int8, float16, dynamic_range, calibration_samples, calibration_data, io_type, per_tensor, qat_epochs,
                   remedy, clients, layer_errors, **task_given):
    """Convert RUN's SavedModel to TFLite at batch 1 (float32 unless a mode is given)."""
    from pathlib import Path

    from pipeline import export
    from pipeline.errors import ConfigError
    from pipeline.inference.client_scores import parse_clients

    chosen = [mode for flag, mode in ((int8, export.Mode.INT8), (float16, export.Mode.FLOAT16),
                                      (dynamic_range, export.Mode.DYNAMIC_RANGE)) if flag]
    if len(chosen) > 1:
        raise ConfigError(f"got {' and '.join('--' + m.value for m in chosen)}; expected at most one mode")
    config = export.ExportConfig(mode=chosen[0] if chosen else export.Mode.FLOAT32, calibration_samples=calibration_samples,
                                 io_type=io_type, per_tensor=per_tensor, qat_epochs=qat_epochs, repair=remedy,
                                 calibration_data=Path(calibration_data) if calibration_data else None,
                                 clients=parse_clients(clients), layer_errors=layer_errors,
                                 task_options=_given(task_given, "export"))
    result = export.export_model(config, Path(run_dir))
    click.echo(result.table)
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(f"wrote {result.model_path} and {result.sidecar_path.name}")
    gate.enforce(list(result.failures))  # --remedy and nothing passed: the best attempt was written, exit 1


@main.command("parity")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--data", "data_spec", help="held-out data spec instead of the run's recorded split")
@click.option("--device-results", type=click.Path(dir_okay=False), multiple=True,
              help="from the device: PREDICTIONS.json of `edge evaluate`, BENCH.json of `edge bench --json` (its time "
                   "per inference, put beside the cost model's prediction), or both (repeat the option)")
@click.option("--max-drop", type=float, help=f"{MAX_DROP_HELP} (default {GATE.max_drop:g})")
@click.option("--min-agreement", type=float, help=MIN_AGREEMENT_HELP)
@click.option("--min-accuracy", type=float, help=MIN_ACCURACY_HELP)
@_with_task_options("parity")
@click.option("--clients", "clients", help=CLIENTS_HELP)
@click.option("--bundle", "bundle_dir", type=click.Path(file_okay=False), help="write an evaluation bundle for the device to DIR and stop")
@reports_errors
def parity_command(run_dir, data_spec, device_results, max_drop, min_agreement, min_accuracy, clients, bundle_dir, **task_given):
    """Compare float, int8 (CPU) and Edge TPU answers on the held-out images; exit 1 when the gate fails."""
    from pipeline import parity
    from pipeline.errors import ConfigError
    from pipeline.inference.client_scores import parse_clients
    from pipeline.inference.device_timing import sort

    device = sort(device_results)  # the answers (edge evaluate) and the time (edge bench --json), either or both
    options = {"device_results": device.predictions, "device_timing": device.timing, "max_drop": max_drop,
               "min_agreement": min_agreement, "min_accuracy": min_accuracy, "clients": None if clients is None else parse_clients(clients)}
    given = {k: v for k, v in options.items() if v is not None}
    task_given = _given(task_given, "parity")
    if bundle_dir:
        if given or task_given:
            named = dict.fromkeys("--" + k.replace("_", "-").replace("device-timing", "device-results") for k in {**given, **task_given})
            raise ConfigError(f"{', '.join(named)} apply to the comparison, which --bundle "
                              "does not run (it only writes the bundle); leave them out, or drop --bundle")
        from pipeline.inference.bundle import write_bundle

        out = write_bundle(run_dir, bundle_dir, data_spec)
        click.echo(f"bundle written to {out}; on the device run:\n"
                   f"  edge evaluate {out}/model_int8_edgetpu.tflite --data {out} --out predictions.json --edgetpu\n"
                   f"then here: pipeline parity {run_dir}{f' --data {shlex.quote(data_spec)}' if data_spec else ''} "
                   "--device-results predictions.json")
        return
    result = parity.check_parity(parity.ParityConfig(data=data_spec, **given, task_options=task_given), run_dir)
    click.echo(result.report["summary"])  # the task's table (its Comparison.summary)
    click.echo(f"reports in {result.report_dir}")
    gate.enforce(result.failures)


@main.command("predict")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--data", "data_specs", required=True, multiple=True,
              help="'test/*.tfrec' (records with image and id; class optional) | folder of images | image file; local or gs://; repeatable")
@click.option("--out", required=True, help="file to write: submission.csv (Kaggle's id,label) or .json")
@click.option("--model", type=click.Choice(["float", "int8", "edgetpu"]), default="float", show_default=True,
              help="the SavedModel in batches, or the TFLite model as the device runs it")
@_with_task_options("predict")
@click.option("--format", "out_format", type=click.Choice(["csv", "json"]), help="default: json for a .json --out, else csv")
@click.option("--skip-bad", is_flag=True, help="leave out (and list) inputs with no id, a repeated id or an undecodable image")
@click.option("--batch-size", type=int, help="float: global batch, split across replicas (default 128)")
@click.option("--tpu", help="float: TPU name, 'local' or grpc://host:8470; default: $TPU_NAME")
@click.option("--cpu-replicas", type=int, help="float: MirroredStrategy over N logical CPU devices (testing)")
@click.option("--threads", type=int, help="int8/edgetpu: CPU interpreter threads")
@click.option("--workers", type=int, help="int8/edgetpu: threads decoding the next images while the model runs (default: one per core; one fewer on the CPU interpreter)")
@click.option("--overwrite", is_flag=True, help="replace --out when it exists (never a file inside a run directory)")
@reports_errors
def predict_command(run_dir, data_specs, out, model, out_format, skip_bad, batch_size, tpu, cpu_replicas, threads, workers,
                    overwrite, **task_given):
    """Predict unlabeled data with RUN's model and write a Kaggle submission (id,label) or JSON."""
    from pathlib import Path

    from edge.files.outputs import check_output
    from pipeline import predict
    from pipeline.errors import ConfigError

    if not out.startswith("gs://"):  # (predict refuses gs:// itself)
        check_output(Path(out), overwrite, "--out", inputs=[Path(d) for d in data_specs if "://" not in d], error=ConfigError)

    config = predict.PredictConfig(data=data_specs, out=out, model=model, format=out_format, skip_bad=skip_bad,
                                   batch_size=batch_size, tpu=tpu, cpu_replicas=cpu_replicas, threads=threads, workers=workers,
                                   task_options=_given(task_given, "predict"))
    say = functools.partial(click.echo, err=True)
    result = predict.predict_unlabeled(config, run_dir, say=say, progress=_progressbar)
    for line in result.skipped:
        say(f"skipped: {line}")
    click.echo(f"wrote {result.out}: {result.written} predictions ({result.format})"
               + (f", {len(result.skipped)} inputs skipped" if result.skipped else ""))
    click.echo(f"{result.images_per_second:.1f} images/s ({result.written} in {result.seconds:.2f} s, model loaded in "
               f"{result.load_seconds:.2f} s before): {result.what}")


@contextlib.contextmanager
def _progressbar(total, label):
    """A progress bar on stderr (drawn on a terminal only, as click does), handing out its update()."""
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        yield bar.update


@main.command("run")
@click.option("--task", type=click.Choice(tasks.NAMES), help="what the model learns (see `pipeline train --help`); default: classify, or the reused run's")
@click.option("--out", "run_dir", type=click.Path(file_okay=False), help="run directory; default runs/<data>-<model>")
@click.option("--data", "data_spec", help="data spec (see `pipeline train --help`); default: the task's built-in set, or the reused run's")
@click.option("--images", multiple=True, help=COCO_IMAGES_HELP + " (see `pipeline train --help`)")
@click.option("--model", help="registry model; default small_cnn, or the reused run's")
@click.option("--image-size", type=int, help="square input size; default: the model's")
@click.option("--epochs", type=int, help="training epochs; default: train's")
@click.option("--max-drop", type=float, default=GATE.max_drop, show_default=True, help="parity gate: " + MAX_DROP_HELP)
@click.option("--min-agreement", type=float, default=GATE.min_agreement, show_default=True, help="parity gate: " + MIN_AGREEMENT_HELP)
@click.option("--min-accuracy", type=float, help="parity gate: " + MIN_ACCURACY_HELP)
@click.option("--remedy", is_flag=True, help="repair an int8 model that fails the gate on a tuning split (see `pipeline export --help`)")
@click.option("--clients", "clients", default="none", help="parity gate: " + CLIENTS_HELP)
@click.option("--require-full-mapping", is_flag=True, help="exit 1 at the end (after parity) when any op would run on the CPU")
@_with_task_options("run")
@reports_errors
def run_command(task, run_dir, data_spec, images, model, image_size, epochs, max_drop, min_agreement, min_accuracy,
                remedy, clients, require_full_mapping, **task_given):
    """Train, export int8, compile (or pre-flight), and check parity, on the built-in data by default."""
    from pipeline import end_to_end
    from pipeline.inference.client_scores import parse_clients

    config = end_to_end.RunConfig(task=task, data=data_spec, images=tuple(images), model=model, image_size=image_size, epochs=epochs,
                                  max_drop=max_drop, min_agreement=min_agreement, min_accuracy=min_accuracy, remedy=remedy,
                                  clients=parse_clients(clients, task), require_full_mapping=require_full_mapping,
                                  task_options=_given(task_given, "run"))
    result = end_to_end.run_all(config, run_dir or end_to_end.default_run_dir(config), say=click.echo)
    gate.enforce(result.failures)


@main.command("compile")
@click.argument("target", type=click.Path())
@click.option("--check-only", is_flag=True, help="pre-flight analysis only (no compiler needed); TARGET may be a .tflite file")
@click.option("--json", "as_json", is_flag=True, help="print the pre-flight as one JSON object on stdout (messages go to stderr)")
@click.option("--require-full-mapping", is_flag=True, help="exit non-zero when any op would run on the CPU")
@click.option("--compiler", type=click.Path(dir_okay=False), help="path to edgetpu_compiler (default: on PATH)")
@click.option("--timeout", type=int, help="compile timeout, seconds (default 180)")
@click.option("--num-segments", type=int, help="split into N segments for pipelining on N Edge TPUs")
@click.option("--min-runtime-version", type=int, help="oldest Edge TPU runtime version to support")
@click.option("--intermediate-tensors", help="comma-separated tensor names to output from the Edge TPU op")
@click.option("--search-delegate", is_flag=True, help="on failure, retry with an earlier stopping point (-d)")
@click.option("--delegate-search-step", type=int, help="step in ops for --search-delegate (-k)")
@click.option("--max-latency-ms", type=float, help="exit non-zero when the cost model predicts more ms per inference "
              "(on --latency-device), naming the largest input size or width that fits")
@click.option("--latency-device", type=click.Choice(["usb3", "devboard", "usb2"]), default="usb3", show_default=True,
              help="the device --max-latency-ms is judged on: USB Accelerator on USB 3.0, the Dev Board (PCIe), or "
              "the USB Accelerator on USB 2.0 (a Raspberry Pi 3's port)")
@click.option("--require-on-chip", is_flag=True, help="exit non-zero when the cost model predicts any parameter streamed "
              "from the host (not cached in the Edge TPU's on-chip memory), naming the largest width that fits")
@reports_errors
def compile_command(target, as_json, **options):
    """Predict the Edge TPU mapping of RUN (or a .tflite file), then compile RUN with edgetpu_compiler."""
    import json

    from pipeline import compile as compile_mod

    say = functools.partial(click.echo, err=True)  # stdout carries only the JSON
    show = (lambda prediction, estimate: click.echo(json.dumps(
        dict(prediction.as_dict(), cost=estimate.as_dict() if estimate else None)))) if as_json else None
    result = compile_mod.compile_for_edgetpu(compile_mod.CompileConfig(**options), target, say=say, show=show)
    for model in result.models:
        say(f"wrote {model}")
    if result.report_path:
        say(f"report in {result.report_path}")


@main.command("import")
@click.argument("model", type=click.Path())
@click.option("--data", "data_spec", required=True, help="labelled images of the model's classes, in a form `pipeline train "
              "--task TASK --data` takes: calibration for --int8 and the held-out split parity compares on")
@click.option("--out", "run_dir", required=True, type=click.Path(file_okay=False), help="run directory to write")
@click.option("--task", type=click.Choice(list(tasks.NAMES)), default=tasks.DEFAULT, show_default=True,
              help="what the model does: " + "; ".join(f"{task}, {words}" for task, words in task_options.said("IMPORTS")))
@click.option("--val-data", help="held-out data instead of a split of --data")
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False), help="class names in the model's output order, "
              "one a line (default: --data's class folders, sorted)")
@click.option("--image-size", type=int, help="input size, for a model whose height and width are dynamic")
@click.option("--layout", type=click.Choice(["nhwc", "nchw"]), help="input layout, for a model whose shape does not say")
@click.option("--input-mean", "mean", help="normalization: value = (pixel - mean) / std, pixels 0..255; one number or R,G,B")
@click.option("--input-std", "std", help="normalization: one number or R,G,B (with --input-mean)")
@click.option("--input-range", "value_range", help="normalization as the range pixels 0..255 map to: LOW,HIGH (e.g. 0,1 or -1,1)")
@click.option("--channel-order", type=click.Choice(["rgb", "bgr"]), default="rgb", show_default=True,
              help="the channel order the model was trained on")
@click.option("--fit", type=click.Choice(["stretch", "letterbox"]), default="stretch", show_default=True,
              help="how a picture is fitted to the input")
@click.option("--heldout-fraction", type=float, default=0.2, show_default=True, help="share of --data held out (no --val-data)")
@click.option("--tuning-fraction", type=float, help="share of --val-data set aside for `export --remedy` to choose a "
              "repair on (images the model never trained on); the rest is held out (default 0.25)")
@click.option("--seed", type=int, default=1234, show_default=True, help="seed of the held-out and tuning splits")
@reports_errors
def import_command(model, data_spec, run_dir, task, val_data, labels_file, image_size, layout, mean, std, value_range,
                   channel_order, fit, heldout_fraction, tuning_fraction, seed):
    """Import a classifier (.keras, .h5, SavedModel folder, .onnx), or an Ultralytics YOLO detector or pose model (.onnx,
    --task detect or pose) as a run that export, compile, parity and edge read."""
    from pathlib import Path

    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as train: tf.keras is tf-keras in the later stages
    from pipeline import import_model as importing
    from pipeline.importing.contract import Given

    if tuning_fraction is not None and not val_data:
        from pipeline.errors import ConfigError

        raise ConfigError(f"--tuning-fraction {tuning_fraction} sets aside a share of --val-data, and none was given; "
                          "expected --val-data SPEC with it (the model may have trained on any --data image)")
    given = Given(image_size=image_size, layout=layout, mean=_numbers_option(mean, "--input-mean"),
                  std=_numbers_option(std, "--input-std"), value_range=_numbers_option(value_range, "--input-range", 2),
                  channel_order=channel_order, fit=fit)
    config = importing.ImportConfig(model=Path(model), data=data_spec, task=task, val_data=val_data,
                                    labels_file=Path(labels_file) if labels_file else None, given=given,
                                    heldout_fraction=heldout_fraction, seed=seed,
                                    **({} if tuning_fraction is None else {"tuning_fraction": tuning_fraction}))
    result = importing.import_model(config, Path(run_dir))
    from pipeline.report import write as write_report

    write_report(result.run_dir)  # RUN/report.html, as every stage rewrites it; a failure to render only warns
    c = result.contract
    click.echo(f"imported {model} ({result.format}, {task}): {c.image_size}x{c.image_size} {c.layout.upper()} {c.channel_order.upper()}, "
               f"{c.norm.source}; {len(result.labels)} classes; {result.heldout_examples} held-out images"
               + (f", {result.tuning_examples} more set aside for `export --remedy`" if result.tuning_examples else ""))
    click.echo(f"run written to {result.run_dir} in {result.seconds:.1f} s; next: pipeline export {result.run_dir} --int8")


def _numbers_option(text, flag, count=None):
    """'1' or '1,2,3' as a tuple of floats (None when not given); ConfigError naming `flag` otherwise."""
    from pipeline.errors import ConfigError

    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"{flag} {text!r}; expected numbers separated by commas") from None
    if count is not None and len(values) != count:
        raise ConfigError(f"{flag} {text!r}; expected {count} numbers separated by a comma")
    return values


@main.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--latency", type=click.Path(dir_okay=False),
              help="JSON written by `edge bench MODEL --json FILE` on the device: kept in RUN and shown")
@reports_errors
def report_command(run_dir, latency):
    """Write RUN/report.html: one self-contained page of what the run found (every stage also rewrites it)."""
    from pipeline import report
    from pipeline.report import latency as bench_file

    if latency:
        bench_file.record(run_dir, latency)
    click.echo(f"wrote {report.write(run_dir, strict=True)}")
