"""The SSD head behind the detection task's Head interface: anchors and the centre-size coder (anchors.py), the focal +
box loss (loss.py, trainer.py), TFLite's post-processing op at the end of the exported model (postprocess.py)."""
from __future__ import annotations

from typing import Sequence, Tuple

from pipeline.tasks.detect.heads.head import Conversion, Head


def anchor_spec():
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec

    return AnchorSpec()


def anchor_boxes(size: int):
    from pipeline.tasks.detect.heads.ssd.anchors import anchors

    return anchors(size, anchor_spec())


class SsdHead(Head):
    name = "ssd"

    def strides(self) -> Tuple[int, ...]:
        return tuple(anchor_spec().strides)

    def build(self, config, num_classes: int, imagenet: bool):
        from pipeline.tasks.detect.heads.ssd.model import build_detector
        from pipeline.tasks.detect.heads.ssd.trainer import training_model

        spec = anchor_spec()
        detector = build_detector(config.model, config.size, num_classes, spec.per_location, strides=spec.strides,
                                  imagenet=imagenet, **dict(config.model_options))
        return training_model(detector)

    def with_targets(self, config, ds):
        """SSD's anchor targets, assigned on the input side."""
        from pipeline.tasks.detect.heads.ssd.targets import with_targets

        return with_targets(ds, anchor_boxes(config.size))

    def predict(self, model, examples, config, resize: str, nms) -> list:
        from pipeline.tasks.detect.heads.ssd.infer import predict

        return predict(model, examples, anchor_boxes(config.size), config.size, resize=resize, nms=nms,
                       batch_size=config.batch_size)

    def outputs(self) -> dict:
        return {"box_codes": "[B, A, 4] center-size codes (ty, tx, th, tw) against the anchors",
                "class_logits": "[B, A, C + 1] logits, column 0 the background (untrained)"}

    def detection(self, config, common: dict) -> dict:
        from pipeline.tasks.detect.heads.ssd.anchors import SCALE_FACTORS

        spec = anchor_spec()
        return {
            "anchors": {k: list(v) for k, v in spec._asdict().items()},  # AnchorSpec(**{k: tuple(v)}) rebuilds it
            "anchor_count": int(len(anchor_boxes(config.size))),
            "scale_factors": list(SCALE_FACTORS),  # y, x, h, w: TFLite_Detection_PostProcess's attributes
            **common,
        }

    def conversion(self, run) -> Conversion:
        from pipeline.tasks.detect.heads.ssd.postprocess import Settings, convert

        spec, settings = recorded_anchor_spec(run), Settings()

        def ssd(detector, size, labels, **options) -> bytes:
            return convert(detector, spec, size, labels, settings, **options)

        def describes(int8: bool) -> str:
            return ("full-integer int8 up to TFLite_Detection_PostProcess (Edge TPU)" if int8
                    else "float32, ending in TFLite_Detection_PostProcess")

        return Conversion("detector", {"postprocess": settings._asdict()}, ssd, describes)

    def reference(self, run, pixels: Sequence) -> list:
        from pipeline.tasks.detect.heads.ssd.infer import float_detections

        return float_detections(self.float_model(run), recorded_anchor_spec(run), run.image_size, pixels)


def recorded_anchor_spec(run):
    """The anchor spec a detection run trained with (its manifest's `detection` record)."""
    from pipeline.errors import ConfigError
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec

    anchors = run.detection.get("anchors")
    if not isinstance(anchors, dict):
        raise ConfigError(f"{run.dir}'s manifest records no anchor spec under 'detection'; expected a run from pipeline train --task detect")
    return AnchorSpec(**{k: tuple(v) for k, v in anchors.items()})
