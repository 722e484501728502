"""The YOLO pose head: the detection task's anchor-free head (pipeline/tasks/detect/heads/yolo/) with a keypoint output
(model.py), YOLOv8-pose's keypoint loss on its assignment (loss.py, trainer.py), the export with every op on the Edge
TPU (export.py), and the host decoding (infer.py; on the device edge/answers/heads/keypoints.py).

The interface the pose task calls (heads/__init__.py's get / of_run give one): strides, build, with_targets, predict,
outputs, record, conversion, float_model, reference."""
from __future__ import annotations

from typing import Sequence, Tuple

from pipeline.tasks.detect.heads.head import Conversion, Head


class PoseHead(Head):
    name = "yolo"

    def strides(self) -> Tuple[int, ...]:
        from pipeline.tasks.detect.heads.yolo.model import STRIDES

        return tuple(STRIDES)

    def build(self, config, num_classes: int, sigmas: Sequence[float], imagenet: bool):
        """The training model (uncompiled; its train_step has the loss), K = len(sigmas) keypoints."""
        from pipeline.tasks.pose.heads.yolo.model import build_pose_model
        from pipeline.tasks.pose.heads.yolo.trainer import training_model

        model = build_pose_model(config.model, config.size, num_classes, len(sigmas), imagenet=imagenet,
                                 **dict(config.model_options))
        return training_model(model, sigmas)

    def with_targets(self, config, ds):
        """(image, {boxes, classes, mask, keypoints}): the padded ground truth itself, as the detector's."""
        from pipeline.tasks.pose.heads.yolo.trainer import with_truth

        return with_truth(ds)

    def predict(self, model, examples, config, nms) -> list:
        """One Poses per example (normalized to its image), per-class NMS by `nms`."""
        from pipeline.tasks.pose.heads.yolo.infer import predict

        return predict(model, examples, config.size, resize=getattr(config, "resize", "stretch"), nms=nms,
                       batch_size=config.batch_size)

    def outputs(self) -> dict:
        from pipeline.tasks.detect.heads.yolo.head import YoloHead
        from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

        return {**YoloHead().outputs(),
                "keypoints": f"[B, N, 3K] per anchor point and keypoint (dx, dy, v): the keypoint at the anchor point plus "
                             f"(dx, dy) strides, sigmoid(v) its score; bounded to (-{KEYPOINT_LIMIT:g}, {KEYPOINT_LIMIT:g}) "
                             "in the graph"}

    def record(self, config, common: dict) -> dict:
        """The manifest's "pose" entry: `common` plus what export, parity and the device need to read the outputs."""
        from pipeline.tasks.detect.heads.yolo.head import YoloHead
        from pipeline.tasks.pose.heads.yolo.loss import WEIGHTS
        from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

        entry = YoloHead().detection(config, common)
        entry["keypoint_limit"] = KEYPOINT_LIMIT
        entry["loss"] = (entry["loss"] + "; keypoints as YOLOv8-pose's: OKS-shaped location loss by the sigmas and the "
                         f"box area, BCE on visibility (gains {WEIGHTS['keypoint']:g}, {WEIGHTS['visibility']:g})")
        return entry

    def conversion(self, run) -> Conversion:
        """export.py's conversion (float twin, or int8 with every op on the Edge TPU) and the facts that describe it."""
        from edge.answers.heads.yolo import Settings
        from pipeline.tasks.pose.heads.yolo.export import convert

        facts = {"head": self.name, "layout": "box distributions (1, N, 64), class logits (1, N, C), keypoints (1, N, 3K)",
                 "host_decode": Settings()._asdict()}

        def describes(int8: bool) -> str:
            return ("full-integer int8 (Edge TPU)" if int8 else "float32") + ", box distributions, class logits and keypoints"

        return Conversion("yolo pose model", facts, convert, describes)

    def float_model(self, run):
        """The trained Keras model, or an imported pose model's wrapped SavedModel (import_wrap.py)."""
        if run.origin:
            from pipeline.tasks.pose.heads.yolo import import_wrap

            return import_wrap.load(run.artifact("saved_model"))
        return super().float_model(run)

    def reference(self, run, pixels: Sequence) -> list:
        """The float Keras model's poses on contract pixels, decoded as the exported file is on the device; an imported
        model as given, in onnxruntime (import_reference.py)."""
        if run.origin:
            from pipeline.tasks.pose.heads.yolo.import_reference import poses

            return poses(run.dir, run.origin, pixels, len(run.labels))
        from pipeline.tasks.pose.heads.yolo.infer import float_poses

        return float_poses(self.float_model(run), pixels)
