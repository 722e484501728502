"""A pose model's predictions document (`edge evaluate` of a pose model, read by `pipeline parity --device-results`):
each object's keypoints written beside its box, rounded as the box is, read back as written, and an object without
its [x, y, score] triples refused naming the result and what was expected."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge.documents import predictions
from edge.errors import InputError


def _document(keypoints) -> dict:
    entry = predictions.detection("heldout/00000.png", "figures/00000", "f" * 64, np.array([0, 0]),
                                  np.array([0.9, 0.25], np.float32), np.array([[0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1]], np.float32),
                                  keypoints)
    return predictions.predictions_document("pose.tflite", "0" * 64, "ai_edge_litert", False, ["figure"], [entry],
                                            None, 1, None, None, [], task="pose")


def test_pose_objects_carry_their_keypoints_and_read_back_as_written(tmp_path: Path):
    points = np.array([[[0.25, 0.5, 0.1234567], [1.0, 0.0, 0.9]], [[0.3, 0.3, 0.0], [0.7, 0.7, 1.0]]], np.float32)
    document = _document(points)
    assert document["task"] == "pose"
    first = document["predictions"][0]["objects"][0]
    assert first["keypoints"] == [[0.25, 0.5, 0.123457], [1.0, 0.0, 0.9]] and first["box"] == [0.1, 0.2, 0.5, 0.6]
    path = tmp_path / "predictions.json"
    predictions.write_detections(path, document)
    read = predictions.read_predictions(path)
    assert read.task == "pose" and read.predictions[0].objects == document["predictions"][0]["objects"]
    # The compact entry a worker writes is the same bytes as the whole document's.
    encoded = predictions.encoded_detection("heldout/00000.png", "figures/00000", "f" * 64, np.array([0, 0]),
                                            np.array([0.9, 0.25], np.float32),
                                            np.array([[0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1]], np.float32), points)
    assert predictions.detections_json(dict(document, predictions=[encoded])) == predictions.detections_json(document)


@pytest.mark.parametrize("keypoints", [None, [], [[0.1, 0.2]], [[0.1, 0.2, float("inf")]], "0.1,0.2,0.3"])
def test_a_pose_object_without_keypoint_triples_is_refused_by_result(tmp_path: Path, keypoints):
    document = _document(np.zeros((2, 2, 3), np.float32))
    document["predictions"][0]["objects"][1]["keypoints"] = keypoints
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"device result 0 \(figures/00000\) in .* has an object with keypoints .*"
                                         r'"keypoints": \[\[x, y, score\], \.\.\.\]'):
        predictions.read_predictions(path)


def test_a_detectors_document_needs_no_keypoints(tmp_path: Path):
    document = _document(None)
    document["task"] = "detect"
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(document))
    read = predictions.read_predictions(path)
    assert read.task == "detect" and "keypoints" not in read.predictions[0].objects[0]
