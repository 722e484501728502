"""`pipeline prepare`: class folders -> Kaggle-schema TFRecord shards + labels.txt, read back and trained on."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.helpers import tree_snapshot, write_camera_jpegs, write_class_folders

pytestmark = pytest.mark.host


def _read_back(pattern: str):
    """Every record of the shards, parsed by the schema alone (not by our reader)."""
    import tensorflow as tf

    rows = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        for raw in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            assert set(feature) == {"image", "class", "id"}
            rows.append((Path(path).name, feature["id"].bytes_list.value[0].decode(),
                         feature["class"].int64_list.value[0], feature["image"].bytes_list.value[0]))
    return rows


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """240 camera-size JPEGs in two class folders."""
    return write_camera_jpegs(tmp_path_factory.mktemp("photos") / "folder", per_class=120, size=(160, 120))


def test_240_jpegs_read_back_and_train_as_the_folder_does(photos, tmp_path):
    from pipeline import cli, data, train

    out = tmp_path / "shards"
    result = CliRunner().invoke(cli.main, ["prepare", str(photos), "--out", str(out), "--shard-mb", "0.5"])
    assert result.exit_code == 0, result.output
    assert "wrote 240 records" in result.output
    rows = _read_back(str(out / "*.tfrec"))
    assert len(rows) == 240
    assert (out / "labels.txt").read_text().split() == ["china", "flower"]
    # JPEGs are stored byte for byte under their path relative to the folder.
    for _, ident, label, image in rows:
        assert image == (photos / ident).read_bytes()
        assert ident.split("/")[0] == ["china", "flower"][label]
    # Several shards, each holding both classes in about the overall proportion.
    shards = sorted({r[0] for r in rows})
    assert len(shards) >= 3
    for shard in shards:
        labels = [r[2] for r in rows if r[0] == shard]
        assert 0.35 < np.mean(labels) < 0.65, (shard, labels)
    assert [r[1] for r in rows] != sorted(r[1] for r in rows)  # shuffled

    run_dir = train.train_model(train.TrainConfig(data=str(out / "*.tfrec"), image_size=16, epochs=1, batch_size=32), tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data"]["train"]["kind"] == "tfrecord" and manifest["data"]["train"]["num_examples"] == 240
    # What training on the folder would record: the same classes, split and examples (ids and bytes).
    folder = data.open_source(str(photos))
    split = data.Split(manifest["data"]["split"]["heldout_fraction"], manifest["data"]["split"]["seed"],
                       manifest["data"]["split"]["tuning_fraction"])
    expected = data.identity_record(folder, None, split)
    assert manifest["labels"] == folder.labels == ["china", "flower"]
    assert manifest["data"]["identity"]["classes"] == expected["classes"]
    assert sorted(manifest["data"]["identity"]["heldout"]["examples"]) == sorted(expected["heldout"]["examples"])
    assert manifest["data"]["split"]["train_examples"] == expected["train"]["count"]
    assert manifest["data"]["identity"]["train"]["per_class"] == expected["train"]["per_class"]


def test_same_seed_same_shards_and_other_images_are_reencoded(tmp_path):
    from pipeline import prepare

    folder = write_class_folders(tmp_path / "pngs", per_class=5)  # PNGs
    a = prepare.write_shards(prepare.PrepareConfig(seed=7), str(folder), str(tmp_path / "a"))
    b = prepare.write_shards(prepare.PrepareConfig(seed=7), str(folder), str(tmp_path / "b"))
    assert a.count == b.count == 15 and a.reencoded == 15 and len(a.shards) == 1
    rows_a, rows_b = _read_back(str(tmp_path / "a" / "*.tfrec")), _read_back(str(tmp_path / "b" / "*.tfrec"))
    assert [r[1:] for r in rows_a] == [r[1:] for r in rows_b]
    assert all(r[3][:3] == b"\xff\xd8\xff" for r in rows_a)  # stored as JPEG
    assert {r[1] for r in rows_a} == {p.relative_to(folder).as_posix() for p in folder.rglob("*.png")}


def test_an_out_folder_with_shards_is_refused_and_left_as_it_was(tmp_path):
    from pipeline import prepare
    from pipeline.errors import ConfigError

    folder = write_class_folders(tmp_path / "pngs", per_class=3)
    out = tmp_path / "out"
    prepare.write_shards(prepare.PrepareConfig(), str(folder), str(out))
    before = tree_snapshot(out)
    with pytest.raises(ConfigError, match="already holds .*choose an empty --out"):
        prepare.write_shards(prepare.PrepareConfig(seed=9), str(folder), str(out))
    assert tree_snapshot(out) == before


def test_a_bad_image_is_named_and_nothing_is_written(tmp_path):
    from pipeline import cli

    folder = write_class_folders(tmp_path / "pngs", per_class=3)
    (folder / "hbar" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    result = CliRunner().invoke(cli.main, ["prepare", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "broken.png" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("labels, message", [
    ("a\nb\n", r"class ids \[2\], but its labels.txt names 2 classes"),
    ("a\n\nb\nc\n", "not a list of class names"),
    ("a\na\nc\n", "not a list of class names"),
])
def test_labels_txt_that_disagrees_with_the_class_ids_is_refused(tmp_path, labels, message):
    from pipeline import data
    from pipeline.errors import DataError
    from tests.support.helpers import write_kaggle_tfrecords

    pattern = write_kaggle_tfrecords(tmp_path / "rec", per_class=2, files=1)  # class ids 0, 1, 2
    (tmp_path / "rec" / "labels.txt").write_text(labels)
    with pytest.raises(DataError, match=message):
        data.open_source(pattern)


def test_labels_txt_names_the_classes(tmp_path):
    from pipeline import data
    from pipeline.errors import DataError
    from tests.support.helpers import write_kaggle_tfrecords

    pattern = write_kaggle_tfrecords(tmp_path / "rec", per_class=2, files=1)
    assert data.open_source(pattern).labels == ["0", "1", "2"]  # no labels.txt: ids as names
    (tmp_path / "rec" / "labels.txt").write_text("square\nhbar\nvbar\n")
    assert data.open_source(pattern).labels == ["square", "hbar", "vbar"]
    with pytest.raises(DataError, match="the run's are"):
        data.open_source(pattern, ["hbar", "square", "vbar"])  # held-out data named in another order


def test_a_failed_write_leaves_no_shards_and_no_folder(tmp_path, monkeypatch):
    from pipeline import prepare
    from pipeline.tasks.classify import shards as class_shards  # the classification task's shard writer

    folder = write_class_folders(tmp_path / "pngs", per_class=3)
    monkeypatch.setattr(class_shards, "_check_written", lambda path, ids: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        prepare.write_shards(prepare.PrepareConfig(), str(folder), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (lambda t: [str(t / "nowhere")], "nowhere is not a folder; expected a folder with one sub-folder of images per class"),
    (lambda t: [str(write_class_folders(t / "f", per_class=2)), "--shard-mb", "0"], "shard size 0.0 MB, expected a positive size"),
    (lambda t: [str(write_class_folders(t / "f", per_class=2)), "--jpeg-quality", "101"], "JPEG quality 101, expected 1..100"),
])
def test_bad_prepare_options_exit_1_with_the_reason(tmp_path, args, message):
    from pipeline import cli

    result = CliRunner().invoke(cli.main, ["prepare", *args(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
