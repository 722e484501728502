"""The anchor-free (YOLOv8-family) head behind the detection task's Head interface: its model (model.py), task-aligned
assignment and loss (assign.py, loss.py, trainer.py), the export in Frigate's yolo-generic layout (export.py) decoded on
the host (edge/answers/heads/yolo.py), and the import of Ultralytics' detectors into that layout (importer.py)."""
from __future__ import annotations

from typing import Sequence, Tuple

from pipeline.tasks.detect.heads.head import Conversion, Head


class YoloHead(Head):
    name = "yolo"
    imports = True

    def strides(self) -> Tuple[int, ...]:
        from pipeline.tasks.detect.heads.yolo.model import STRIDES

        return tuple(STRIDES)

    def build(self, config, num_classes: int, imagenet: bool):
        from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
        from pipeline.tasks.detect.heads.yolo.trainer import training_model

        return training_model(build_yolo_detector(config.model, config.size, num_classes, imagenet=imagenet,
                                                  **dict(config.model_options)))

    def with_targets(self, config, ds):
        """The padded ground truth itself: the task-aligned assignment needs the predictions."""
        from pipeline.tasks.detect.heads.yolo.trainer import with_truth

        return with_truth(ds)

    def predict(self, model, examples, config, resize: str, nms) -> list:
        from pipeline.tasks.detect.heads.yolo.infer import predict

        return predict(model, examples, config.size, resize=resize, nms=nms, batch_size=config.batch_size)

    def outputs(self) -> dict:
        from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, REG_MAX

        return {"box_dist": f"[B, N, {4 * REG_MAX}] logits of {REG_MAX}-bin distributions of the distances "
                            "left, top, right, bottom from each anchor point, in strides",
                "class_logits": f"[B, N, C] class logits, bounded to (-{LOGIT_LIMIT:g}, {LOGIT_LIMIT:g}) in the graph"}

    def detection(self, config, common: dict) -> dict:
        from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, REG_MAX, STRIDES, anchor_count

        return {**common, "head": self.name, "strides": list(STRIDES), "reg_max": REG_MAX,
                "anchor_count": anchor_count(config.size), "logit_limit": LOGIT_LIMIT,
                "loss": "YOLOv8's: task-aligned assignment (top 10, alpha 0.5, beta 6), BCE on classes, CIoU and "
                        "DFL on boxes (gains 0.5, 7.5, 1.5)"}

    def conversion(self, run) -> Conversion:
        """export.py's conversion (float twin, or int8 in Frigate's yolo-generic layout) and the facts that describe it."""
        from edge.answers.heads.yolo import Settings
        from pipeline.tasks.detect.heads.yolo.export import convert

        facts = {"head": self.name, "layout": "Frigate yolo-generic: box distributions (1, N, 64), class logits (1, N, C)",
                 "host_decode": Settings()._asdict()}

        def describes(int8: bool) -> str:
            return ("full-integer int8 (Edge TPU)" if int8 else "float32") + ", box distributions and class logits (Frigate's yolo-generic layout)"

        return Conversion("yolo detector", facts, convert, describes)

    def float_model(self, run):
        """The trained Keras model, or an imported detector's wrapped SavedModel (importer.py)."""
        if run.origin:
            from pipeline.tasks.detect.heads.yolo import import_wrap

            return import_wrap.load(run.artifact("saved_model"))
        return super().float_model(run)

    def reference(self, run, pixels: Sequence) -> list:
        """A trained run's float Keras model decoded as on the device; an imported detector as given (reference.py)."""
        if run.origin:
            from pipeline.tasks.detect.heads.yolo.reference import detections

            return detections(run.dir, run.origin, pixels)
        from pipeline.tasks.detect.heads.yolo.infer import float_detections

        return float_detections(self.float_model(run), pixels)

    def import_steps(self):
        from pipeline.tasks.detect.heads.yolo.importer import YoloImport

        return YoloImport(self.name)
