"""The count task's side of `pipeline parity`: each model's counts on the held-out pictures against the float
SavedModel's; right when within --count-tolerance of the true count; agreement when within it of the float model's."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np

from pipeline.gate import AGREEMENT, FloorWords, Metric, Score
from pipeline.rundir.files import json_bytes
from pipeline.tasks.comparison import Comparison, Held
from tests.pipeline.tasks.count import data


class Guess:
    """What a model that learned nothing scores: always the most frequent held-out count."""

    words = FloorWords("most_frequent_count", "always answering the most frequent count", "better than always answering "
                       "the most frequent count")

    def __init__(self, truth: np.ndarray):
        values, counts = np.unique(truth, return_counts=True)
        self.count, self.right, self.images = int(values[counts.argmax()]), int(counts.max()), len(truth)
        self.exact, self.rate = Fraction(self.right, self.images), self.right / self.images

    def describe(self) -> str:
        return f"{self.rate:.4f} (always {self.count})"

    def brief(self) -> str:
        return f"always {self.count}"

    def as_dict(self) -> dict:
        return {"count": self.count, "right": self.right, "images": self.images}


class CountComparison(Comparison):
    name = "count"
    holds = "a counter's counts"
    metrics = {"right": Metric("right", "right counts", "right")}
    floor_metric = "right"

    def heldout(self, config, run) -> Held:
        split = run.data.split
        _, heldout = data.split(run.data.train["examples"], split["heldout_fraction"], split["seed"])
        self.tolerance = config.task_options["tolerance"]
        return Held([e.id for e in heldout], [e.png for e in heldout], np.stack([data.pixels(e.png) for e in heldout]),
                    np.array([e.count for e in heldout], np.float32), "the seeded squares' held-out share", run.labels)

    def reference(self, run, held: Held):
        import tensorflow as tf

        model = tf.saved_model.load(str(run.artifact("saved_model")))
        outputs = model.signatures["serving_default"](tf.constant(held.pixels, tf.float32))
        return np.asarray(next(iter(outputs.values()))).reshape(-1)

    def open(self, run, key: str, config):
        from edge import make_interpreter

        interpreter = make_interpreter(str(run.artifact(key)))
        return interpreter

    def answers(self, interpreter, held: Held):
        from edge import dequantize

        found = []
        for image in held.pixels:
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image[None])
            interpreter.invoke()
            out = interpreter.get_output_details()[0]
            found.append(float(dequantize(interpreter.get_tensor(out["index"]), *out["quantization"]).reshape(-1)[0]))
        return np.array(found, np.float32)

    def clients(self, opened, files):
        return {}, {}  # no known client reads a counter

    def entry(self, held: Held, answers, reference) -> dict:
        right = int(np.sum(np.abs(answers - held.truth) <= self.tolerance))
        agree = int(np.sum(np.abs(answers - reference) <= self.tolerance))
        return {"images": len(held.truth), "right": right, "agree": agree,
                "mae": float(np.mean(np.abs(answers - held.truth)))}

    def client_rows(self, held, found, refused, entries, reference, named):
        return {}

    def limits(self, limits):
        return limits._replace(metric="right").validate(self.metrics)

    def gate_scores(self, entry: dict) -> dict:
        return {"right": Score.counted(entry["right"], entry["images"]), AGREEMENT: Score.counted(entry["agree"], entry["images"])}

    def chance(self, held: Held):
        return Guess(np.rint(held.truth))

    def report(self, config, run, held, entries, clients, device, verdict, answers) -> dict:
        return {"task": self.name, "tolerance": self.tolerance, "images": len(held.ids), "models": entries, "gate": verdict}

    def write(self, run, report, answers, held, failures):
        with run.transaction() as t:
            t.write("parity_report", json_bytes(report))
            t.set("parity", {**report["models"], "passed": not failures, "failures": failures})
        return run.path("parity_report").parent

    def summary(self, report: dict) -> str:
        return "\n".join(f"{name:<18} right {m['right']}/{m['images']}  mae {m['mae']:.3f}" for name, m in report["models"].items())


def section(run) -> dict:
    """report.html's parity section: one line per model (the page shows a section's `elsewhere` as it is)."""
    if not run.has("parity_report"):
        return {"ran": False, "error": None, "command": "pipeline parity RUN"}
    report = json.loads(run.artifact("parity_report").read_text())
    return {"ran": False, "error": None, "elsewhere": "Counts within " + str(report["tolerance"]) + ": " + "; ".join(
        f"{name} {m['right']} of {m['images']} right" for name, m in report["models"].items())}
