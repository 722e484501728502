"""Our TFLite metadata writer, checked by readers we did not write.

  - tflite-support 0.4.4's generated flatbuffer classes for metadata_schema.fbs (pure Python, in the side venv
    .ci/tflite-support-env): every field we write, for a classifier and for a detector's four outputs;
  - tflite-support 0.4.4's MetadataDisplayer and its own min_parser_version computation (its native module,
    which needs the system library libusb-1.0: skipped, naming that, where it is missing);
  - edge's reader (edge/model/metadata.py) on Google's models and ours.
MediaPipe's ImageClassifier reads our exported models in tests/pipeline/metadata/test_standalone_model.py.
"""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.device_env import shared_env
from tests.support.helpers import REPO

pytestmark = pytest.mark.host

CORAL = REPO.parent / "shared" / "reference" / "coral"
LIBUSB_MISSING = "libusb-1.0.so.0: cannot open shared object file"

# Every field of a metadata flatbuffer, as tflite-support's generated object API unpacks it (no native code).
_GENERATED_READER = """
import json, sys
from tensorflow_lite_support.metadata import metadata_schema_py_generated as schema
blob = open(sys.argv[1], "rb").read()
assert schema.ModelMetadata.ModelMetadataBufferHasIdentifier(blob, 0), "no M001 identifier"
def plain(o):
    if isinstance(o, bytes):
        return o.decode("utf-8")
    if isinstance(o, (list, tuple)):
        return [plain(x) for x in o]
    if hasattr(o, "tolist"):
        return plain(o.tolist())
    if hasattr(o, "__dict__"):
        return {k: plain(v) for k, v in vars(o).items() if v is not None}
    return o
print(json.dumps(plain(schema.ModelMetadataT.InitFromObj(schema.ModelMetadata.GetRootAs(blob, 0)))))
"""

# tflite-support's own tools (native module): its displayer on a whole model, its parser version of a buffer.
_DISPLAYER = """
import json, sys
try:
    from tflite_support import metadata
    from tensorflow_lite_support.metadata.cc.python import _pywrap_metadata_version
except ImportError as err:
    print(json.dumps({"import_error": str(err)}))
    sys.exit(0)
out = {}
if sys.argv[1] == "model":
    shown = metadata.MetadataDisplayer.with_model_buffer(open(sys.argv[2], "rb").read())
    out = {"json": json.loads(shown.get_metadata_json()), "packed": sorted(shown.get_packed_associated_file_list()),
           "files": {n: shown.get_associated_file_buffer(n).decode("utf-8") for n in shown.get_packed_associated_file_list()}}
else:
    out = {"versions": [_pywrap_metadata_version.GetMinimumMetadataParserVersion(open(p, "rb").read()) for p in sys.argv[2:]]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tflite_support(tmp_path_factory) -> Path:
    """The Python of .ci/tflite-support-env, built once for the test session."""
    return shared_env(tmp_path_factory, "tflite-support-env") / "bin" / "python"


def _run(python: Path, script: str, *args) -> dict:
    done = subprocess.run([str(python), "-c", script, *[str(a) for a in args]], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _native(python: Path, *args) -> dict:
    """tflite-support's native tools; skipped, naming the library, where libusb-1.0 is missing."""
    out = _run(python, _DISPLAYER, *args)
    if LIBUSB_MISSING in out.get("import_error", ""):
        pytest.skip("tflite-support 0.4.4's native module needs the system library libusb-1.0 (Debian package "
                    "libusb-1.0-0), which this machine lacks; .ci/run installs it for this test")
    assert "import_error" not in out, out["import_error"]
    return out


