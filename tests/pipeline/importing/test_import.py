"""`pipeline import`: a classifier trained by a plain Keras script that knows nothing of edgeflow (its own Rescaling,
its own class order), saved as .keras and as a SavedModel, goes through export --int8, the Edge TPU pre-flight and
parity with the default gate, and its labels come out right in pycoral's classify_image.py on the int8 file alone.
Bad models and options are refused with one line, exit 1, nothing written.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.support import device_env
from tests.support.helpers import REPO, cli, manifest_of, quiet_env, write_class_folders

pytestmark = [pytest.mark.host, pytest.mark.slow]

PYCORAL = REPO.parent / "shared" / "reference" / "pycoral"
ORDER = ["vbar", "square", "hbar"]  # the script's own class order: not the folders' sorted one

# The user's own training script: Keras 3 only, no edgeflow.
PLAIN_KERAS_SCRIPT = f"""
import sys
import keras

data, out = sys.argv[1], sys.argv[2]
keras.utils.set_random_seed(0)
order = {ORDER!r}
train = keras.utils.image_dataset_from_directory(data, class_names=order, image_size=(32, 32), batch_size=16, seed=0)
model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Rescaling(1 / 255.0),
    keras.layers.Conv2D(8, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(3, activation="softmax"),
])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(train, epochs=15, verbose=0)
model.save(out + "/model.keras")
model.export(out + "/saved_model", verbose=False)
open(out + "/labels.txt", "w").write("\\n".join(order) + "\\n")
"""

# pycoral's classify_image.py run as a program with the labels packed in the model (extracted by the driver, as a
# user would with any metadata reader): its last line is "NAME: score".
_PYCORAL_DRIVER = """
import contextlib, io, json, runpy, sys
script, model, labels, images = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
answers = []
for image in images:
    sys.argv = [script, "-m", model, "-l", labels, "-i", image]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(script, run_name="__main__")
    answers.append(out.getvalue().strip().splitlines()[-1].rsplit(":", 1)[0])
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def brought(tmp_path_factory):
    """Class folders and the model the plain script trained on them (.keras, SavedModel, its labels.txt)."""
    root = tmp_path_factory.mktemp("brought")
    data = write_class_folders(root / "shapes", per_class=30)
    out = root / "model"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", PLAIN_KERAS_SCRIPT, str(data), str(out)], capture_output=True, text=True,
                          timeout=600, env=quiet_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return data, out


def _ok(args):
    done = cli([str(a) for a in args], timeout=600)
    assert done.returncode == 0, f"{args[:2]}: {done.stdout[-1500:]}{done.stderr[-3000:]}"
    return done


def test_keras_file_imports_and_passes_every_stage(brought, tmp_path, tmp_path_factory):
    data, made = brought
    run = tmp_path / "run"
    _ok(["import", made / "model.keras", "--data", data, "--labels", made / "labels.txt", "--out", run])
    manifest = manifest_of(run)
    assert manifest["labels"] == ORDER and manifest["origin"]["format"] == "keras"
    contract = manifest["origin"]["input_contract"]
    assert contract["image_size"] == 32 and contract["layout"] == "nhwc"
    assert contract["mean"] == [0.0] * 3 and contract["std"] == [1.0] * 3 and "Rescaling" in contract["normalization"]
    assert (run / manifest["origin"]["copy"]).read_bytes() == (made / "model.keras").read_bytes()
    _ok(["export", run, "--int8"])
    preflight = _ok(["compile", run, "--check-only", "--require-full-mapping", "--json"])
    assert json.loads(preflight.stdout.strip().splitlines()[-1])["ops_on_cpu"] == 0
    _ok(["parity", run])  # the default gate, against the original Keras model
    report = json.loads((run / "parity" / "report.json").read_text())
    assert "Keras" in report["reference_model"] and report["models"]["int8_cpu"]["top1"] >= 0.9

    # pycoral's classify_image.py on the int8 file alone, with the labels packed in it: names, not only ids.
    bundle = tmp_path / "bundle"
    _ok(["parity", run, "--bundle", bundle])
    entries = json.loads((bundle / "bundle.json").read_text())
    images = [bundle / e["file"] for e in entries["images"]]
    truth = [ORDER[e["label"]] for e in entries["images"]]
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(run / "model_int8.tflite", alone / "model.tflite")
    from edge.model.labels import labels_from_model

    packed = labels_from_model((alone / "model.tflite").read_bytes())
    assert packed == ORDER
    (alone / "labels.txt").write_text("\n".join(packed) + "\n")
    env_bin = device_env.shared_env(tmp_path_factory, "edge-env") / "bin"
    done = subprocess.run([str(env_bin / "python"), "-c", _PYCORAL_DRIVER, str(PYCORAL / "classify_image.py"), "model.tflite",
                           "labels.txt", *map(str, images)], cwd=alone, capture_output=True, text=True, timeout=900,
                          env={**quiet_env(), "PYTHONPATH": str(PYCORAL)})
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    right = np.mean([a == t for a, t in zip(answers, truth)])
    assert right >= report["clients"]["pycoral"]["top1"] - 0.02, (answers, truth)


def test_saved_model_folder_imports_with_its_normalization_given(brought, tmp_path):
    data, made = brought
    run = tmp_path / "run"
    refused = cli(["import", str(made / "saved_model"), "--data", str(data), "--labels", str(made / "labels.txt"),
                   "--out", str(run)])
    assert refused.returncode == 1 and "does not say how its input is normalized" in refused.stderr
    assert not run.exists()
    _ok(["import", made / "saved_model", "--data", data, "--labels", made / "labels.txt", "--input-range", "0,255", "--out", run])
    assert manifest_of(run)["origin"]["format"] == "savedmodel"
    _ok(["export", run, "--int8"])
    _ok(["compile", run, "--check-only", "--require-full-mapping"])
    _ok(["parity", run])
