"""What a task supplies to `pipeline parity`'s one skeleton (pipeline/parity.py): how it reads its held-out
images and runs, scores, gates and reports its models. The skeleton does the rest, the same for every task:

    held = side.heldout(config, run)                      # the examples, checked; refuses options it cannot honour
    opened = side.open(run, key, config)                  # model_float (when exported) and model_int8 (required)
    answers = side.reference(run, held), side.answers(opened, held)
    found, refused = side.clients(opened_int8, files)     # each client's feed of the int8 model
    side.device_answers(checked, run, held)               # after pipeline/inference/device_results.py's checks
    entry = side.entry(held, answers, reference_answers)  # one report row per model
    rows = side.client_rows(held, found, refused, entries, reference_answers, named)
    gate: side.metrics, side.limits(limits), side.gate_scores(entry), side.chance(held) (the floor)
    report = side.report(...); side.write(...); side.summary(report)

A new task subclasses Comparison in its own module (pipeline/tasks/<task>/parity.py) and returns it from
Task.comparison().
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple


class Held(NamedTuple):
    """The held-out images a parity compares on, as the task read them."""

    ids: List[str]  # each example's identity, in the recorded order
    originals: List[bytes]  # each example's stored bytes (what the bundle ships)
    pixels: Any  # [N, S, S, 3] uint8 through the run's pixel contract, what every model is fed
    truth: Any  # the task's ground truth: class ids (classify) or the examples with their boxes (detect)
    source: str  # where they came from, for the report
    labels: List[str]  # the run's class names


class Comparison:
    """A task's side of parity. Each method is one step of pipeline/parity.py's skeleton."""

    name: str  # the task's name (client_scores' and device_results' word for it)
    holds: str  # what a device's results document of the task holds, in words: "a classifier's scores"
    metrics: Mapping[str, Any]  # gate.Metric by key: what --max-drop may limit

    def heldout(self, config, run) -> Held:
        raise NotImplementedError

    def reference(self, run, held: Held):
        """The float SavedModel's answers (the reference every other model is compared with)."""
        raise NotImplementedError

    def open(self, run, key: str, config):
        """An opened TFLite model of the run (`key`: model_float or model_int8), as the device opens it."""
        raise NotImplementedError

    def answers(self, opened, held: Held):
        raise NotImplementedError

    def clients(self, opened, files: Sequence[bytes]) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """(each client's answers with the int8 model, why a client could not feed it) on the shipped files."""
        raise NotImplementedError

    def device_answers(self, checked, run, held: Held):
        """The device's answers from a results file that passed device_results' checks (the task checks its own part)."""
        raise NotImplementedError

    def entry(self, held: Held, answers, reference) -> dict:
        """One model's row of report.json's "models"."""
        raise NotImplementedError

    def client_rows(self, held: Held, found: Dict[str, Any], refused: Dict[str, str], entries: Dict[str, dict],
                    reference, named: Sequence[str]) -> Dict[str, dict]:
        raise NotImplementedError

    def limits(self, limits):
        """The user's gate limits as this task applies them (validated against `metrics`)."""
        return limits

    def gate_scores(self, entry: dict) -> dict:
        """A row as the gate sees it: gate.Score by metric key, "agreement" among them."""
        raise NotImplementedError

    def chance(self, held: Held):
        """What a model that learned nothing scores (the gate's Floor words it)."""
        raise NotImplementedError

    def report(self, config, run, held: Held, entries: Dict[str, dict], clients: Dict[str, dict],
               device: Optional[dict], verdict: dict, answers: Dict[str, Any]) -> dict:
        """report.json's contents (the device's facts, `device`, placed where the task reports them)."""
        raise NotImplementedError

    def write(self, run, report: dict, answers: Dict[str, Any], held: Held, failures: List[str]):
        """report.json and the task's other files in RUN/parity/, with the manifest's "parity", in one transaction;
        returns RUN/parity."""
        raise NotImplementedError

    def summary(self, report: dict) -> str:
        """The table `pipeline parity` and `pipeline run` print."""
        raise NotImplementedError
