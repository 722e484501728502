"""The evaluation bundle for the device: what `pipeline parity RUN --bundle DIR` writes.

    edge evaluate DIR/model_int8_edgetpu.tflite --data DIR --out predictions.json --edgetpu   (on the device)
    pipeline parity RUN --device-results predictions.json                                    (back here)

The held-out images byte for byte as stored (a JPEG stays that JPEG, so the device decodes and resizes
it itself) with each one's identity, label and sha256, the labels, the run's int8 and Edge TPU models
with their sidecars, and a manifest with the models' sha256 and the pixel contract. It only reads the run.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Optional, Tuple

import numpy as np

from edge.image_files import IMAGE_SUFFIXES
from edge.integrity import sha256_bytes, sidecar_path
from pipeline import data as data_mod
from pipeline.errors import PipelineError
from pipeline.rundir.files import staged_path, write_json_atomic, write_text_atomic
from pipeline.rundir.run import Run

DEVICE_MODELS = ("model_int8", "model_int8_edgetpu")  # what a bundle ships, and so what device results may come from


def write_bundle(run_dir: Path, bundle_dir: Path, data: Optional[str] = None) -> Path:
    """The held-out images byte for byte as stored (a JPEG stays that JPEG, so the device decodes and
    resizes it itself), the labels, the run's int8 and Edge TPU models with their sidecars, and a
    manifest with the models' sha256 and the pixel contract."""
    run_dir, bundle_dir = Path(run_dir), Path(bundle_dir)
    if bundle_dir.exists() and any(bundle_dir.iterdir()):
        raise PipelineError(f"bundle folder {bundle_dir} is not empty; expected a new or empty folder")
    run = Run.open(run_dir)
    models = [key for key in DEVICE_MODELS if run.has(key)]
    if "model_int8" not in models:
        run.artifact("model_int8")  # raises: run export first
    from pipeline.parity import heldout_examples

    heldout = heldout_examples(run, data)
    with staged_path(bundle_dir) as staging:
        (staging / "heldout").mkdir(parents=True)
        entries = []
        for i, (example, original) in enumerate(zip(heldout.examples, heldout.originals)):
            name, data = bundle_file(i, example, original)
            (staging / name).write_bytes(data)
            entries.append({"file": name, "id": example.id, "label": example.label, "sha256": sha256_bytes(data)})
        write_json_atomic(staging / "bundle.json", {"schema_version": 1, "labels": run.labels, "images": entries})
        write_text_atomic(staging / "labels.txt", "\n".join(run.labels) + "\n")
        device_artifacts = {}
        for key in models:
            if key != "model_int8":
                run.check_compiled_is_current(key)
            model = run.artifact(key)
            shutil.copy2(model, staging / model.name)
            sidecar = sidecar_path(model)
            if sidecar.exists():
                shutil.copy2(sidecar, staging / sidecar.name)
            # Paths as laid out in the bundle: every model sits at its top level.
            device_artifacts[key] = {**run.entry(key), "path": model.name}
        # Only the model entries: the device checks each model's sha256 against this manifest.
        write_json_atomic(staging / "manifest.json", {"schema_version": run.manifest["schema_version"], "labels": run.labels,
                                                      "preprocessing": run.contract, "artifacts": device_artifacts})
    return bundle_dir


def bundle_file(i: int, example: data_mod.Example, original: Any) -> Tuple[str, bytes]:
    """Held-out image `i` as the bundle holds it: (path in the bundle, bytes). The stored bytes as they are;
    an array data set, which has no file, as a PNG (lossless, and the same bytes for the same pixels)."""
    if isinstance(original, np.ndarray):
        import io

        from PIL import Image

        out = io.BytesIO()
        Image.fromarray(original).save(out, format="PNG")
        return f"heldout/{i:05d}.png", out.getvalue()
    return f"heldout/{i:05d}{_suffix(example.id, original)}", original


_FORMAT_SUFFIX = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "BMP": ".bmp", "WEBP": ".webp"}


def _suffix(example_id: str, data: bytes) -> str:
    """The file name ending for an encoded image: its own when the id is a file name, else from its format."""
    import io

    from PIL import Image

    own = Path(example_id).suffix.lower()
    if own in IMAGE_SUFFIXES:
        return own
    with Image.open(io.BytesIO(data)) as image:
        return _FORMAT_SUFFIX.get(image.format or "", ".img")