def _classifier():
    from pipeline.metadata.description import (AssociatedFile, ColorSpace, FeatureContent, FileType, ImageContent,
                                               ModelDescription, Normalization, Stats, Tensor)

    labels = AssociatedFile("labels.txt", b"cat\ndog\n", FileType.TENSOR_AXIS_LABELS, "class names")
    return ModelDescription(
        name="pets", description="two classes", version="v1", author="edgeflow", license="Apache-2.0",
        inputs=(Tensor("image", "RGB image", ImageContent(ColorSpace.RGB, default_size=(224, 224)),
                       (Normalization((127.5, 127.0, 126.5), (127.5, 128.0, 128.5)),), Stats((255.0,), (0.0,))),),
        outputs=(Tensor("scores", "probabilities", FeatureContent(), files=(labels,), dimension_names=("batch", "class")),),
        files=(AssociatedFile("record.json", b"{}", FileType.DESCRIPTIONS, "where it came from"),))


def _detector():
    """A detector's four outputs, as MediaPipe's ObjectDetector expects them: what the next model kind will write."""
    from pipeline.metadata.description import (AssociatedFile, BoundingBoxContent, BoxType, CoordinateType, FeatureContent,
                                               FileType, ImageContent, ModelDescription, Normalization, ScoreCalibration,
                                               ScoreThreshold, ScoreTransform, Tensor)

    labels = AssociatedFile("labelmap.txt", b"person\ncar\n", FileType.TENSOR_VALUE_LABELS, "class names", locale="en")
    calibration = AssociatedFile("calibration.csv", b"1.0,2.0,0.5\n\n", FileType.TENSOR_AXIS_SCORE_CALIBRATION, version="2")
    return ModelDescription(
        name="detector",
        inputs=(Tensor("image", content=ImageContent(), process_units=(Normalization((127.5,), (127.5,)),)),),
        outputs=(Tensor("location", content=BoundingBoxContent(BoxType.BOUNDARIES, CoordinateType.RATIO, (1, 0, 3, 2), (2, 2))),
                 Tensor("category", content=FeatureContent((2, 2)), files=(labels,)),
                 Tensor("score", content=FeatureContent((2, 2)), files=(calibration,),
                        process_units=(ScoreCalibration(ScoreTransform.INVERSE_LOGISTIC, 0.2), ScoreThreshold(0.3))),
                 Tensor("number of detections", content=FeatureContent())))


@pytest.mark.slow
def test_a_classifiers_metadata_reads_back_field_for_field_in_tflite_supports_generated_classes(tflite_support, tmp_path):
    from pipeline.metadata import flatbuffer

    blob = tmp_path / "classifier.tflitemeta"
    blob.write_bytes(flatbuffer.encode(_classifier()))
    read = _run(tflite_support, _GENERATED_READER, blob)
    image, scores = read["subgraphMetadata"][0]["inputTensorMetadata"][0], read["subgraphMetadata"][0]["outputTensorMetadata"][0]
    assert {k: read[k] for k in ("name", "description", "version", "author", "license", "minParserVersion")} == {
        "name": "pets", "description": "two classes", "version": "v1", "author": "edgeflow", "license": "Apache-2.0",
        "minParserVersion": "1.0.0"}
    assert read["associatedFiles"] == [{"name": "record.json", "description": "where it came from", "type": 1}]
    assert image["content"] == {"contentPropertiesType": 2,
                                "contentProperties": {"colorSpace": 1, "defaultSize": {"width": 224, "height": 224}}}
    assert image["processUnits"] == [{"optionsType": 1, "options": {"mean": [127.5, 127.0, 126.5], "std": [127.5, 128.0, 128.5]}}]
    assert image["stats"] == {"max": [255.0], "min": [0.0]} and image["name"] == "image"
    assert scores["content"] == {"contentPropertiesType": 1, "contentProperties": {}}
    assert scores["associatedFiles"] == [{"name": "labels.txt", "description": "class names", "type": 2}]
    assert scores["dimensionNames"] == ["batch", "class"]


