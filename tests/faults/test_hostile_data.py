"""Data sets, calibration arrays and manifests from elsewhere (issue 39): each crafted input is refused in one line
naming the file, before it can take the machine's memory or time."""
from __future__ import annotations

import io
import json
import os
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from pipeline.tasks.detect.data.coco import read_coco
from pipeline.tasks.detect.data.yolo import read_yolo
from pipeline.errors import DataError, ManifestError
from pipeline.quant.calibration import read_calibration_npy
from pipeline.rundir import manifest as manifest_io

pytestmark = pytest.mark.host


def _png(width=60, height=40) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height)).save(buffer, format="PNG")
    return buffer.getvalue()


def _yolo(tmp_path, data_yaml: bytes, label: bytes = b"0 0.5 0.5 0.2 0.2\n") -> Path:
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(_png())
    (tmp_path / "labels" / "a.txt").write_bytes(label)
    (tmp_path / "data.yaml").write_bytes(data_yaml)
    return tmp_path / "data.yaml"


def test_a_data_yaml_of_nested_aliases_is_refused_at_once(tmp_path):
    """The audit's 419-byte data.yaml took 4.8 GB and 19 s before a traceback."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    lines.append("names: *i")
    path = _yolo(tmp_path, "\n".join(lines).encode())
    start = time.monotonic()
    with pytest.raises(DataError, match="uses YAML aliases"):
        read_yolo(path)
    assert time.monotonic() - start < 5


def test_a_non_utf8_data_yaml_is_one_line(tmp_path):
    with pytest.raises(DataError, match=r"data.yaml: not UTF-8 text"):
        read_yolo(_yolo(tmp_path, b"names: [caf\xe9]\n"))


def test_a_non_utf8_label_file_is_one_line(tmp_path):
    with pytest.raises(DataError, match=r"a.txt: not UTF-8 text"):
        read_yolo(_yolo(tmp_path, b"names: [cat]\n", label=b"0 0.5 0.5 0.2 0.2 \xff\n"))


def test_mixed_type_yolo_names_keys_are_one_line(tmp_path):
    with pytest.raises(DataError, match="names has keys .*expected whole numbers"):
        read_yolo(_yolo(tmp_path, b"names: {0: cat, '1': dog}\n"))


def test_a_coco_image_whose_png_header_says_100000x100000_is_one_line(tmp_path):
    data = bytearray(_png(1, 1))
    struct.pack_into(">II", data, 16, 100_000, 100_000)
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(bytes(data))
    doc = {"images": [{"id": 1, "file_name": "images/a.png", "width": 100_000, "height": 100_000}],
           "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 10]}],
           "categories": [{"id": 1, "name": "cat"}]}
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"a.png.*(100000x100000 pixels, more than|cannot be decoded)"):
        read_coco(tmp_path / "annotations.json")


def test_coco_annotations_nested_100000_deep_are_one_line(tmp_path):
    (tmp_path / "annotations.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match="nested deeper than"):
        read_coco(tmp_path / "annotations.json")


def _npy_header(shape, dtype="|u1") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_a_3_kb_npy_declaring_715_gib_is_refused_from_its_header(tmp_path):
    path = tmp_path / "calib.npy"
    path.write_bytes(_npy_header((5_000_000, 224, 224, 3)) + b"\0" * 3000)
    with pytest.raises(DataError, match=r"declares \d+ bytes of images but holds 3000"):
        read_calibration_npy(path, 224)


def test_an_npy_of_the_wrong_shape_or_a_pickle_is_refused(tmp_path):
    path = tmp_path / "calib.npy"
    np.save(path, np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(DataError, match=r"declares float32 \[2, 8, 8, 3\]; expected .*uint8"):
        read_calibration_npy(path, 8)
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="calib.npy"):
        read_calibration_npy(path, 8)
    images = np.arange(2 * 8 * 8 * 3, dtype=np.uint8).reshape(2, 8, 8, 3)
    np.save(path, images)
    assert np.array_equal(read_calibration_npy(path, 8), images)


def test_a_manifest_from_a_newer_edgeflow_says_which_made_it_and_to_update(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"schema_version": 7, "versions": {"edgeflow": "9.1"}}))
    with pytest.raises(ManifestError, match=r"schema_version 7: it was made by a newer edgeflow \(edgeflow 9.1\).*update edgeflow"):
        manifest_io.load(tmp_path)


def test_a_manifest_nested_100000_deep_is_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ManifestError, match="nested deeper than"):
        manifest_io.load(tmp_path)


def test_a_full_disk_while_tensorflow_saves_names_the_folder(tmp_path):
    """Issue 39: a full disk during a checkpoint or SavedModel save gave a 47-line ResourceExhaustedError traceback."""
    import tensorflow as tf

    from pipeline.disk_full import DiskFull, disk_full_named

    with pytest.raises(DiskFull, match=rf"{tmp_path}: No space left on device \(ENOSPC\) while writing the SavedModel"):
        with disk_full_named(tmp_path, "the SavedModel"):
            raise tf.errors.ResourceExhaustedError(None, None, "/x/variables.data-00000-of-00001.tempstate123; No space left on device")
    import errno

    with pytest.raises(DiskFull, match=r"ckpt.weights.h5: No space left on device"):
        with disk_full_named(tmp_path, "the epoch's checkpoint"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "ckpt.weights.h5"))
    with pytest.raises(tf.errors.ResourceExhaustedError, match="OOM"):  # out of memory is not a full disk
        with disk_full_named(tmp_path, "x"):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")


def test_a_full_disk_during_training_is_one_line_naming_the_path(tmp_path):
    """The same through `pipeline train`, the save's writes failing as a full disk's (an injected error)."""
    from tests.support.helpers import cli, quiet_env

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(  # TensorFlow's own error, raised where Keras writes the SavedModel
        "import os\n"
        "os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')\n"
        "import tensorflow as tf\n"
        "import tf_keras\n"
        "def full(self, *args, **kwargs):\n"
        "    raise tf.errors.ResourceExhaustedError(None, None, 'saved_model/variables/variables.data-00000-of-00001."
        "tempstate1; No space left on device')\n"
        "tf_keras.Model.save = full\n")
    env = quiet_env(PYTHONPATH=f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    result = cli(["train", "--data", "digits", "--epochs", "1", "--out", str(tmp_path / "run")], env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "No space left on device (ENOSPC) while writing the SavedModel" in result.stderr
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_coco_crowd_regions_are_ignored_regions_not_objects(tmp_path):
    """`iscrowd: 1` as COCOeval takes it: not an object to train or score, and a detection on it is neither right
    nor wrong (issue 39: crowds were trained and scored as objects)."""
    from pipeline.tasks.detect.evaluate import Detections, evaluate

    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(_png(100, 100))
    doc = {"images": [{"id": 1, "file_name": "images/a.png", "width": 100, "height": 100}],
           "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20]},
                           {"id": 2, "image_id": 1, "category_id": 1, "bbox": [50, 50, 40, 40], "iscrowd": 1}],
           "categories": [{"id": 1, "name": "person"}]}
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    example = read_coco(tmp_path / "annotations.json").examples[0]
    assert example.boxes.shape == (1, 4) and example.crowd.shape == (1, 4)
    hit = np.array([0.1, 0.1, 0.3, 0.3], np.float32)  # ymin, xmin, ymax, xmax of the one object
    on_crowd = np.array([0.55, 0.55, 0.85, 0.85], np.float32)
    alone = evaluate([example], [Detections(hit[None], np.array([0]), np.array([0.9]))], ["person"])
    with_crowd = evaluate([example], [Detections(np.stack([hit, on_crowd]), np.array([0, 0]), np.array([0.9, 0.95]))], ["person"])
    assert alone.map == pytest.approx(1.0)
    assert with_crowd.map == pytest.approx(alone.map)  # a crowd detection ranked first costs nothing
    doc["annotations"][1]["iscrowd"] = 0  # the same box as an object: that detection is now right, and the object found
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    assert read_coco(tmp_path / "annotations.json").examples[0].boxes.shape == (2, 4)


def test_more_boxes_than_max_boxes_names_the_option_and_the_option_raises_the_cap(tmp_path):
    from pipeline.tasks.detect.data.augment import MAX_BOXES, padded
    from pipeline.tasks.detect.data.examples import make_example

    boxes = [(0.1, 0.1, 0.2, 0.2)] * 33
    example = make_example("crowded.png", _png(), boxes, [0] * 33, 1, "crowded.png")
    with pytest.raises(DataError, match=r"crowded.png: 33 objects; expected at most 32 per image \(--max-boxes 32: raise it"):
        padded([example])
    assert MAX_BOXES == 32
    _, padded_boxes, _, mask = padded([example], max_boxes=40)
    assert padded_boxes.shape == (1, 40, 4) and mask.sum() == 33


def test_train_help_says_what_max_boxes_costs():
    from tests.support.helpers import cli

    result = cli(["train", "--help"])
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "--max-boxes" in flat and "static [batch, N, 4] shape" in flat
