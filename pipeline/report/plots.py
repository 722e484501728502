"""The report's plots: matplotlib figures as inline SVG (data: URIs), so the page loads nothing.

matplotlib's object API (Figure, no pyplot): no display, no global backend switched for the caller.
"""
from __future__ import annotations

import base64
import io
from typing import Dict, List, Optional, Sequence

import numpy as np

TPU_GREEN, CPU_ORANGE, WORST_RED, GREY = "#2e7d32", "#ef6c00", "#c62828", "#9e9e9e"
# rmse of rounding alone, in quantization steps: a uniform error over one step has rmse 1/sqrt(12).
ROUNDING_STEPS = 12 ** -0.5


def _svg(fig) -> str:
    import matplotlib

    out = io.StringIO()
    # Text as SVG <text> in the browser's sans-serif (not glyph paths: 3x smaller, faster to write);
    # a fixed hash salt and no date: the same run gives the same bytes.
    with matplotlib.rc_context({"svg.hashsalt": "edgeflow", "svg.fonttype": "none"}):
        fig.savefig(out, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(out.getvalue().encode("utf-8")).decode("ascii")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def training_curves(history: List[dict], switch: Optional[int], resumes: Sequence[int]) -> str:
    """Loss, accuracy (when the task's history has it: a detector's has none) and learning rate per epoch, with the
    fine-tune switch and resume points marked."""
    epochs = [e["epoch"] for e in history]
    metrics = [m for m in ("loss", "accuracy") if any(e.get(m) is not None or e.get(f"val_{m}") is not None for e in history)]
    metrics = metrics or ["loss"]
    fig = _figure(11 if len(metrics) == 2 else 7.5, 3.2)
    axes = fig.subplots(1, len(metrics) + 1)
    for ax, metric in zip(axes[:-1], metrics):
        for key, label, style in ((metric, "training", "-o"), (f"val_{metric}", "held-out", "-s")):
            values = [e.get(key) for e in history]
            if any(v is not None for v in values):
                ax.plot(epochs, [np.nan if v is None else v for v in values], style, label=label, markersize=3)
        ax.set_title(metric)
    lr = [e.get("lr") for e in history]
    axes[-1].plot(epochs, [np.nan if v is None else v for v in lr], "-o", color="#6a1b9a", markersize=3)
    axes[-1].set_title("learning rate")
    axes[-1].ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if switch:
            ax.axvline(switch + 0.5, color=GREY, linestyle="--", linewidth=1)
        for epoch in resumes:
            ax.axvline(epoch - 0.5, color=WORST_RED, linestyle=":", linewidth=1)
    axes[0].legend(fontsize=8)
    if switch:
        axes[-1].annotate("fine-tune", (switch + 0.5, 0.95), xycoords=("data", "axes fraction"), fontsize=8, color=GREY)
    return _svg(fig)


def layer_errors(layers: List[dict], worst: Sequence[str]) -> str:
    """rmse in quantization steps per quantized layer, in model order; the worst ones in red."""
    names = [f"{layer['op']} {_trimmed_name(layer['tensor'])}" for layer in layers]
    values = [layer["rmse_steps"] for layer in layers]
    fig = _figure(9, 0.6 + 0.22 * len(layers))
    ax = fig.subplots()
    y = np.arange(len(layers))
    ax.barh(y, values, color=[WORST_RED if layer["tensor"] in worst else "#1565c0" for layer in layers])
    ax.axvline(ROUNDING_STEPS, color=GREY, linestyle="--", linewidth=1, label="rounding alone (0.29 steps)")
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("rmse against the float model, in quantization steps")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def confusion(matrix: List[List[int]], labels: Sequence[str], title: str) -> str:
    """One model's confusion matrix (rows: true class, columns: its answer), counts written when small."""
    m = np.asarray(matrix)
    n = len(labels)
    side = min(2.2 + 0.32 * n, 9)
    fig = _figure(side, side)
    ax = fig.subplots()
    ax.imshow(m, cmap="Blues")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("answer")
    ax.set_ylabel("true class")
    if n <= 20:
        ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
        limit = m.max() / 2 if m.size else 0
        for (i, j), count in np.ndenumerate(m):
            if count:
                ax.text(j, i, str(count), ha="center", va="center", fontsize=6, color="white" if count > limit else "black")
    return _svg(fig)


def class_deltas(labels: Sequence[str], deltas: Dict[str, List[Optional[float]]]) -> str:
    """Per-class accuracy change against the float model, percentage points, one bar per model."""
    x = np.arange(len(labels))
    fig = _figure(min(3 + 0.35 * len(labels) * max(len(deltas), 1), 14), 2.6)
    ax = fig.subplots()
    width = 0.8 / max(len(deltas), 1)
    for i, (name, values) in enumerate(deltas.items()):
        ax.bar(x + i * width, [0.0 if v is None else v for v in values], width, label=name)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("accuracy change (pp)")
    ax.set_xticks(x + 0.4 - width / 2, labels if len(labels) <= 40 else [str(i) for i in x], rotation=90, fontsize=7)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)


def _trimmed_name(tensor: str, limit: int = 48) -> str:
    # TFLite tensor names join fused ops with ';': the first part names the layer.
    first = tensor.split(";")[0]
    return first if len(first) <= limit else "…" + first[-limit:]
