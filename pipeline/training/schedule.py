"""Learning rate per epoch: linear warm-up, sustain, then exponential decay (the Kaggle TPU tutorial's).

Warm-up matters on TPUs because the global batch is large: starting at the full rate with
freshly initialised weights diverges. Epoch-based so that a resumed run gets the same rates.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


def _option(default, flag: str, help: str):
    """A field with the `pipeline train` option that sets it (metadata: flag, help)."""
    return field(default=default, metadata={"flag": flag, "help": help})


@dataclass(frozen=True)
class WarmupSchedule:
    start: float = _option(1e-4, "--lr-start", "learning rate at epoch 0")
    # reached after warm-up, held for `sustain_epochs`
    max: float = _option(4e-3, "--learning-rate", "peak learning rate after warm-up")
    min: float = _option(1e-5, "--lr-min", "floor of the exponential decay")
    # epochs of linear ramp from `start` to `max`
    warmup_epochs: int = _option(1, "--warmup-epochs", "epochs of linear warm-up")
    sustain_epochs: int = _option(1, "--sustain-epochs", "epochs at the peak rate before decay")
    # applied to (rate - min) after sustain
    decay: float = _option(0.8, "--lr-decay", "per-epoch decay factor after sustain")

    def __post_init__(self):
        if not (0 < self.start and 0 < self.min <= self.max and 0 < self.max):
            raise ValueError(f"learning rates start={self.start}, max={self.max}, min={self.min}: expected positive values with min <= max")
        if not 0 < self.decay <= 1:
            raise ValueError(f"decay {self.decay}, expected a factor in (0, 1]")
        if self.warmup_epochs < 0 or self.sustain_epochs < 0:
            raise ValueError("warmup_epochs and sustain_epochs must be >= 0")

    def __call__(self, epoch: int) -> float:
        if epoch < self.warmup_epochs:
            return self.start + (self.max - self.start) * epoch / self.warmup_epochs
        if epoch < self.warmup_epochs + self.sustain_epochs:
            return self.max
        decayed = epoch - self.warmup_epochs - self.sustain_epochs
        return self.min + (self.max - self.min) * self.decay ** decayed

    def as_dict(self) -> dict:
        return asdict(self)
