"""TFLite metadata in every model the pipeline writes, so the file stands alone.

    from pipeline import metadata
    written = metadata.embed(model_bytes, manifest, run_dir, "model_int8.tflite", contract, export_facts)
    written.model        # the model with its metadata, or unchanged (written.notes say why)

What a model carries (tflite-support's metadata schema, read by MediaPipe, the TFLite Task Library
and `edge`): name, description, version; its input as an RGB image with the NormalizationOptions it
truly expects (the pixel contract's mean and std); `labels.txt` as the output's label file; and
`edgeflow_model.json` (the sidecar's facts without the sha256: labels, image size, input quantization,
the pixel contract, and the run's provenance: data identity digests and counts, training, export,
versions; not the held-out list) as the model's own associated file.

The writer is tflite-support 0.4.4's metadata API, run in its own environment: it pins protobuf < 4,
and TensorFlow 2.21 does not import with protobuf 3.20 (measured; README "Model metadata").
EDGEFLOW_METADATA_PYTHON names that environment's Python (`.ci/metadata-env --make DIR` builds it).
Without it a model is written without metadata and the notes say so: pycoral and `edge` still feed
an int8 model correctly (its input convention needs no metadata), but MediaPipe prints no class names.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

from edge.errors import EdgeError
from edge.model_metadata import EDGEFLOW_RECORD, embedded_record, read_metadata
from edge.labels import labels_from_model
from pipeline.errors import PipelineError

WRITER_ENV = "EDGEFLOW_METADATA_PYTHON"
TOOL = Path(__file__).with_name("tflite_support_tool.py")
LABELS_FILE = "labels.txt"
WRITER = "tflite-support 0.4.4 metadata API"
RECORD_SCHEMA = 1
TIMEOUT_S = 300


class Written(NamedTuple):
    model: bytes  # the model with its metadata (unchanged when no writer is set up)
    facts: Optional[Dict[str, Any]]  # for the manifest: what was packed, by which writer; None = no metadata
    notes: List[str]  # what the user should know (no writer set up)


def writer_python() -> Optional[str]:
    """The metadata writer's interpreter, from EDGEFLOW_METADATA_PYTHON; None when unset."""
    return os.environ.get(WRITER_ENV) or None


def _missing_note() -> str:
    return (f"no TFLite metadata written: {WRITER_ENV} is not set. Build the writer's environment with "
            f"`.ci/metadata-env --make DIR` and set {WRITER_ENV}=DIR/bin/python (tflite-support cannot share "
            "TensorFlow 2.21's environment); without metadata MediaPipe and the TFLite Task Library print no class names")


def record(manifest: dict, run_dir: Path, model_name: str, contract: Dict[str, Any], export_facts: Dict[str, Any]) -> dict:
    """edgeflow_model.json: what the model needs to be fed and where it came from (no sha256, no held-out list)."""
    identity = manifest.get("data", {}).get("identity", {})
    data = {"train_spec": manifest.get("data", {}).get("train", {}).get("spec"), "classes": identity.get("classes")}
    for split in ("train", "heldout"):
        if isinstance(identity.get(split), dict):  # counts and digests only: the examples list stays in the run
            data[split] = {k: v for k, v in identity[split].items() if k != "examples"}
    training = manifest.get("training", {})
    return {
        "schema_version": RECORD_SCHEMA,
        "model": model_name,
        "labels": list(manifest["labels"]),
        "image_size": int(manifest["model"]["image_size"]),
        "input": export_facts.get("input"),
        "preprocessing": contract,
        "provenance": {
            "run": Path(run_dir).resolve().name,
            "trained": manifest.get("stages", {}).get("train", {}).get("finished"),
            "model": manifest.get("model"),
            "data": data,
            "training": {k: training.get(k) for k in ("epochs", "seed", "strategy", "mixed_precision") if k in training},
            "export": {k: v for k, v in export_facts.items() if k not in ("input", "output", "preprocessing")},
            "versions": manifest.get("versions"),
        },
    }


def _request(manifest: dict, run_dir: Path, model_name: str, contract: Dict[str, Any], export_facts: Dict[str, Any]) -> dict:
    labels = list(manifest["labels"])
    model = manifest["model"]
    rec = record(manifest, run_dir, model_name, contract, export_facts)
    identity = rec["provenance"]["data"].get("train") or {}
    mode = export_facts.get("mode", "float32")
    mean, std = contract["mean"], contract["std"]
    return {
        "op": "write",
        "name": f"{model['name']} {mode} ({Path(run_dir).resolve().name})",
        "description": (f"{model['name']} image classifier for {len(labels)} classes ({', '.join(labels[:10])}"
                        f"{', ...' if len(labels) > 10 else ''}), {mode}, made by edgeflow: RGB {model['image_size']}x"
                        f"{model['image_size']} input normalized (pixel - mean) / std; scores in the label file's order"),
        "version": f"trained {rec['provenance']['trained']}; training data sha256 {str(identity.get('sha256'))[:16]}",
        "author": "edgeflow",
        "input": {"name": "image", "description": f"RGB image, {model['image_size']}x{model['image_size']}, "
                                                  f"(pixel - {_short(mean)}) / {_short(std)}", "mean": mean, "std": std},
        "output": {"name": "scores", "description": f"probability of each of the {len(labels)} classes"},
        "labels": labels,
        "labels_file": LABELS_FILE,
        "files": [{"name": EDGEFLOW_RECORD, "text": json.dumps(rec, indent=1, sort_keys=True),
                   "description": "edgeflow: the pixel contract this model is fed by (decode, resize, mean, std) and "
                                  "the run it came from"}],
    }


