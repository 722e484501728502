"""What `pipeline parity` writes for people about a classifier: the summary table, report.md and the
confusion/delta plot."""
from __future__ import annotations

from typing import List

import numpy as np

from pipeline.gate import REFERENCE
from pipeline.inference.parity_report import ClientRows, worst_client
from pipeline.tasks.classify import class_metrics
from pipeline.tasks.classify.scores import METRICS

WORST = ClientRows("top1", "top-1", "pycoral,mediapipe", repairable=True)  # the worst-client line of a classifier's rows


def summary_table(report: dict) -> str:
    k = report["top_k"]
    rows = [f"{'model':<18} {'top-1':>7} {f'top-{k}':>7} {'agree':>7} {'drop pp':>8} {'macro-F1':>9} {'F1 drop pp':>10} {'max |Δscore|':>13}"]
    for name, m in report["models"].items():
        rows.append(f"{name:<18} {m['top1']:>7.4f} {m[f'top{k}']:>7.4f} {m['agreement']:>7.4f} {m['drop_pp']:>8.2f} "
                    f"{m['macro_f1']:>9.4f} {m['macro_f1_drop_pp']:>10.2f} {m['score_error_max']:>13.4f}")
    for name, c in report.get("clients", {}).items():
        label = f"int8 as {name}"
        if "refused" in c:
            rows.append(f"{label:<18} cannot feed the model: {c['refused']}")
            continue
        rows.append(f"{label:<18} {c['top1']:>7.4f} {c[f'top{k}']:>7.4f} {c['agreement']:>7.4f} {c['drop_pp']:>8.2f} "
                    f"{c['macro_f1']:>9.4f} {c['macro_f1_drop_pp']:>10.2f} {c['score_error_max']:>13.4f}"
                    f"{'  (gated)' if c['gated'] else ''}")
    worst = worst_client(report.get("clients", {}), WORST)
    if worst:
        rows.append(worst)
    gate = report["gate"]
    verdict = "PASSED" if gate["passed"] else "FAILED: " + "; ".join(gate["failures"])
    metric = METRICS[gate.get("metric", "top1")].short
    floor = f"; {gate['floor_rule']} for {', '.join([REFERENCE, *gate['applies_to']])}" if "floor_rule" in gate else ""
    rows.append(f"gate ({metric} drop <= {gate['max_drop_pp']:g} pp, agreement >= {gate['min_agreement']:g} for "
                f"{', '.join(gate['applies_to'])}{floor}): {verdict}")
    return "\n".join(rows)


def _client_markdown(report: dict) -> List[str]:
    clients = report.get("clients")
    if not clients:
        return []
    k = report["top_k"]
    lines = ["", "## The int8 model as each client feeds it", "",
             "Same int8 file, same interpreter, the same held-out files as the bundle ships them; only how the "
             "client turns a file into the input differs.", "",
             f"| client | how it feeds | top-1 | top-{k} | agreement | drop pp | macro-F1 | gated |", "|---|---|---|---|---|---|---|---|"]
    for name, c in clients.items():
        if "refused" in c:
            lines.append(f"| {name} | {c['feed']} | cannot feed the model: {c['refused']} | | | | | {'yes' if c['gated'] else 'no'} |")
        else:
            lines.append(f"| {name} | {c['feed']} | {c['top1']:.4f} | {c[f'top{k}']:.4f} | {c['agreement']:.4f} | "
                         f"{c['drop_pp']:.2f} | {c['macro_f1']:.4f} | {'yes' if c['gated'] else 'no'} |")
    return lines


def markdown(report: dict) -> str:
    lines = ["# Accuracy parity", "", f"{report['heldout']['images']} held-out images ({report['heldout']['source']}); "
             f"reference: {report['reference']}.", "", "```", summary_table(report), "```", "",
             "## Per-class accuracy delta against the float model (percentage points)", "",
             "| class | " + " | ".join(report["models"]) + " |", "|---|" + "---|" * len(report["models"])]
    for c, label in enumerate(report["labels"]):
        cells = []
        for m in report["models"].values():
            delta = m["per_class_delta_pp"][c]
            cells.append("n/a" if delta is None else f"{delta:+.1f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines + _client_markdown(report) + class_metrics.markdown(report)) + "\n"


def plot(report: dict, names: List[str]) -> bytes:
    """The confusion matrices and the per-class deltas as PNG bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    labels = report["labels"]
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(5 * (len(names) + 1), 4.5))
    for ax, name in zip(axes, names):
        ax.imshow(np.asarray(report["models"][name]["confusion"]), cmap="Blues")
        ax.set_title(f"{name}: top-1 {report['models'][name]['top1']:.3f}")
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        if len(labels) <= 20:
            ax.set_xticks(range(len(labels)), labels, rotation=90)
            ax.set_yticks(range(len(labels)), labels)
    ax = axes[-1]
    x = np.arange(len(labels))
    gated = [n for n in names if n != REFERENCE]
    width = 0.8 / max(len(gated), 1)
    for i, name in enumerate(gated):
        deltas = [d or 0.0 for d in report["models"][name]["per_class_delta_pp"]]
        ax.bar(x + i * width, deltas, width, label=name)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("per-class accuracy delta vs float (pp)")
    ax.set_xticks(x, labels if len(labels) <= 20 else [str(i) for i in x], rotation=90)
    ax.legend()
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=80)
    plt.close(fig)
    return out.getvalue()
