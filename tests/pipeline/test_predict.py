"""`pipeline predict`: Kaggle-schema test shards (no `class`) from real photos to a submission file, float and int8,
padding, identities and order, folders and files, bad input, and a run left as it was."""
from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.helpers import REPO, cli, quiet_env, sample_photos, tree_snapshot

pytestmark = [pytest.mark.host, pytest.mark.slow]

CLASSES = 4  # class = which half (left, right) of which of scikit-learn's two photos a crop comes from
TEST_RECORDS = 21  # not a multiple of BATCH: the last batch is padded
BATCH = 8
SIZE = 24


def write_photo_shards(folder: Path, count: int, files: int, with_class: bool, seed: int) -> list:
    """TFRecords in the Kaggle TPU schema from real photos: 40x40 JPEG crops of scikit-learn's two photos, `id` a
    9-hex-digit string as in Kaggle's shards; `class` only when `with_class` (Kaggle's test shards have none).
    Returns [(id, JPEG bytes, class)] in file order (shard by shard)."""
    import tensorflow as tf
    from PIL import Image

    rng = np.random.default_rng(seed)
    photos = [Image.open(io.BytesIO(data)).convert("RGB") for data in sample_photos().values()]
    folder.mkdir(parents=True, exist_ok=True)
    shards = [[] for _ in range(files)]
    for n in range(count):
        label = n % CLASSES
        photo, half = photos[label // 2], photos[label // 2].width // 2
        w, h = int(rng.integers(60, half)), int(rng.integers(60, photo.height))
        x, y = int(rng.integers(0, half - w + 1)) + (label % 2) * half, int(rng.integers(0, photo.height - h + 1))
        out = io.BytesIO()
        photo.crop((x, y, x + w, y + h)).resize((40, 40), Image.BILINEAR).save(out, format="JPEG", quality=90)
        shards[n % files].append((rng.bytes(5).hex()[:9], out.getvalue(), label))
    for k, records in enumerate(shards):
        with tf.io.TFRecordWriter(str(folder / f"{folder.name}{k:02d}-{len(records)}.tfrec")) as writer:
            for ident, image, label in records:
                feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                           "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[ident.encode()]))}
                if with_class:
                    feature["class"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return [record for records in shards for record in records]


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory):
    """The competition's layout (train, val with `class`; test without), a tiny model trained on it, exported to int8."""
    from pipeline import export, train

    root = tmp_path_factory.mktemp("kaggle") / "tfrecords-jpeg-40x40"
    write_photo_shards(root / "train", 96, 2, True, 0)
    write_photo_shards(root / "val", 24, 1, True, 1)
    test = write_photo_shards(root / "test", TEST_RECORDS, 2, False, 2)
    run_dir = root.parent / "run"
    train.train_model(train.TrainConfig(data=str(root / "train" / "*.tfrec"), val_data=str(root / "val" / "*.tfrec"), image_size=SIZE,
                                epochs=3, batch_size=16), run_dir)
    export.export_model(export.ExportConfig(mode=export.Mode.INT8), run_dir)
    return {"root": root, "run": run_dir, "test": test, "test_glob": str(root / "test" / "*.tfrec")}


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def _refused(result, *needles) -> None:
    """Exit 1 through the CLI's error report (SystemExit, not an exception CliRunner caught), every needle shown."""
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    for needle in needles:
        assert needle in result.output, (needle, result.output)


def _rows(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def float_csv(kaggle, tmp_path_factory):
    out = tmp_path_factory.mktemp("float") / "submission.csv"
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--batch-size", BATCH)
    assert result.exit_code == 0, result.output
    assert re.search(r"[0-9.]+ images/s", result.output)
    return out


@pytest.fixture(scope="module")
def int8_csv(kaggle, tmp_path_factory):
    out = tmp_path_factory.mktemp("int8") / "submission.csv"
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--model", "int8")
    assert result.exit_code == 0, result.output
    return out


def _savedmodel_labels(run_dir: Path, images: list) -> np.ndarray:
    """The SavedModel's top-1 for encoded images decoded as training decodes them, all in one batch."""
    import tensorflow as tf

    from pipeline import data

    pixels = np.stack([data.training_pixels(image, SIZE) for image in images])
    serve = tf.saved_model.load(str(run_dir / "saved_model")).signatures["serving_default"]
    return next(iter(serve(tf.constant(pixels, tf.float32)).values())).numpy().argmax(axis=1)


def test_float_submission_is_one_row_per_test_record_in_order(kaggle, float_csv):
    rows = _rows(float_csv)
    assert rows[0] == ["id", "label"]
    assert [r[0] for r in rows[1:]] == [ident for ident, _, _ in kaggle["test"]]  # every record once, padding dropped
    expected = _savedmodel_labels(kaggle["run"], [image for _, image, _ in kaggle["test"]])
    assert [int(r[1]) for r in rows[1:]] == expected.tolist()
    assert len(set(expected.tolist())) > 1  # a model that answers one class for all would prove little


def test_batches_have_static_shapes_and_the_padding_is_marked():
    import tensorflow as tf

    from pipeline.inference.batched import padded_batches

    images = np.arange(TEST_RECORDS * SIZE * SIZE * 3, dtype=np.int64).astype(np.uint8).reshape(TEST_RECORDS, SIZE, SIZE, 3)
    ds = padded_batches(tf.data.Dataset.from_tensor_slices((np.arange(TEST_RECORDS, dtype=np.int64), images)), BATCH, SIZE)
    assert [tuple(spec.shape) for spec in ds.element_spec] == [(BATCH,), (BATCH, SIZE, SIZE, 3)]  # what a TPU needs
    batches = [(p.numpy(), x.numpy()) for p, x in ds]
    positions = np.concatenate([p for p, _ in batches])
    assert positions.tolist() == list(range(TEST_RECORDS)) + [-1] * (3 * BATCH - TEST_RECORDS)
    assert not batches[-1][1][TEST_RECORDS % BATCH:].any()  # blank padding images


def test_int8_submission_answers_as_edge_classify(kaggle, int8_csv, tmp_path):
    files = []
    for i, (_, image, _) in enumerate(kaggle["test"]):
        files.append(tmp_path / f"{i:03d}.jpg")
        files[-1].write_bytes(image)  # the record's JPEG byte for byte
    done = subprocess.run([sys.executable, "-m", "edge.cli", "classify", str(kaggle["run"] / "model_int8.tflite"), *map(str, files),
                           "--top-k", "1"], capture_output=True, text=True, timeout=300, cwd=REPO, env=quiet_env())
    assert done.returncode == 0, done.stderr
    device = [int(m) for m in re.findall(r"\(id (\d+)\)", done.stdout)]
    rows = _rows(int8_csv)
    assert rows[0] == ["id", "label"]
    assert [r[0] for r in rows[1:]] == [ident for ident, _, _ in kaggle["test"]]
    assert [int(r[1]) for r in rows[1:]] == device and len(device) == TEST_RECORDS


def test_padding_under_mirrored_strategy_predicts_every_record_once(kaggle, float_csv, tmp_path):
    out = tmp_path / "mirrored.csv"
    # 21 records, global batch 6 over 2 replicas: the last batch holds 3 records and 3 blanks.
    result = cli(["predict", str(kaggle["run"]), "--data", kaggle["test_glob"], "--out", str(out), "--batch-size", "6",
                  "--cpu-replicas", "2"])
    assert result.returncode == 0, result.stderr
    assert "MirroredStrategy over 2 logical CPU devices" in result.stderr
    assert out.read_text() == float_csv.read_text()


def test_json_and_top_k_carry_names_and_scores(kaggle, tmp_path):
    out = tmp_path / "answers.json"
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--top-k", 3, "--batch-size", BATCH)
    assert result.exit_code == 0, result.output
    answers = json.loads(out.read_text())
    assert [p["id"] for p in answers["predictions"]] == [ident for ident, _, _ in kaggle["test"]]
    import tensorflow as tf

    from pipeline import data

    pixels = np.stack([data.training_pixels(image, SIZE) for _, image, _ in kaggle["test"]])
    serve = tf.saved_model.load(str(kaggle["run"] / "saved_model")).signatures["serving_default"]
    scores = next(iter(serve(tf.constant(pixels, tf.float32)).values())).numpy()
    for p, row in zip(answers["predictions"], scores):
        assert [t["label"] for t in p["top_k"]] == np.argsort(-row, kind="stable")[:3].tolist()
        assert [t["name"] for t in p["top_k"]] == [answers["labels"][t["label"]] for t in p["top_k"]]
        np.testing.assert_allclose([t["score"] for t in p["top_k"]], row[[t["label"] for t in p["top_k"]]], atol=1e-5)
        assert (p["label"], p["name"], p["score"]) == (p["top_k"][0]["label"], p["top_k"][0]["name"], p["top_k"][0]["score"])
    csv_out = tmp_path / "top2.csv"
    assert _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", csv_out, "--top-k", 2,
                     "--model", "int8").exit_code == 0
    rows = _rows(csv_out)
    assert rows[0] == ["id", "label", "name", "score", "label_2", "name_2", "score_2"]
    assert all(float(r[3]) >= float(r[6]) for r in rows[1:])


def test_folders_files_and_labelled_shards(kaggle, int8_csv, tmp_path):
    by_id = {r[0]: r[1] for r in _rows(int8_csv)[1:]}
    images = tmp_path / "photos"
    expected = {}
    for i, (ident, image, _) in enumerate(kaggle["test"][:6]):
        rel = f"{['daisy', 'rose'][i % 2]}/{ident}.jpg" if i < 4 else f"{ident}.jpg"  # class folders and flat files
        (images / rel).parent.mkdir(parents=True, exist_ok=True)
        (images / rel).write_bytes(image)
        expected[rel] = by_id[ident]
    (images / "notes.txt").write_text("not an image")
    out = tmp_path / "folder.csv"
    result = _pipeline("predict", kaggle["run"], "--data", images, "--out", out, "--model", "int8")
    assert result.exit_code == 0, result.output
    rows = _rows(out)[1:]
    assert [r[0] for r in rows] == sorted(expected)  # the path relative to the folder, in path order
    assert {r[0]: r[1] for r in rows} == expected
    one = sorted(images.glob("*.jpg"))[0]
    result = _pipeline("predict", kaggle["run"], "--data", one, "--data", images / "rose" / "*.jpg", "--out", out, "--model", "int8",
                       "--overwrite")
    assert result.exit_code == 0, result.output
    assert [r[0] for r in _rows(out)[1:]] == [str(one)] + sorted(str(p) for p in (images / "rose").glob("*.jpg"))
    # Labelled shards are accepted, labels ignored: the validation shards predict like test shards.
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["root"] / "val" / "*.tfrec", "--out", out, "--model", "int8",
                       "--overwrite")
    assert result.exit_code == 0, result.output
    assert len(_rows(out)) == 1 + 24


