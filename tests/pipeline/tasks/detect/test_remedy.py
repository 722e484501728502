"""The remedy ladder (pipeline/remedy/ladder.py) on a detection run: the same ladder, scored by the detection gate's
metrics on a tuning split of training images (pipeline/tasks/detect/tuning.py), repairs a failing int8 export,
records every attempt and the rungs that do not apply to a detector, and writes the chosen model with the rung
named in its manifest entry and its metadata.

The failure is real: calibrating on black images collapses the activation ranges, so the int8 detector parts
from the float one on about a fifth of its detections; calibrating again on training images (the ladder's first
rung, or bias correction on top of it) repairs it. On the session's small detector (tests/support/detect_trained.py: 12 epochs at
128 px, held-out mAP@.5 about 0.5; agreement 0.80 on black frames, 0.97 recalibrated) that shows in agreement, which a
detection gate limits when --min-agreement is given (as here: 0.9), more than in the mAP@.5 drop; on the `shapes`
detector trained with defaults the same calibration drops mAP@.5 by 2.44 pp (bench/results/remedy.md).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.detect_trained import SIZE, detector_once
from tests.support.helpers import black_frames, copy_of, manifest_of

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

pytestmark = [pytest.mark.host, pytest.mark.slow]

MIN_AGREEMENT = 0.9  # the user's --min-agreement: the share of float's detections int8 must find


@pytest.fixture(scope="module")
def trained_run(session_folder):
    """The session's detector as `pipeline train --task detect` left it (tests/support/detect_trained.py), not exported;
    shared read-only: the tests that export take a copy (`run_copy`)."""
    return detector_once(session_folder).trained


@pytest.fixture()
def run_copy(trained_run, tmp_path):
    return copy_of(trained_run, tmp_path)


@pytest.fixture()
def black(tmp_path):
    return black_frames(tmp_path, SIZE)


def test_a_failing_detection_export_is_repaired_and_every_attempt_recorded(run_copy, black):
    from edge.model.metadata import embedded_record
    from pipeline.export import ExportConfig, Mode, export_model
    from pipeline.gate import GATE

    limits = GATE._replace(min_agreement=MIN_AGREEMENT)
    result = export_model(ExportConfig(mode=Mode.INT8, calibration_data=black, repair=True, gate=limits, clients=("all",)),
                          run_copy)
    remedy = result.remedy
    assert remedy["limits"]["metric"] == "map50" and remedy["limits"]["min_agreement"] == MIN_AGREEMENT  # the detection gate's
    # A detector's tuning split has no client feeds: the clients asked for ("all": a detector's three) are said to be
    # left to parity, not silently dropped.
    note = "clients pycoral, mediapipe, frigate are gated in parity only"
    assert remedy["clients"] == [] and remedy["clients_note"].startswith(note) and note in result.table
    attempts = remedy["attempts"]
    first = attempts[0]
    assert first["remedy"] == "none" and not first["passed"], first
    assert any("agreement" in line and "beyond chance" in line for line in first["failures"]), first["failures"]
    assert set(first["tuning"]) == {"map50", "map", "agreement"}
    # The rungs that apply to a detector, in the ladder's order, up to the first that passes: the calibration rung,
    # then bias correction on the same calibration images (on this small detector either may be the one).
    tried = [a["remedy"] for a in attempts]
    assert tried in (["none", "calibration"], ["none", "calibration", "bias"]), result.table
    chosen = attempts[-1]
    assert remedy["chosen"] == chosen["remedy"] and chosen["passed"] and remedy["passed"] and not result.failures
    assert chosen["tuning"]["agreement"] > first["tuning"]["agreement"]
    for a in attempts:  # the pre-flight saw each model, the post-processing op at its end allowed
        assert a["edgetpu"]["ops_on_edgetpu"] > 0 and not a["edgetpu"]["lowered"] and a["size_bytes"] > 0
    split = remedy["tuning_split"]
    assert split["views_per_image"] == 1 and split["scored"] == split["images"] == len(split["ids"])
    manifest = manifest_of(run_copy)
    assert manifest["remedy"] == remedy
    entry = manifest["artifacts"]["model_int8"]
    assert entry["remedy"] == chosen["remedy"]
    # The chosen rung calibrated on the training split without the tuning images.
    assert entry["calibration"]["excluded"] == split["images"]
    assert entry["calibration"]["samples"] == manifest["data"]["split"]["train_examples"] - split["images"]
    model = (run_copy / entry["path"]).read_bytes()
    assert embedded_record(model)["provenance"]["export"]["remedy"] == chosen["remedy"]
    assert f"chosen: {chosen['remedy']}" in result.table and "tuning mAP@.5" in result.table
    html = (run_copy / "report.html").read_text()
    assert "Remedy ladder" in html and html.count('class="remedy-attempt"') == len(attempts)


def test_the_tuning_split_is_seeded_never_heldout_and_keeps_its_boxes(trained_run):
    from pipeline import tasks
    from pipeline.rundir.run import Run
    from pipeline.tasks.detect.export import training_examples

    run = Run.open(trained_run)
    task = tasks.of_run(run).tuning()
    first, again, other = task.split(run, 0), task.split(run, 0), task.split(run, 1)
    assert first.ids == again.ids and first.ids != other.ids
    heldout = {digest for _, digest in manifest_of(trained_run)["data"]["identity"]["heldout"]["examples"]}
    assert not {e.digest for e in first.truth} & heldout
    examples = training_examples(run)
    assert [examples[p].id for p in first.positions] == first.ids
    assert len(first.images) == len(first.truth) == len(first.ids) and first.images.shape[1:] == (SIZE, SIZE, 3)
    # Scoring the reference against itself: every detection agrees, and the drop is nil.
    reference = task.reference(run, first)
    scores = task.scores(reference, reference, first, run.labels)
    assert scores["agreement"].exact == 1 and scores["agreement"].total >= len(first.ids)  # it finds things


def test_rungs_that_do_not_apply_to_a_detector_are_skipped_with_why_and_nothing_passing_fails_the_gate(run_copy, black, monkeypatch):
    from pipeline import gate
    from pipeline.export import ExportConfig, Mode, export_model
    from pipeline.remedy import ladder as remedy

    monkeypatch.setattr(remedy, "LADDER", tuple(r for r in remedy.LADDER if r.name in ("equalize", "per-channel", "qat-2")))
    limits = gate.GATE._replace(min_agreement=MIN_AGREEMENT)
    result = export_model(ExportConfig(mode=Mode.INT8, calibration_data=black, repair=True, gate=limits), run_copy)
    with pytest.raises(gate.GateFailed, match="no remedy passed"):  # what the command exits 1 with
        gate.enforce(list(result.failures))
    assert "nothing passed; kept the best attempt, none" in result.table
    skipped = {s["remedy"]: s["why"] for s in manifest_of(run_copy)["remedy"]["skipped"]}
    assert set(skipped) == {"equalize", "per-channel", "qat-2"}
    assert "per channel" in skipped["per-channel"] and "detector" in skipped["qat-2"]
    assert "qat-2        skipped: " in result.table
    manifest = manifest_of(run_copy)
    assert manifest["remedy"]["passed"] is False
    assert (run_copy / manifest["artifacts"]["model_int8"]["path"]).is_file()  # the best attempt is kept


def test_bias_correction_edits_the_detector_and_it_still_converts_fully_mapped(trained_run):
    """The float edits work on the detector's graph: its flat copy computes what it computes, bias correction reaches
    every convolution (backbone convs through their BatchNorm, the box and class heads through their own bias),
    and the edited detector converts to int8 with every op before the post-processing on the Edge TPU."""
    import tf_keras as keras

    from pipeline.tasks.detect.heads.ssd.postprocess import convert
    from pipeline.edgetpu.preflight import analyze
    from pipeline.remedy import float_edits
    from pipeline.quant.flatten import flatten
    from pipeline.rundir.run import Run
    from pipeline.tasks.detect.export import recorded_anchor_spec, training_examples

    run = Run.open(trained_run)
    detector = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    images = np.stack([run.contract.load_pixels(e.image, (SIZE, SIZE)) for e in training_examples(run)[:16]])
    before = detector(images.astype(np.float32))
    flat = flatten(detector)
    assert flat.output_names == ["box_codes", "class_logits"]
    for name, value in zip(flat.output_names, flat(images.astype(np.float32))):
        np.testing.assert_array_equal(value.numpy(), before[name].numpy())
    edited = float_edits.apply(detector, ("bias",), images, per_tensor=False)
    convs = [layer for layer in edited.layers if isinstance(layer, keras.layers.Conv2D)]
    changed = [layer.name for layer in convs
               if any(not np.array_equal(a, b) for a, b in zip(layer.get_weights(), detector.get_layer(layer.name).get_weights()))
               or _norm_changed(edited, detector, layer)]
    assert sorted(changed) == sorted(layer.name for layer in convs), "every convolution gets its correction"
    after = edited(images.astype(np.float32))
    after = dict(zip(edited.output_names, after))
    for name in ("box_codes", "class_logits"):  # a correction, not a different model
        assert 0 < np.abs(after[name].numpy() - before[name].numpy()).max() < 0.5
    model = convert(edited, recorded_anchor_spec(run), SIZE, run.labels, int8=True, calibration=list(images))
    result = analyze(model)
    assert result.fatal is None and result.first_fallback is None and result.fully_mapped


def _norm_changed(edited, original, conv) -> bool:
    """Whether the BatchNorm after `conv` (where the converter folds its correction) changed."""
    following = [n.outbound_layer for n in conv._outbound_nodes]
    norms = [layer for layer in following if layer.__class__.__name__ == "BatchNormalization"]
    return any(not np.array_equal(n.beta.numpy(), original.get_layer(n.name).beta.numpy()) for n in norms)
