"""Pose data: keypoint layouts, the readers (COCO keypoints, Ultralytics' YOLO-pose), the built-in `figures` and the
augmentation that keeps keypoints right."""