@pytest.mark.slow
def test_a_detectors_four_outputs_read_back_in_tflite_supports_generated_classes(tflite_support, tmp_path):
    from pipeline.metadata import flatbuffer

    blob = tmp_path / "detector.tflitemeta"
    blob.write_bytes(flatbuffer.encode(_detector()))
    read = _run(tflite_support, _GENERATED_READER, blob)
    location, category, score, number = read["subgraphMetadata"][0]["outputTensorMetadata"]
    assert location["content"] == {"contentPropertiesType": 3, "range": {"min": 2, "max": 2},
                                   "contentProperties": {"index": [1, 0, 3, 2], "type": 1, "coordinateType": 0}}
    assert category["content"] == {"contentPropertiesType": 1, "contentProperties": {}, "range": {"min": 2, "max": 2}}
    assert category["associatedFiles"] == [{"name": "labelmap.txt", "description": "class names", "type": 3, "locale": "en"}]
    assert score["processUnits"] == [{"optionsType": 2, "options": {"scoreTransformation": 2, "defaultScore": pytest.approx(0.2)}},
                                     {"optionsType": 3, "options": {"globalScoreThreshold": pytest.approx(0.3)}}]
    assert score["associatedFiles"] == [{"name": "calibration.csv", "type": 4, "version": "2"}]
    assert number["name"] == "number of detections" and number["content"]["contentPropertiesType"] == 1
    assert read["minParserVersion"] == "1.4.1"  # AssociatedFile.version came with schema 1.4.1


@pytest.mark.slow
def test_min_parser_version_is_what_tflite_support_computes(tflite_support, tmp_path):
    from dataclasses import replace

    from pipeline.metadata import flatbuffer
    from pipeline.metadata.description import AssociatedFile, FileType

    vocabulary = AssociatedFile("vocab.txt", b"a\n", FileType.VOCABULARY)
    cases = [_classifier(), _detector(), replace(_classifier(), files=(vocabulary,))]
    paths = []
    for i, described in enumerate(cases):
        paths.append(tmp_path / f"{i}.tflitemeta")
        paths[-1].write_bytes(flatbuffer.encode(described))
    ours = [flatbuffer.min_parser_version(d) for d in cases]
    assert ours == ["1.0.0", "1.4.1", "1.0.1"]
    assert _native(tflite_support, "versions", *paths)["versions"] == ours


def _write_to_googles_model(described):
    from pipeline.metadata import write

    return write((CORAL / "mobilenet_v1_0.25_128_quant.tflite").read_bytes(), described)


@pytest.mark.slow
def test_tflite_supports_displayer_reads_a_model_we_wrote(tflite_support, tmp_path):
    model = tmp_path / "model.tflite"
    model.write_bytes(_write_to_googles_model(_classifier()))
    shown = _native(tflite_support, "model", model)
    assert shown["packed"] == ["labels.txt", "record.json"]
    assert shown["files"]["labels.txt"] == "cat\ndog\n"
    assert shown["json"]["name"] == "pets" and shown["json"]["min_parser_version"] == "1.0.0"
    unit = shown["json"]["subgraph_metadata"][0]["input_tensor_metadata"][0]["process_units"][0]
    assert unit == {"options_type": "NormalizationOptions", "options": {"mean": [127.5, 127.0, 126.5], "std": [127.5, 128.0, 128.5]}}


def test_edge_reads_what_we_wrote_and_the_model_still_runs():
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from edge.model.labels import labels_from_model
    from edge.model.metadata import associated_file, read_metadata

    original = (CORAL / "mobilenet_v1_0.25_128_quant.tflite").read_bytes()
    data = _write_to_googles_model(_classifier())
    meta = read_metadata(data, "model")
    assert meta.name == "pets" and meta.mean == (127.5, 127.0, 126.5) and meta.inputs[0].color_space == "RGB"
    assert labels_from_model(data) == ["cat", "dog"] and associated_file(data, "record.json") == b"{}"
    image = np.random.default_rng(0).integers(0, 256, (1, 128, 128, 3), dtype=np.uint8)
    answers = []
    for model in (original, data):  # the rewritten model answers as Google's own file does, byte for byte
        interpreter = Interpreter(model_content=model)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
        interpreter.invoke()
        answers.append(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy())
    assert np.array_equal(answers[0], answers[1])


