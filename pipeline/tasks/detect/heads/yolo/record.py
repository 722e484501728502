"""What the manifest records of a detection run trained with the anchor-free head: the SSD record's data, labels and
preprocessing, with the head's model and `detection` entries (what export, parity and the device need to read it)."""
from __future__ import annotations

from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, REG_MAX, STRIDES, anchor_count
from pipeline.tasks.detect.heads import YOLO


def record(config, plan, model, weights, ssd_record: dict) -> dict:
    """`ssd_record` (the SSD head's record of the same run) with the anchor-free head's model and detection entries."""
    size = config.size
    out = dict(ssd_record)
    out["model"] = {**ssd_record["model"], "architecture": YOLO,
                    "outputs": {"box_dist": f"[B, N, {4 * REG_MAX}] logits of {REG_MAX}-bin distributions of the distances "
                                            "left, top, right, bottom from each anchor point, in strides",
                                "class_logits": f"[B, N, C] class logits, bounded to (-{LOGIT_LIMIT:g}, {LOGIT_LIMIT:g}) "
                                                "in the graph"}}
    detection = {k: v for k, v in ssd_record["detection"].items() if k not in ("anchors", "anchor_count", "scale_factors")}
    out["detection"] = {**detection, "head": YOLO, "strides": list(STRIDES), "reg_max": REG_MAX,
                        "anchor_count": anchor_count(size), "logit_limit": LOGIT_LIMIT,
                        "loss": "YOLOv8's: task-aligned assignment (top 10, alpha 0.5, beta 6), BCE on classes, CIoU and "
                                "DFL on boxes (gains 0.5, 7.5, 1.5)"}
    return out