def test_predict_leaves_the_run_as_it_was(kaggle, float_csv, int8_csv, tmp_path):
    before = tree_snapshot(kaggle["run"])
    for model in ("float", "int8"):
        out = tmp_path / f"again-{model}.csv"
        assert _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--model", model).exit_code == 0
    # Inside the run, --out is refused (issue 39: `--out RUN/manifest.json` overwrote the manifest), --overwrite or not.
    for out in (kaggle["run"] / "manifest.json", kaggle["run"] / "again.csv"):
        result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--overwrite")
        assert result.exit_code == 1 and "is inside the run directory" in result.output, result.output
    assert tree_snapshot(kaggle["run"]) == before


def _rewrite(kaggle, folder: Path, change) -> str:
    """The test shards copied into one shard, each record passed through change(index, tf.train.Example)."""
    import tensorflow as tf

    folder.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / "test00.tfrec")) as writer:
        for i, (ident, image, _) in enumerate(kaggle["test"]):
            example = tf.train.Example()
            example.features.feature["image"].bytes_list.value.append(image)
            example.features.feature["id"].bytes_list.value.append(ident.encode())
            change(i, example)
            writer.write(example.SerializeToString())
    return str(folder / "*.tfrec")


def _no_id(i, example):
    if i == 3:
        del example.features.feature["id"]


