"""What a detection run's parity shows people: the summary table printed, and the held-out images where a model
and the float model do not find the same objects, drawn with both sets of boxes for the report."""
from __future__ import annotations

from typing import Dict, List, Sequence

from pipeline.inference.parity_report import ClientRows
from pipeline.tasks.detect.scores import AGREEMENT_IOU, AGREEMENT_SCORE, iou

THUMBNAILS = 8  # disagreeing images shown per model in the report
THUMBNAIL_SIDE = 192


def disagreements(examples: Sequence, reference: Sequence, others: Dict[str, Sequence]) -> List[dict]:
    """Up to THUMBNAILS held-out images per model where it and the reference do not find the same objects (scoring
    >= AGREEMENT_SCORE, matched by IoU >= AGREEMENT_IOU and class, either way), drawn with both sets of boxes."""
    shown = []
    for name, found in others.items():
        count = 0
        for e, a, b in zip(examples, reference, found):
            missed, extra = _unmatched(a, b), _unmatched(b, a)
            if not (missed or extra):
                continue
            if count < THUMBNAILS:
                shown.append({"model": name, "id": e.id, "missed": missed, "extra": extra, "png": _thumbnail(e, a, b)})
            count += 1
    return shown


def _unmatched(a, b) -> int:
    """How many of a's detections scoring >= AGREEMENT_SCORE b does not find."""
    mine = [(box, c) for box, c, s in zip(b.boxes, b.classes, b.scores) if s >= AGREEMENT_SCORE]
    return sum(1 for box, c, s in zip(a.boxes, a.classes, a.scores)
               if s >= AGREEMENT_SCORE and not any(c == c2 and iou(box, box2) >= AGREEMENT_IOU for box2, c2 in mine))


def _thumbnail(example, reference, other) -> str:
    """The image, its longer side THUMBNAIL_SIDE, the reference's boxes blue and the other model's red (drawn two
    pixels inside, so equal boxes both show), as base64 PNG."""
    import base64
    import io

    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(example.image)) as image:
        image = image.convert("RGB")
        scale = THUMBNAIL_SIDE / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.BILINEAR)
    draw = ImageDraw.Draw(image)
    for found, colour, inset in ((reference, (21, 101, 192), 0), (other, (198, 40, 40), 2)):
        for box, s in zip(found.boxes, found.scores):
            if s < AGREEMENT_SCORE:
                continue
            ymin, xmin, ymax, xmax = (float(v) for v in box)
            draw.rectangle([xmin * image.width + inset, ymin * image.height + inset,
                            max(xmin * image.width + inset, xmax * image.width - inset),
                            max(ymin * image.height + inset, ymax * image.height - inset)], outline=colour, width=2)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def summary_table(report: dict) -> str:
    from pipeline.inference.parity_report import worst_client

    lines = [f"{'model':<18} {'mAP@.5':>8} {'mAP@[.5:.95]':>13} {'agreement':>10} {'drop pp':>8}"]
    reference = report["models"][report["reference"]]["map50"]
    for name, m in report["models"].items():
        lines.append(f"{name:<18} {m['map50']:8.4f} {m['map']:13.4f} {m['agreement']:10.4f} {(reference - m['map50']) * 100:8.2f}")
    for name, c in report.get("clients", {}).items():  # a report from before the clients has none
        label = f"int8 as {name}"
        if "refused" in c:
            lines.append(f"{label:<18} cannot feed the model: {c['refused']}")
        else:
            lines.append(f"{label:<18} {c['map50']:8.4f} {c['map']:13.4f} {c['agreement']:10.4f} {c['drop_pp']:8.2f}"
                         + ("  (gated)" if c["gated"] else ""))
    worst = worst_client(report.get("clients", {}), DETECT_WORST)
    if worst:
        lines.append(worst)
    g = report["gate"]
    lines.append(f"gate (mAP@.5 drop <= {g['max_drop_pp']:g} pp for {', '.join(g['applies_to'])}), floor {g['floor_rule']}: "
                 + ("PASSED" if g["passed"] else "FAILED: " + "; ".join(g["failures"])))
    return "\n".join(lines)


# A detector's tuning split has no client feeds: no remedy advice.
DETECT_WORST = ClientRows("map50", "mAP@.5", "pycoral,mediapipe,frigate", repairable=False)
