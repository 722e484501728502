"""`pipeline run`: every stage, in order, on one run directory; by default on the built-in digits.

    pipeline run --out runs/digits

train -> export (float32, then int8) -> compile (pre-flight only when edgetpu_compiler is not
installed, and it says so) -> parity. A run directory that already holds a trained model is
reused (the later stages run again on it) only when what was asked (--data, --model, --image-size,
--epochs, each when given) is what the run was trained with; otherwise it is refused, the
differences named. Ends with a summary; exits 1 when the parity gate fails.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from pipeline.rundir import manifest as manifest_mod
from pipeline.errors import ConfigError, ManifestError

DEFAULT_DATA = "digits"
DEFAULT_MODEL = "small_cnn"


@dataclass(frozen=True)
class RunConfig:
    data: Optional[str] = None  # data spec for training (and its held-out split for parity); None = digits
    model: Optional[str] = None  # registry model; None = small_cnn (or, reusing a run, whichever it has)
    image_size: Optional[int] = None  # None = the model's default
    epochs: Optional[int] = None  # None = train's default
    max_drop: float = 1.0  # parity gate: allowed top-1 drop of int8 vs float, percentage points
    min_agreement: float = 0.98  # parity gate: required top-1 agreement with the float model
    min_accuracy: Optional[float] = None  # parity gate: top-1 floor; None = better than the majority class


def default_run_dir(config: RunConfig) -> Path:
    data, model = config.data or DEFAULT_DATA, config.model or DEFAULT_MODEL
    name = "digits" if data == "digits" else re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(data.rstrip("/*")).name) or "data"
    return Path("runs") / f"{name}-{model}"


def reuse_differences(config: RunConfig, manifest: dict) -> List[str]:
    """What was asked (options given, None = not given) that the trained run in `manifest` differs in."""
    try:
        recorded = {"data": manifest["data"]["train"]["spec"], "model": manifest["model"]["name"],
                    "image_size": manifest["model"]["image_size"], "epochs": manifest["training"]["epochs"]}
    except (KeyError, TypeError) as err:
        raise ManifestError(f"the manifest does not record {err} of its training; expected one written by `pipeline train`") from err
    asked = {"data": config.data, "model": config.model, "image_size": config.image_size, "epochs": config.epochs}
    return [f"--{key.replace('_', '-')} {asked[key]} (the run has {recorded[key]})"
            for key in asked if asked[key] is not None and asked[key] != recorded[key]]


def run(config: RunConfig, run_dir: Path, say=print):
    """All stages; returns the parity result (its .passed tells whether the gate held)."""
    from pipeline import compile as compile_mod
    from pipeline import export, parity, train

    run_dir = Path(run_dir)
    if (run_dir / manifest_mod.MANIFEST_NAME).exists():
        manifest = manifest_mod.load(run_dir)
        differences = reuse_differences(config, manifest)
        if differences:
            raise ConfigError(
                f"{run_dir} already holds a trained run that differs from what was asked: {'; '.join(differences)}. "
                f"Nothing was changed; choose a new --out to train what was asked, or leave those options out to reuse this run"
            )
        say(f"== train: {run_dir} already holds a trained {manifest['model']['name']} "
            f"({manifest['model']['image_size']}px, {manifest['training']['epochs']} epochs on {manifest['data']['train']['spec']}); reusing it")
    else:
        say("== train")
        options = {"image_size": config.image_size, "epochs": config.epochs}
        train.run(train.TrainConfig(data=config.data or DEFAULT_DATA, model=config.model or DEFAULT_MODEL,
                                    **{k: v for k, v in options.items() if v is not None}), run_dir)
    say("== export float32")
    export.run(export.ExportConfig(mode=export.Mode.FLOAT32), run_dir)
    say("== export int8")
    exported = export.run(export.ExportConfig(mode=export.Mode.INT8), run_dir)
    say(exported.table)
    compiler = shutil.which("edgetpu_compiler")
    say("== compile" if compiler else "== compile: edgetpu_compiler is not installed here, so pre-flight analysis only")
    compile_mod.run(compile_mod.CompileConfig(check_only=compiler is None), run_dir)
    say("== parity")
    result = parity.run(parity.ParityConfig(max_drop=config.max_drop, min_agreement=config.min_agreement,
                                            min_accuracy=config.min_accuracy), run_dir)
    say(parity.summary_table(result.report))
    for line in summary(run_dir):
        say(line)
    return result


def summary(run_dir: Path) -> List[str]:
    """What a user wants at the end: accuracies, agreement, Edge TPU mapping, sizes, where things are."""
    manifest = manifest_mod.load(run_dir)
    models = manifest.get("parity", {})
    artifacts = manifest["artifacts"]
    lines = ["", "== summary"]
    for name in ("float_savedmodel", "int8_cpu", "edgetpu"):
        if name in models:
            lines.append(f"{name:<18} top-1 {models[name]['top1']:.4f}  agreement with float {models[name]['agreement']:.4f}")
    edgetpu = _edgetpu_mapping(run_dir, artifacts)
    if edgetpu:
        lines.append(f"edge tpu           {edgetpu}")
    for key in ("model_float", "model_int8", "model_int8_edgetpu"):
        if key in artifacts:
            size = (run_dir / artifacts[key]["path"]).stat().st_size
            lines.append(f"{key:<18} {size / 1024:8.1f} KiB  {run_dir / artifacts[key]['path']}")
    lines.append(f"parity report      {run_dir / 'parity' / 'report.md'}")
    lines.append(f"gate               {'passed' if models.get('passed') else 'FAILED: ' + '; '.join(models.get('failures', []))}")
    return lines


def _edgetpu_mapping(run_dir: Path, artifacts: dict) -> Optional[str]:
    import json

    if "edgetpu_report" not in artifacts:
        return None
    report = json.loads((run_dir / artifacts["edgetpu_report"]["path"]).read_text())
    pre = report.get("preflight", {})
    text = f"pre-flight: {pre.get('ops_on_edgetpu')}/{pre.get('total_ops')} ops predicted on the Edge TPU"
    if report.get("compiler"):
        c = report["compiler"]
        text += f"; compiler: {c.get('ops_on_edgetpu')} on the Edge TPU, {c.get('ops_on_cpu')} on the CPU"
    return text