def _duplicate_id(i, example):
    if i == 5:
        example.features.feature["id"].bytes_list.value[0] = b"shared"
    if i == 9:
        example.features.feature["id"].bytes_list.value[0] = b"shared"


def _damaged_jpeg(i, example):
    if i == 7:
        image = example.features.feature["image"].bytes_list.value[0]
        example.features.feature["image"].bytes_list.value[0] = image[:len(image) // 3]  # a truncated JPEG


@pytest.mark.parametrize("model", ["float", "int8"])
@pytest.mark.parametrize("change, named", [
    (_no_id, "record 3 has no 'id' feature"),
    (_duplicate_id, "record 9 repeats id 'shared' (first at"),
    (_damaged_jpeg, "cannot read image"),
], ids=["missing-id", "duplicate-id", "damaged-jpeg"])
def test_bad_input_is_refused_named_and_nothing_written(kaggle, tmp_path, model, change, named):
    spec = _rewrite(kaggle, tmp_path / "bad", change)
    out = tmp_path / "submission.csv"
    result = _pipeline("predict", kaggle["run"], "--data", spec, "--out", out, "--model", model)
    _refused(result, named, "nothing was written")
    if change is _damaged_jpeg:
        assert f"record 7 (id '{kaggle['test'][7][0]}')" in result.output
    assert not out.exists() and list(tmp_path.glob(".submission*")) == []


def test_empty_glob_is_refused(kaggle, tmp_path):
    out = tmp_path / "submission.csv"
    result = _pipeline("predict", kaggle["run"], "--data", tmp_path / "test" / "*.tfrec", "--out", out)
    _refused(result, "no files match", str(tmp_path / "test"))
    assert not out.exists()


def test_skip_bad_predicts_the_others_and_lists_the_bad(kaggle, tmp_path):
    spec = _rewrite(kaggle, tmp_path / "bad", lambda i, e: (_no_id(i, e), _damaged_jpeg(i, e)))
    out = tmp_path / "answers.json"
    result = _pipeline("predict", kaggle["run"], "--data", spec, "--out", out, "--skip-bad", "--batch-size", BATCH)
    assert result.exit_code == 0, result.output
    assert "skipped: " in result.output and "record 3 has no 'id'" in result.output and "record 7" in result.output
    answers = json.loads(out.read_text())
    kept = [ident for i, (ident, _, _) in enumerate(kaggle["test"]) if i not in (3, 7)]
    assert [p["id"] for p in answers["predictions"]] == kept
    assert len(answers["skipped"]) == 2


def test_options_that_do_not_apply_are_refused(kaggle, tmp_path):
    out = tmp_path / "x.csv"
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--model", "int8", "--batch-size", 8)
    _refused(result, "--batch-size apply to --model float")
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--top-k", 9)
    _refused(result, "the model has 4 classes")
    result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--model", "edgetpu")
    _refused(result, "pipeline compile")
    assert not out.exists()


def test_int8_answers_are_the_same_bytes_with_1_and_n_decode_workers(kaggle, int8_csv, tmp_path):
    for workers in ("1", "3"):
        out = tmp_path / f"w{workers}.csv"
        result = _pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, "--model", "int8",
                           "--workers", workers)
        assert result.exit_code == 0, result.output
        assert out.read_bytes() == int8_csv.read_bytes()  # the default (edge.files.workers) wrote int8_csv


@pytest.mark.parametrize("args, needle", [(("--model", "int8", "--workers", "0"), "--workers 0, expected 1 or more"),
                                          (("--workers", "2"), "--workers applies to the TFLite models")])
def test_workers_below_one_or_for_the_float_model_are_refused(kaggle, tmp_path, args, needle):
    out = tmp_path / "x.csv"
    _refused(_pipeline("predict", kaggle["run"], "--data", kaggle["test_glob"], "--out", out, *args), needle)
    assert not out.exists()
