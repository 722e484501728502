"""Files from elsewhere are bounded before they are read (issue 39): packed-file members, label files, JSON depth,
image pixels, non-regular files. Each is refused with one line naming the file, never read whole first."""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from edge import InputError, ModelCheckError
from edge.files.bounded import MAX_JSON_DEPTH, loads_json
from edge.documents.schema import load
from edge.model.labels import read_labels
from edge.model.metadata import MAX_PACKED_BYTES, associated_file
from edge.pixels.preprocess import load_image
from tests.support.edge_paths import IMAGES, INT8

REPO = Path(__file__).resolve().parents[3]


def _zip_bomb(size: int, name: str = "edgeflow_model.json") -> bytes:
    """A zip whose one member inflates to `size` bytes of spaces (built in chunks: never `size` bytes in memory)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as member:
            chunk = b" " * (16 << 20)
            for _ in range(size // len(chunk)):
                member.write(chunk)
    return buffer.getvalue()


def test_a_packed_member_that_inflates_to_1_gb_is_refused_within_a_1_gb_limit(tmp_path):
    """The audit's bomb: a ~1 MB model whose packed edgeflow_model.json inflates to 1 GB took 2 GB of memory. Here it
    is read in a child limited to 1 GB of address space more than it starts with, as on a Coral Dev Board."""
    model = tmp_path / "bomb.tflite"
    model.write_bytes(INT8.read_bytes() + _zip_bomb(1 << 30))
    assert model.stat().st_size < 3 << 20
    child = """
import resource, sys
from pathlib import Path
import edge  # the interpreter's libraries are mapped before the limit
from edge.model.metadata import associated_file
from edge.errors import ModelCheckError
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 30), hard))
data = Path(sys.argv[1]).read_bytes()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    associated_file(data, "edgeflow_model.json", "bomb.tflite")
except ModelCheckError as err:
    print("refused:", err)
print("peak KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    result = subprocess.run([sys.executable, "-c", child, str(model)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "refused:" in result.stdout and f"the {MAX_PACKED_BYTES} this edgeflow unpacks" in result.stdout, result.stdout
    grew_kb = int(result.stdout.split("peak KB")[1])
    assert grew_kb < 100_000, f"peak RSS grew by {grew_kb} KB while refusing a packed bomb"


def test_a_packed_member_whose_header_lies_about_its_size_is_cut_at_the_cap():
    archive = bytearray(_zip_bomb(MAX_PACKED_BYTES + (16 << 20)))
    # Say 100 bytes in the central directory's uncompressed size (and drop the zip64 extra's claim).
    central = archive.rfind(b"PK\x01\x02")
    struct.pack_into("<I", archive, central + 24, 100)
    with pytest.raises(ModelCheckError, match="edgeflow_model.json"):
        associated_file(INT8.read_bytes() + bytes(archive), "edgeflow_model.json", "liar.tflite")


def test_an_encrypted_packed_member_is_refused_in_one_line():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("labels.txt", "a\nb\n")
    data = bytearray(buffer.getvalue())
    central = data.rfind(b"PK\x01\x02")
    struct.pack_into("<H", data, central + 8, struct.unpack_from("<H", data, central + 8)[0] | 1)  # "encrypted"
    with pytest.raises(ModelCheckError, match="'labels.txt' is encrypted"):
        associated_file(INT8.read_bytes() + bytes(data), "labels.txt", "locked.tflite")


def test_a_labels_file_bomb_is_refused_from_its_size(tmp_path):
    path = tmp_path / "labels.txt"
    with open(path, "wb") as f:
        f.truncate(2 << 30)  # sparse: 2 GB of nothing, refused before a byte is read
    with pytest.raises(InputError, match=r"labels file .*labels.txt is 2147483648 bytes, more than"):
        read_labels(path)


def test_json_nested_100000_deep_is_one_line(tmp_path):
    path = tmp_path / "model.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        load(path, "sidecar", 1, InputError, "a sidecar")
    with pytest.raises(InputError, match="nested deeper"):
        loads_json('{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "doc", InputError)
    assert loads_json('{"a": ' * 10 + "1" + "}" * 10, "doc", InputError)


def test_edge_classify_names_a_sidecar_nested_100000_deep(tmp_path):
    model = tmp_path / "model.tflite"
    model.write_bytes(INT8.read_bytes())
    (tmp_path / "model.tflite.json").write_text("[" * 100_000 + "]" * 100_000)
    result = subprocess.run([sys.executable, "-m", "edge.cli", "classify", str(model), str(IMAGES / "red.png")],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "nested deeper" in result.stderr


def _png_declaring(width: int, height: int) -> bytes:
    """A real 1x1 PNG whose IHDR says width x height (its CRC fixed): only the header is honest about nothing."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    struct.pack_into(">II", data, 16, width, height)
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    return bytes(data)


@pytest.mark.parametrize("side", [13_000, 100_000])
def test_an_image_bomb_is_refused_from_its_header(side, tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_declaring(side, side))
    with pytest.raises(InputError, match=r"bomb.png is (\d+x\d+ pixels, more than|too large to decode safely)"):
        load_image(path)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "image.png"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        load_image(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        load(fifo, "sidecar", 1, InputError, "a sidecar")
    assert time.monotonic() - start < 5


def test_edge_classify_refuses_a_fifo_image_without_hanging(tmp_path):
    fifo = tmp_path / "cam.png"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, "-m", "edge.cli", "classify", "--no-verify", str(INT8), str(fifo)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert 1 <= result.returncode <= 127 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "FIFO" in result.stderr


@pytest.mark.parametrize("make", ["fifo", "sparse"])
def test_a_model_that_is_a_fifo_or_past_the_size_cap_is_refused_unread(make, tmp_path):
    """The model file is read through the same bounded reader as every other input: a FIFO does not hang `edge
    classify`, and a file past the cap (a sparse 600 MB here, nothing on disk) is refused from its size."""
    model = tmp_path / "model.tflite"
    if make == "fifo":
        os.mkfifo(model)
    else:
        with open(model, "wb") as f:
            f.truncate(600 * 1024 * 1024)
    result = subprocess.run([sys.executable, "-m", "edge.cli", "classify", "--no-verify", str(model), str(IMAGES / "red.png")],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert ("FIFO" if make == "fifo" else "more than the") in result.stderr


@pytest.mark.parametrize("labels", [5, "abc", [1, 2]])
def test_a_sidecar_whose_labels_are_not_a_list_of_names_is_one_line(labels, tmp_path):
    model = tmp_path / "model.tflite"
    model.write_bytes(INT8.read_bytes())
    from edge.model.sidecar import sidecar_record

    record = sidecar_record(model.name, model.read_bytes(), ["red", "green", "blue"])
    record["labels"] = labels
    (tmp_path / "model.tflite.json").write_text(json.dumps(record))
    result = subprocess.run([sys.executable, "-m", "edge.cli", "classify", str(model), str(IMAGES / "red.png")],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "labels" in result.stderr


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_device_results_with_nan_or_infinity_scores_are_refused(bad, tmp_path):
    from edge.documents.predictions import read_predictions

    path = tmp_path / "predictions.json"
    doc = {"schema_version": 1, "model": "m.tflite", "model_sha256": "0" * 64, "backend": "x", "edgetpu": False,
           "predictions": [{"file": "a.png", "id": "a", "label": 0, "sha256": None, "scores": [0.5, 0.5]}]}
    path.write_text(json.dumps(doc).replace("[0.5, 0.5]", f"[0.5, {bad}]"))
    with pytest.raises(InputError, match=r"has scores .*expected a list of numbers \(finite"):
        read_predictions(path)
