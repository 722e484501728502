"""`pipeline predict` of a classification run (pipeline/predict.py is the stage): --model float runs the SavedModel
in padded batches under the strategy training would choose (pipeline/inference/batched.py), the images decoded by
training's input pipeline; --model int8 | edgetpu the TFLite model one image at a time through the device's runner
and the pixel contract. Writes a Kaggle CSV (id,label) or JSON, in the inputs' order.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np

from edge.pixels import preprocess
from edge.files.prefetch import prefetch
from pipeline.data import unlabeled
from pipeline.errors import ConfigError, DataError, PipelineError
from pipeline.inference import output
from pipeline.rundir.files import write_json_atomic, write_text_atomic
from pipeline.rundir.run import Run


MODELS = {"float": "saved_model", "int8": "model_int8", "edgetpu": "model_int8_edgetpu"}  # --model -> artifact key
# The float model's global batch when --batch-size is not given: 16 per core on a v3-8 TPU. On a 2-core CPU
# neither 32 nor 128 wins for every model (bench/results/predict.md), so one default serves everywhere.
DEFAULT_BATCH = 128


def predict(config, run: Run, say: Callable[[str], None], progress) -> tuple:
    """Predict every input of config.data and write config.out: the fields of the stage's PredictResult, in order."""
    model_path, chosen, batch = _plan(config, run, say)
    inputs = unlabeled.open_inputs(config.data)
    problems = dict(inputs.problems)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    scored = _score(config, run, model_path, chosen, batch, inputs, problems, progress)
    keep = inputs.kept(problems)
    kept = np.flatnonzero(keep)
    if not len(kept):
        raise DataError(f"every one of the {len(inputs.items)} inputs was left out (--skip-bad); nothing to write")
    wrong = np.flatnonzero(scored.times != keep)  # every kept input exactly once, no other: the padding dropped, nothing lost
    if len(wrong):
        raise PipelineError(f"internal error: {len(wrong)} inputs were scored other than once if kept, never if left out "
                            f"(the first, {inputs.items[wrong[0]].name}, {int(scored.times[wrong[0]])} times)")
    skipped = [problems[i] for i in sorted(problems)]
    out = _write(config, run, [inputs.items[i].id for i in kept], scored.scores[kept], skipped, scored.decoded_by)
    return (out, config.out_format, len(kept), skipped, scored.load_s, scored.seconds,
            f"{scored.what}; images decoded by {scored.decoded_by}")


def _plan(config, run: Run, say: Callable[[str], None]):
    """(the model file, sha256 checked; the strategy and global batch for the float model, else None, None)."""
    if config.top_k is not None and config.top_k > len(run.labels):
        raise ConfigError(f"--top-k {config.top_k}, the model has {len(run.labels)} classes; expected at most {len(run.labels)}")
    key = MODELS[config.model]
    if config.model == "edgetpu" and run.has(key):
        run.check_compiled_is_current(key)
    model_path = run.artifact(key)  # checks its sha256
    if config.model != "float":
        return model_path, None, None
    from pipeline.importing.run_limits import float_batch
    from pipeline.training import strategy as strategy_mod

    batch = float_batch(run, config.batch_size) or config.batch_size or DEFAULT_BATCH  # an imported model's fixed batch first
    chosen = strategy_mod.choose(config.tpu, config.cpu_replicas or 1)  # before any TF op: logical devices
    if chosen.kind == "multi_worker_mirrored":
        raise ConfigError("predict runs on one machine (a TPU, its GPUs or its CPU) and TF_CONFIG asks for several "
                          "workers; unset TF_CONFIG")
    say(f"strategy: {chosen.description}")
    if batch % chosen.replicas:
        raise ConfigError(f"global batch size {batch} does not divide across {chosen.replicas} replicas; "
                          f"expected a multiple of {chosen.replicas}")
    return model_path, chosen, batch


class _Scored(NamedTuple):
    scores: np.ndarray  # [inputs, classes]; rows of inputs left out are NaN
    times: np.ndarray  # how often each input was scored (1 for each kept one, 0 for the others)
    load_s: float
    seconds: float
    what: str  # the model and how it ran, for the summary line
    decoded_by: str


