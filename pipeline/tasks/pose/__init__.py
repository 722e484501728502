"""Pose: each object's box, class and keypoints per image. A pose model is a detector with a keypoint output, so this
task builds on the detection task's heads and data (BUILDS_ON below; tests/test_import_graph.py allows those imports
and no others). The task (task.py) and its export, parity and predict beside it; its data readers in data/; its
heads' keypoint parts in heads/."""

BUILDS_ON = ("detect",)
