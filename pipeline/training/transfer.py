"""Transfer learning as Keras' guide does it: train the head on a frozen base, then fine-tune.

`--frozen-epochs N`: epochs 1..N train only the head; the base's BatchNorm layers run in inference
mode (in tf-keras a non-trainable BatchNormalization uses its moving statistics), so a fresh
head's large early gradients do not wreck the pretrained features. Then the base is unfrozen
(all of it, or from `--unfreeze-from LAYER` on) and training continues at
`--fine-tune-learning-rate`. BatchNorm stays in inference mode while fine-tuning, as the guide
advises: its statistics come from ImageNet-sized data, not from small batches of a new set.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional

import tf_keras as keras

from pipeline.errors import ConfigError


class Phase(NamedTuple):
    name: str  # "frozen" | "fine_tune" | "all" (no frozen epochs)
    first_epoch: int  # 0-based, as Keras' initial_epoch
    end_epoch: int  # exclusive, as Keras' epochs
    backup: str  # BackupAndRestore folder under the state dir: one per phase, so a resume finds each


def phases(epochs: int, frozen_epochs: int) -> List[Phase]:
    if not frozen_epochs:
        return [Phase("all", 0, epochs, "backup")]
    plan = [Phase("frozen", 0, frozen_epochs, "backup_frozen")]
    if frozen_epochs < epochs:
        plan.append(Phase("fine_tune", frozen_epochs, epochs, "backup"))
    return plan


def freeze(base: "keras.Model") -> None:
    base.trainable = False


def unfreeze(base: "keras.Model", from_layer: Optional[str]) -> None:
    """Make the base trainable from `from_layer` on (all of it when None), BatchNorm excepted."""
    names = [layer.name for layer in base.layers]
    start = names.index(check_layer(base, from_layer)) if from_layer else 0
    base.trainable = True
    for index, layer in enumerate(base.layers):
        layer.trainable = index >= start and not isinstance(layer, keras.layers.BatchNormalization)


def check_layer(base: "keras.Model", name: str) -> str:
    names = [layer.name for layer in base.layers]
    if name not in names:
        near = [n for n in names if n.startswith(name.split("_")[0])][:8] or names[-8:]
        raise ConfigError(f"--unfreeze-from {name!r}: no such layer in the {base.name} base network "
                          f"({len(names)} layers; for example {', '.join(near)})")
    return name
