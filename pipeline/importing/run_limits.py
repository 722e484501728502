"""What an imported run holds that a trained one does not, as the later stages ask it: the float SavedModel's fixed
batch (an ONNX graph that fixes batch 1 inside keeps it), and the missing Keras model that QAT and the remedy's
float edits change. Each answer is read from the run's manifest, so a stage refuses in one line before any work."""
from __future__ import annotations

from typing import Optional

from pipeline.errors import ConfigError


def float_batch(run, asked: Optional[int]) -> Optional[int]:
    """The batch the run's float SavedModel must be fed: its fixed batch when the import recorded one (`asked` must
    then be that or None), else None (any batch)."""
    fixed = (run.origin or {}).get("float_batch")
    if fixed is None:
        return None
    if asked is not None and asked != fixed:
        raise ConfigError(f"--batch-size {asked}: {run.dir}'s float SavedModel takes batches of {fixed} only (the imported "
                          f"model {(run.origin or {}).get('copy', '')} fixes its batch inside the graph); expected "
                          f"--batch-size {fixed} or none")
    return fixed


def keras_model_missing(run, option: str) -> str:
    """Why `option` (QAT, a float edit) cannot run on `run`: the reason line, naming what it needs."""
    origin = run.origin or {}
    what = (f"an imported model ({origin.get('format')}: {origin.get('copy')}, converted to saved_model/) with no Keras "
            "layers to change" if origin else "no keras_model.keras")
    return (f"{option} changes the run's Keras model (keras_model.keras, written by `pipeline train`); {run.dir} holds "
            f"{what}")


def refuse_qat(run, qat_epochs: int) -> None:
    """--qat-epochs on a run without the Keras model it fine-tunes: refused before anything loads."""
    if qat_epochs and not run.has("keras_model"):
        raise ConfigError(f"{keras_model_missing(run, f'--qat-epochs {qat_epochs}')}; expected no --qat-epochs "
                          "(`--int8 --remedy` tries the repairs that apply to it)")