def test_packing_twice_gives_the_same_bytes_and_a_stored_zip_with_a_fixed_date():
    first, second = _write_to_googles_model(_classifier()), _write_to_googles_model(_classifier())
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == ["record.json", "labels.txt"]
    assert all(i.date_time == (1980, 1, 1, 0, 0, 0) and i.compress_type == zipfile.ZIP_STORED for i in infos)


def test_writing_again_replaces_the_metadata_and_the_files():
    from dataclasses import replace

    from edge.model.metadata import read_metadata
    from pipeline.metadata import model_file, write

    once = _write_to_googles_model(_classifier())
    twice = write(once, replace(_classifier(), name="renamed", files=()))
    root = read_metadata(twice)
    assert root.name == "renamed" and [f.name for f in root.associated_files] == []
    assert [name for name, _ in model_file.carried(twice)[1]] == ["labels.txt"]  # record.json went with its entry


def test_bad_descriptions_and_models_are_clear_errors():
    from dataclasses import replace

    from pipeline.metadata import flatbuffer, write
    from pipeline.metadata.description import AssociatedFile, Normalization, Tensor

    zero_std = replace(_classifier(), inputs=(Tensor("image", process_units=(Normalization((0.0,), (0.0,)),)),))
    with pytest.raises(ValueError, match=r"tensor 'image': normalization mean \[0.0\], std \[0.0\]; expected .*no zero std"):
        flatbuffer.encode(zero_std)
    with pytest.raises(ValueError, match=r"associated file name 'a/b.txt': expected a bare file name"):
        flatbuffer.encode(replace(_classifier(), files=(AssociatedFile("a/b.txt", b""),)))
    clash = replace(_classifier(), files=(AssociatedFile("labels.txt", b"other"),))
    with pytest.raises(ValueError, match=r"two different files are named 'labels.txt'"):
        write((CORAL / "mobilenet_v1_0.25_128_quant.tflite").read_bytes(), clash)
    with pytest.raises(ValueError, match=r"not a TFLite model: expected b'TFL3' at bytes 4..8"):
        write(b"just some text, long enough", _classifier())


def _custom_payloads(data: bytes):
    """custom_options of every custom op (the Edge TPU package sits in edgetpu-custom-op's), read with the tflite package."""
    import tflite

    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    return [graph.Operators(i).CustomOptionsAsNumpy().tobytes() for i in range(graph.OperatorsLength())
            if graph.Operators(i).CustomOptionsLength()]


def test_a_compiled_model_that_lost_the_metadata_gets_it_back(tmp_path):
    """Real files: Google's compiled MobileNet-EdgeTPU twin (no metadata) gets the metadata and labels of Google's
    MobileNet v1 CPU model; its Edge TPU package survives the rewrite. (Compiler 16 itself keeps metadata: the
    compiled twin of mobilenet_v1_0.25_128_quant still holds its labels, so `pipeline compile` only repairs.)"""
    from edge.model.labels import labels_from_model
    from edge.model.metadata import read_metadata
    from pipeline import metadata
    from pipeline.edgetpu import compiled_check

    source = CORAL / "mobilenet_v1_0.25_128_quant.tflite"
    compiled, twin = tmp_path / "model_int8_edgetpu.tflite", CORAL / "mobilenet_edgetpu_0.75_224_post_training_quant_edgetpu.tflite"
    shutil.copy(twin, compiled)
    before = compiled_check.read_compiled(compiled)
    assert metadata.restore(source, compiled) is True
    assert read_metadata(compiled.read_bytes()) == read_metadata(source.read_bytes())
    assert labels_from_model(compiled.read_bytes())[89] == "macaw"
    after = compiled_check.read_compiled(compiled)
    assert after.inputs == before.inputs and after.outputs == before.outputs and after.cpu_ops == before.cpu_ops
    assert _custom_payloads(compiled.read_bytes()) == _custom_payloads(twin.read_bytes())  # the Edge TPU package, byte for byte
    assert metadata.restore(source, compiled) is False  # it has metadata now: nothing to put back
