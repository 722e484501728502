"""What the remedy ladder found: each attempt (a rung's model, its scores on the tuning split, its predicted Edge TPU
mapping), the one chosen, and their record for the manifest and message for the user."""
from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from pipeline import gate
from pipeline.remedy.near_ties import ties_line
from pipeline.remedy.tuning_split import TuningSplit


class Attempt(NamedTuple):
    remedy: str  # "none" for the export as asked
    what: str
    model: object  # the export stage's Converted
    scores: Dict[str, gate.Score]  # on the tuning split
    failures: List[str]  # the gate's failed limits on the tuning split
    ops_on_edgetpu: int
    total_ops: int
    mapping_lowered: bool  # fewer ops predicted on the Edge TPU than the export as asked
    seconds: float
    error: Optional[str] = None  # the rung could not make a model (e.g. QAT cannot wrap a nested base model)
    clients: Mapping[str, Dict[str, gate.Score]] = {}  # the gated clients' scores on the tuning split, by client

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures and not self.mapping_lowered

    def rank(self, metric: str):
        """Larger is better: a model at all, a kept mapping, fewer failed limits, more agreement, a higher gate metric."""
        if self.error is not None:
            return (False, False, 0, 0, 0)
        return (True, not self.mapping_lowered, -len(self.failures), self.scores[gate.AGREEMENT].exact, self.scores[metric].exact)

    def dropped(self) -> "Attempt":
        """This attempt keeping only its model's bytes and facts (`Dropped`): one that can no longer be chosen."""
        model = self.model
        return self if model is None else self._replace(model=Dropped(model.bytes, getattr(model, "facts", {})))

    def record(self, metric: str, config=None) -> Dict[str, object]:
        return {"remedy": self.remedy, "what": self.what,
                "tuning": {key: score.shown for key, score in self.scores.items()},
                "gate_metric": metric, "passed": self.passed, "failures": list(self.failures),
                "edgetpu": {"ops_on_edgetpu": self.ops_on_edgetpu, "total_ops": self.total_ops,
                            "lowered": self.mapping_lowered},
                "size_bytes": len(self.model.bytes) if self.model else None, "seconds": round(self.seconds, 2),
                "error": self.error,
                "clients": {name: {key: score.shown for key, score in scores.items()} for name, scores in self.clients.items()}}


class Dropped(NamedTuple):
    """What an attempt that can no longer be chosen keeps of its model: its bytes (the record's size) and facts."""

    bytes: bytes
    facts: Mapping[str, object]


class Outcome(NamedTuple):
    chosen: Attempt  # the first that passed, or the best of them when none did
    attempts: List[Attempt]
    tuning: TuningSplit
    motivation: Optional[List[Dict[str, object]]]  # the worst layers of the export as asked, when it failed
    limits: gate.GateLimits  # as the task's gate applies them
    metrics: Mapping[str, gate.Metric]  # the task's, for the table's column names
    skipped: Tuple[Tuple[str, str], ...] = ()  # (rung, why) for the rungs reached that do not apply
    reference: Optional[Dict[str, gate.Score]] = None  # the float reference's own scores on the tuning split
    clients: Tuple[str, ...] = ()  # the clients gated like the int8 model on the tuning split
    clients_note: Optional[str] = None  # why clients asked for were not judged (a task without client feeds)
    client_references: Mapping[str, Dict[str, gate.Score]] = {}  # the float model's scores as each client feeds the views
    ties: Optional[Dict[str, object]] = None  # when nothing passed (classification): the float model's near ties, `near_ties`
    notes: Tuple[str, ...] = ()  # what the user should know of the tuning split (drawn from training; a weak judge)

    @property
    def passed(self) -> bool:
        return self.chosen.passed

    def failures(self) -> List[str]:
        """The gate's message when nothing passed: the chosen (best) attempt's failures, on the tuning split."""
        if self.passed:
            return []
        lines = self.chosen.failures or ["every remedy that passed the gate lowered the predicted Edge TPU mapping"]
        # The near ties are the int8 model's on the contract: they say nothing of a client that alone failed.
        own = any(line.startswith("int8_cpu: ") for line in self.chosen.failures)
        why = [ties_line(self.ties, self.limits.min_agreement)] if self.ties and own else []
        return [f"on the tuning split, no remedy passed ({', '.join(a.remedy for a in self.attempts)}); "
                f"kept the best, {self.chosen.remedy}: " + "; ".join(lines), *why]

    def record(self) -> Dict[str, object]:
        """The manifest's `remedy` fact."""
        metric = self.limits.metric
        return {"passed": self.passed, "chosen": self.chosen.remedy, "tuning_split": self.tuning.record(),
                "limits": {"max_drop_pp": self.limits.max_drop, "min_agreement": self.limits.min_agreement, "metric": metric},
                "reference": {key: score.shown for key, score in (self.reference or {}).items()},
                "motivation": self.motivation, "attempts": [a.record(metric) for a in self.attempts],
                "skipped": [{"remedy": name, "why": why} for name, why in self.skipped], "failures": self.failures(),
                "clients": list(self.clients), "clients_note": self.clients_note, "near_ties": self.ties,
                "notes": list(self.notes),
                "client_references": {name: {key: score.shown for key, score in scores.items()}
                                      for name, scores in self.client_references.items()}}
