"""The remedy ladder on the console: one row per attempt as the ladder makes it, and the whole table at the end."""
from __future__ import annotations

from pipeline import gate


def header(metric: gate.Metric) -> str:
    return (f"{'remedy':<12} {'tuning ' + metric.short:>14} {'agreement':>9} {'gate':>6} {'edge tpu':>9} {'bytes':>9} "
            f"{'seconds':>8}")


def row(attempt, metric: str) -> str:
    """One attempt (pipeline/remedy/outcome.py's Attempt) in one line, with `metric` the gate's."""
    if attempt.error is not None:
        return f"{attempt.remedy:<12} could not make a model ({attempt.seconds:.1f} s): {attempt.error}"
    s = attempt.scores
    gate_text = "pass" if attempt.passed else ("lower" if attempt.mapping_lowered else "fail")
    clients = "".join(f"  {name} {scores[metric].shown:.4f}" for name, scores in attempt.clients.items())
    return (f"{attempt.remedy:<12} {s[metric].shown:>14.4f} {s[gate.AGREEMENT].shown:>9.4f} {gate_text:>6} "
            f"{attempt.ops_on_edgetpu:>4}/{attempt.total_ops:<4} {len(attempt.model.bytes):>9,} {attempt.seconds:>8.1f}"
            + clients)


def skip_row(name: str, why: str) -> str:
    return f"{name:<12} skipped: {why}"


def table(outcome) -> str:
    """The ladder's whole climb (pipeline/remedy/outcome.py's Outcome): the split, each attempt and skipped rung, the
    notes and what was chosen."""
    tuning = outcome.tuning
    metric = outcome.metrics[outcome.limits.metric]
    judged = (f"; as {', '.join(outcome.clients)} feed{'s' if len(outcome.clients) == 1 else ''} them, int8 is gated "
              "against float fed the same") if outcome.clients else ""
    lines = [f"remedy ladder on a tuning split of {tuning.describe()}{judged}:",
             header(metric), *(row(a, outcome.limits.metric) for a in outcome.attempts),
             *(skip_row(name, why) for name, why in outcome.skipped)]
    if outcome.reference:
        lines.insert(2, f"{'float':<12} {outcome.reference[metric.key].shown:>14.4f} {'(reference)':>9}"
                     + "".join(f"  {name} {scores[metric.key].shown:.4f}" for name, scores in outcome.client_references.items()))
    if outcome.clients_note:
        lines.append(outcome.clients_note)
    lines += outcome.notes
    lines.append(f"chosen: {outcome.chosen.remedy}" if outcome.passed else
                 f"nothing passed; kept the best attempt, {outcome.chosen.remedy}")
    return "\n".join(lines)