def _short(values) -> str:
    return f"{values[0]:g}" if len(set(values)) == 1 else "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _run_tool(python: str, request: dict, model: bytes, source: Optional[bytes] = None) -> bytes:
    with tempfile.TemporaryDirectory(prefix="edgeflow-metadata-") as scratch:
        folder = Path(scratch)
        (folder / "in.tflite").write_bytes(model)
        request = {**request, "model": str(folder / "in.tflite"), "out": str(folder / "out.tflite")}
        if source is not None:
            (folder / "source.tflite").write_bytes(source)
            request["source"] = str(folder / "source.tflite")
        (folder / "request.json").write_text(json.dumps(request))
        try:
            done = subprocess.run([python, str(TOOL), str(folder / "request.json")], capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise PipelineError(f"the metadata writer {python} ({WRITER_ENV}) could not run: {err}; expected a Python with "
                                "tflite-support 0.4.4 (`.ci/metadata-env --make DIR`)") from err
        if done.returncode != 0:
            last = "\n".join(done.stderr.strip().splitlines()[-6:])
            raise PipelineError(f"the metadata writer {python} ({WRITER_ENV}) failed (exit {done.returncode}); expected a "
                                f"Python with tflite-support 0.4.4 (`.ci/metadata-env --make DIR`). Last output:\n{last}")
        return (folder / "out.tflite").read_bytes()


def embed(model_bytes: bytes, manifest: dict, run_dir: Path, model_name: str, contract: Dict[str, Any],
          export_facts: Dict[str, Any]) -> Written:
    """The model with its metadata, read back and checked; unchanged with a note when no writer is set up."""
    python = writer_python()
    if python is None:
        return Written(model_bytes, None, [_missing_note()])
    request = _request(manifest, Path(run_dir), model_name, contract, export_facts)
    written = _run_tool(python, request, model_bytes)
    _check(written, model_name, request)
    return Written(written, {"writer": WRITER, "files": [LABELS_FILE, EDGEFLOW_RECORD]}, [])


def copy(source: bytes, target: bytes, name: str) -> bytes:
    """`target` with `source`'s metadata and packed files (a compiled model whose compiler dropped them)."""
    python = writer_python()
    if python is None:
        raise PipelineError(f"{name} lost the int8 model's TFLite metadata in compiling, and {WRITER_ENV} is not set to "
                            "put it back; build the writer with `.ci/metadata-env --make DIR` and set "
                            f"{WRITER_ENV}=DIR/bin/python")
    written = _run_tool(python, {"op": "copy"}, target, source)
    if read_metadata(written, name) != read_metadata(source, "the int8 model"):
        raise PipelineError(f"copying the int8 model's metadata onto {name} did not give the same metadata back")
    return written


def _check(model: bytes, name: str, request: dict) -> None:
    """What was written reads back, with edge's own reader, as what was asked for."""
    try:
        meta = read_metadata(model, name)
        labels = labels_from_model(model, name=name)
        packed = embedded_record(model, name)
    except EdgeError as err:
        raise PipelineError(f"the metadata written into {name} does not read back: {err}") from err
    asked = json.loads(request["files"][0]["text"])
    if (labels != request["labels"] or packed != asked or list(meta.mean or ()) != request["input"]["mean"]
            or list(meta.std or ()) != request["input"]["std"]):
        raise PipelineError(f"the metadata written into {name} reads back differently (labels {labels}, mean {meta.mean}, "
                            f"std {meta.std}); expected what was asked for")


def restore(source: Path, compiled: Path) -> bool:
    """Put `source`'s metadata back into `compiled` when the compiler dropped it; True when it did.
    Compiler 16 keeps it (Google's compiled twin of mobilenet_v1_0.25_128_quant keeps its metadata and labels)."""
    data, out = Path(source).read_bytes(), Path(compiled).read_bytes()
    try:
        if not read_metadata(data, Path(source).name).present or read_metadata(out, Path(compiled).name).present:
            return False
    except EdgeError:
        return False  # not a readable model: the compile stage's own checks refuse it, naming what is wrong
    Path(compiled).write_bytes(copy(data, out, Path(compiled).name))
    return True