def _score(config, run: Run, model_path: Path, chosen, batch, inputs: unlabeled.Inputs,
           problems: Dict[int, str], progress) -> _Scored:
    """Every kept input scored once; inputs that cannot be decoded are added to `problems` (refused, or with
    --skip-bad left out)."""
    size = run.image_size
    if config.model == "float":
        problems.update(_undecodable(inputs, inputs.kept(problems), size, progress))
        inputs.refuse_unless_skipping(problems, config.skip_bad)
        scores, scored, load_s, seconds = _float_scores(chosen, batch, model_path, inputs, inputs.kept(problems), size, progress)
        return _Scored(scores, scored, load_s, seconds, f"float SavedModel, global batch {batch}, {chosen.description}",
                       "training's input pipeline (pipeline/data/decode.py)")
    scores, scored, load_s, seconds, bad = _tflite_scores(config, run, model_path, inputs, inputs.kept(problems), size, progress)
    problems.update(bad)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    return _Scored(scores, scored, load_s, seconds, f"{model_path.name} ({config.model}), one image at a time",
                   "the pixel contract (edge.pixels.preprocess), as the device decodes")


def _write(config, run: Run, ids: List[str], scores: np.ndarray, skipped: List[str], decoded_by: str) -> Path:
    out = Path(config.out)
    if config.out_format == "csv":
        write_text_atomic(out, output.csv_text(ids, scores, run.labels, config.top_k))
    else:
        facts = {"run": str(run.dir), "model": config.model, "model_sha256": run.entry(MODELS[config.model])["sha256"],
                 "data": list(config.data), "decoded_by": decoded_by, "skipped": skipped}
        write_json_atomic(out, output.json_object(ids, scores, run.labels, config.top_k, facts), indent=1)
    return out





def _undecodable(inputs: unlabeled.Inputs, keep: np.ndarray, size: int, progress) -> Dict[int, str]:
    """The kept inputs the pixel contract cannot decode (what the device would refuse, predict refuses too),
    checked before the batched pipeline, which cannot leave an image out once it runs."""
    def check(element):
        position, data = element
        preprocess.load_image(data, inputs.items[position].name, (size, size))  # at the contract's reduced JPEG scale

    bad = {}
    with progress(int(keep.sum()), "checking images") as update:
        for (position, _), _, error in prefetch(inputs.encoded(keep), check):
            if error is not None:
                bad[position] = str(error)
            update(1)
    return bad


def _float_scores(chosen, batch: int, model_path: Path, inputs: unlabeled.Inputs, keep: np.ndarray, size: int,
                  progress) -> Tuple[np.ndarray, np.ndarray, float, float]:
    from pipeline.inference.batched import BatchedModel

    started = time.perf_counter()
    model = BatchedModel(str(model_path), chosen)
    loaded = time.perf_counter()
    with progress(int(keep.sum()), "predicting") as update:
        scores, scored = model.scores(unlabeled.decoded(inputs.dataset(keep), size), len(inputs.items), size, batch, update)
    return scores, scored, loaded - started, time.perf_counter() - loaded


def _tflite_scores(config, run: Run, model_path: Path, inputs: unlabeled.Inputs, keep: np.ndarray,
                   size: int, progress) -> Tuple[np.ndarray, np.ndarray, float, float, Dict[int, str]]:
    """The int8 or Edge TPU model through the device's own runner and the run's pixel contract (its version too:
    what its device does with these files), one image at a time, decoding ahead."""
    from edge.answers.runner import Runner

    contract = run.contract_of(MODELS[config.model])
    started = time.perf_counter()
    runner = Runner.with_contract(model_path, contract, edgetpu=True if config.model == "edgetpu" else False,
                                  threads=config.threads)
    loaded = time.perf_counter()
    scores = np.full((len(inputs.items), runner.num_classes), np.nan, np.float32)
    scored = np.zeros(len(inputs.items), np.int64)
    bad: Dict[int, str] = {}
    with progress(int(keep.sum()), "predicting") as update:
        elements = runner.score_files(inputs.encoded(keep), path_of=lambda element: element[1],
                                      name_of=lambda element: inputs.items[element[0]].name, workers=config.workers)
        for (position, _), row, error in elements:
            if error is not None:
                bad[position] = str(error)
            else:
                scores[position] = row
                scored[position] += 1
            update(1)
    return scores, scored, loaded - started, time.perf_counter() - loaded, bad
