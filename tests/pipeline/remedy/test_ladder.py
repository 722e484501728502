"""The remedy ladder (pipeline/remedy/ladder.py) on a small real model: a failing int8 export repaired, the tuning
split kept away from the held-out images, a rung that lowers the Edge TPU mapping refused, and nothing passing
exits 1 with the best attempt written.

The failure is real: calibrating on black images collapses every activation range, so the int8 model answers
almost nothing like the float one; calibrating again on training images (the ladder's first rung) repairs it.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.helpers import black_frames, copy_of, manifest_of

pytestmark = pytest.mark.host

SIZE = 16


@pytest.fixture(scope="module")
def trained_run(trained_digits):
    """The session's tiny digits run (small_cnn, SIZE px, 4 epochs; tests/conftest.py), read-only: tests copy it."""
    return trained_digits


@pytest.fixture()
def run_copy(trained_run, tmp_path):
    return copy_of(trained_run, tmp_path)


@pytest.fixture()
def black(tmp_path):
    return black_frames(tmp_path, SIZE)


def test_a_failing_export_is_repaired_by_the_first_rung_that_passes(run_copy, black):
    from pipeline.export import ExportConfig, Mode, export_model

    result = export_model(ExportConfig(mode=Mode.INT8, calibration_data=black, repair=True), run_copy)
    attempts = result.remedy["attempts"]
    assert attempts[0]["remedy"] == "none" and not attempts[0]["passed"], attempts[0]
    assert attempts[0]["tuning"]["agreement"] < 0.98
    assert [a["remedy"] for a in attempts][-1] == result.remedy["chosen"] and attempts[-1]["passed"]
    assert result.remedy["passed"] and not result.failures
    # Every attempt records what the brief asks; the one that motivated the ladder names its worst layers.
    for a in attempts:
        assert set(a) >= {"remedy", "tuning", "passed", "edgetpu", "size_bytes", "seconds"}
    assert result.remedy["motivation"] and all("rmse_steps" in layer for layer in result.remedy["motivation"])
    manifest = manifest_of(run_copy)
    assert manifest["remedy"] == result.remedy
    assert manifest["artifacts"]["model_int8"]["remedy"] == result.remedy["chosen"]
    # The tuning split is the one training set aside: the chosen rung calibrated on the whole training split, which
    # never held it.
    assert result.remedy["tuning_split"]["source"] == "set aside before training"
    assert result.remedy["tuning_split"]["ids"] == [e[0] for e in manifest["data"]["identity"]["tuning"]["examples"]]
    assert "excluded" not in manifest["artifacts"]["model_int8"]["calibration"]
    assert "chosen: " + result.remedy["chosen"] in result.table
    html = (run_copy / "report.html").read_text()
    assert "Remedy ladder" in html and html.count('class="remedy-attempt"') == len(attempts)
    assert "images training set aside (never trained on;" in html


def test_the_tuning_split_is_set_aside_before_training_and_recorded_by_identity(run_copy):
    """Training set the tuning images aside: neither trained on nor held out, listed in the manifest, scored once."""
    from pipeline.data.identity import resolve_split
    from pipeline.remedy import tuning_split
    from pipeline.rundir.run import Run

    run = Run.open(run_copy)
    tuning = tuning_split.tuning_split(run, 0)
    assert tuning.set_aside and tuning.views == 1 and len(tuning.images) == len(tuning.ids) == len(tuning.truth)
    source, train = resolve_split(run, "train")
    _, heldout = resolve_split(run, "heldout")
    trained, held = {source.examples[i].id for i in train}, {source.examples[i].id for i in heldout}
    assert not set(tuning.ids) & trained and not set(tuning.ids) & held
    split = manifest_of(run_copy)["data"]["split"]
    assert split["tuning_examples"] == len(tuning.ids) and 0.05 < len(tuning.ids) / len(source.examples) < 0.15
    assert split["train_examples"] + split["heldout_examples"] + split["tuning_examples"] == len(source.examples)
    assert len(set(tuning.truth.tolist())) == len(run.labels)  # every class is in it
    # The seed draws it: the same seed, the same split.
    assert tuning_split.tuning_split(run, 1).ids == tuning.ids


def test_a_small_set_aside_split_is_said_to_be_a_weak_judge(run_copy, monkeypatch):
    from pipeline.export import ExportConfig, Mode
    from pipeline.remedy import ladder as remedy
    from pipeline.rundir.run import Run
    from pipeline.tasks.classify import export as classify_export

    said = []
    monkeypatch.setattr(remedy, "WEAK_JUDGE", -1.0)  # one conversion, whatever this run's own split holds
    outcome = remedy.repair(ExportConfig(mode=Mode.INT8), Run.open(run_copy), classify_export.convert, ladder=(),
                            say=said.append)
    n = len(outcome.tuning.images)
    note = f"note: the tuning split holds {n} images: a model that parts from float twice as often as --min-agreement 0.98"
    assert said[0].startswith(note) and outcome.notes == (said[0],)
    assert said[0] in remedy.table(outcome) and outcome.record()["notes"] == [said[0]]
    # How weak: 24 images (10% of 240 photos) pass a model at 96% agreement most of the time; 960 rarely.
    assert remedy.weak_judge(24, 0.98) > 0.9 and remedy.weak_judge(960, 0.98) < 0.05
    assert remedy.weak_judge(24, 0.98) > remedy.weak_judge(141, 0.98) > remedy.weak_judge(384, 0.98)


def test_a_run_trained_before_the_tuning_split_is_judged_on_views_with_a_note(run_copy):
    """An earlier edgeflow recorded no tuning split and trained on every non-held-out image: such a run (made here by
    rewriting the manifest as that version wrote it) gets the drawn split with views, and the ladder says so."""
    import json

    from pipeline import data
    from pipeline.data.identity import resolve_split
    from pipeline.export import ExportConfig, Mode
    from pipeline.remedy import ladder as remedy, tuning_split
    from pipeline.rundir.run import Run
    from pipeline.tasks.classify import export as classify_export

    manifest = manifest_of(run_copy)
    split = manifest["data"]["split"]
    for key in ("tuning_fraction", "tuning_examples"):
        split.pop(key)
    source = data.open_source(manifest["data"]["train"]["spec"])
    manifest["data"]["identity"] = data.identity_record(source, None, data.Split(split["heldout_fraction"], split["seed"]))
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    run = Run.open(run_copy)
    first, again, other = tuning_split.tuning_split(run, 0), tuning_split.tuning_split(run, 0), tuning_split.tuning_split(run, 1)
    assert not first.set_aside and first.views == tuning_split.TUNING_VIEWS
    assert first.ids == again.ids and first.ids != other.ids
    source, heldout = resolve_split(run, "heldout")
    source, train = resolve_split(run, "train")
    assert not {source.examples[i].digest for i in train[first.positions]} & {source.examples[i].digest for i in heldout}
    assert len(set(first.truth.tolist())) == len(run.labels)  # class-balanced: every class is in it
    said = []
    outcome = remedy.repair(ExportConfig(mode=Mode.INT8), run, classify_export.convert, ladder=(), say=said.append)
    assert said[0] == f"note: {tuning_split.DRAWN_NOTE}" and outcome.record()["tuning_split"]["source"] == "train split"
    assert "training images x 16 views" in remedy.table(outcome)


def test_a_rung_that_lowers_the_edgetpu_mapping_is_never_chosen(run_copy, black, monkeypatch):
    """The pre-flight is replaced here (a stand-in that reports one op fewer on the Edge TPU for every model after the
    first) because no real rung of the ladder makes the converter leave an op in float: it converts integer-only."""
    from pipeline import export
    from pipeline.tasks.classify import export as classify_export
    from pipeline.remedy import ladder as remedy
    from pipeline.rundir.run import Run

    real, calls = remedy._mapping, []

    def lowering(model):
        on, total = real(model)
        calls.append(on)
        return (on - 1 if len(calls) > 1 else on), total

    monkeypatch.setattr(remedy, "_mapping", lowering)
    config = export.ExportConfig(mode=export.Mode.INT8, calibration_data=black, repair=True)
    outcome = remedy.repair(config, Run.open(run_copy), classify_export.convert, ladder=remedy.LADDER[:1])
    baseline, calibrated = outcome.attempts
    assert calibrated.mapping_lowered and not calibrated.failures  # it would pass the gate, but lowers the mapping
    assert not calibrated.passed and not outcome.passed
    assert outcome.chosen is baseline
    assert "no remedy passed" in outcome.failures()[0]
    # An attempt that can no longer be chosen keeps its bytes and facts, not its converter (and the model it holds).
    assert isinstance(calibrated.model, remedy.Dropped) and calibrated.model.facts["remedy"] == "calibration"
    assert baseline.model.converter is not None


def test_nothing_passes_exits_1_and_keeps_the_best_attempt(run_copy, black, monkeypatch):
    from click.testing import CliRunner

    from pipeline import cli
    from pipeline.remedy import ladder as remedy

    # Only the rungs a per-channel export skips (equalization, per-channel): nothing else is tried.
    monkeypatch.setattr(remedy, "LADDER", tuple(r for r in remedy.LADDER if r.name in ("equalize", "per-channel")))
    before = manifest_of(run_copy)
    assert "model_int8" not in before["artifacts"]
    result = CliRunner().invoke(cli.main, ["export", str(run_copy), "--int8", "--remedy", "--calibration-data", str(black)])
    assert result.exit_code == 1, result.output
    assert "parity gate failed" in result.output and "no remedy passed" in result.output
    assert "nothing passed; kept the best attempt, none" in result.output
    manifest = manifest_of(run_copy)
    assert manifest["remedy"]["passed"] is False and manifest["remedy"]["chosen"] == "none"
    # The rungs that do not apply to a per-channel export are recorded and printed with why, not silently passed over.
    skipped = manifest["remedy"]["skipped"]
    assert [s["remedy"] for s in skipped] == ["equalize", "per-channel"]
    assert "per-channel weights already" in skipped[0]["why"] and "already per channel" in skipped[1]["why"]
    assert "equalize     skipped: per-channel weights" in result.output
    assert (run_copy / manifest["artifacts"]["model_int8"]["path"]).is_file()


def test_remedy_applies_to_int8_only(run_copy):
    from pipeline.errors import ConfigError
    from pipeline.export import ExportConfig, Mode, export_model

    with pytest.raises(ConfigError, match="--remedy"):
        export_model(ExportConfig(mode=Mode.FLOAT32, repair=True), run_copy)


def test_photo_folders_with_a_separate_heldout_folder_give_a_disjoint_tuning_split(tmp_path):
    """A --val-data folder names its files as the training folder does (china_left/IMG_0000.jpg in both): the tuning
    split is told apart from the held-out images by their bytes, not their names."""
    from pipeline.data.identity import resolve_split
    from pipeline.remedy import tuning_split
    from pipeline.rundir.run import Run
    from pipeline.train import TrainConfig, train_model as train
    from tests.support.helpers import write_camera_jpegs

    train_dir = write_camera_jpegs(tmp_path / "train", per_class=8, size=(64, 48), seed=0, halves=True)
    val_dir = write_camera_jpegs(tmp_path / "val", per_class=3, size=(64, 48), seed=1, halves=True)
    # tuning_fraction 0: trained as before the tuning split was set aside, so the ladder draws its split from training
    run_dir = train(TrainConfig(data=str(train_dir), val_data=str(val_dir), epochs=1, model="small_cnn", image_size=SIZE,
                                tuning_fraction=0.0), tmp_path / "run")
    run = Run.open(run_dir)
    tuning = tuning_split.tuning_split(run, 0)
    source, heldout = resolve_split(run, "heldout")
    assert {source.examples[i].id for i in heldout} & set(tuning.ids)  # the same names, which is why bytes decide
    train_source, train = resolve_split(run, "train")
    assert not {train_source.examples[i].digest for i in train[tuning.positions]} & {source.examples[i].digest for i in heldout}
    views = tuning_split.TUNING_MIN * tuning_split.TUNING_VIEWS
    assert len(tuning.ids) == tuning_split.TUNING_MIN and tuning.images.shape == (views, SIZE, SIZE, 3) and len(tuning.truth) == views


def test_chance_of_at_least_is_the_binomial_tail():
    from fractions import Fraction
    from math import comb

    from pipeline.remedy.ladder import chance_of_at_least

    for n, k, rate in ((20, 3, 0.02), (50, 0, 0.1), (50, 7, 0.1), (30, 30, 0.5)):
        r = Fraction(rate)
        exact = sum(comb(n, i) * r ** i * (1 - r) ** (n - i) for i in range(k, n + 1))
        assert abs(chance_of_at_least(k, n, rate) - float(exact)) < 1e-9


def test_the_tuning_split_fails_agreement_only_beyond_chance_and_drop_as_the_gate_does():
    from pipeline import gate
    from pipeline.remedy.ladder import tuning_failures

    def scores(correct, agree, n=960):
        return {"top1": gate.Score.counted(correct, n), gate.AGREEMENT: gate.Score.counted(agree, n),
                "macro_f1": gate.Score.counted(correct, n)}

    reference = scores(900, 960)
    # 22 of 960 off (2.3%, under 0.98): a model at exactly 2% shows that often (p 0.29), so it is no failure.
    assert tuning_failures(scores(900, 938), reference, gate.GATE, gate.CLASSIFICATION) == []
    # 30 off: p 0.013, a failure that says so.
    (line,) = tuning_failures(scores(900, 930), reference, gate.GATE, gate.CLASSIFICATION)
    assert "beyond chance" in line and "930 of 960" in line
    # The drop is judged as the gate judges it: 2 pp lost fails whatever the agreement.
    (line,) = tuning_failures(scores(881, 960), reference, gate.GATE, gate.CLASSIFICATION)
    assert "drop" in line


def test_the_float_edit_rungs_build_on_the_larger_calibration_set():
    """Equalization applies only to per-tensor weights; both edits take their statistics from every training image
    outside the tuning split, not from the few a user may have asked for."""
    from pipeline.export import ExportConfig, Mode
    from pipeline.remedy import ladder as remedy, tuning_split

    tuning = tuning_split.TuningSplit(np.array([3, 9]), ["a", "b"], np.zeros((2, 4, 4, 3), np.uint8), np.array([0, 1]), 7, 100)
    rungs = {r.name: r for r in remedy.LADDER}
    asked = ExportConfig(mode=Mode.INT8, per_tensor=True, calibration_samples=8)
    skipped = rungs["equalize"].config(ExportConfig(mode=Mode.INT8), tuning)
    assert isinstance(skipped, remedy.Skip) and "per-channel" in skipped.why
    for name, edits in (("equalize", ("equalize",)), ("bias", ("bias",)), ("ranges", ("ranges",))):
        config = rungs[name].config(asked, tuning)
        assert config.float_edits == edits and config.per_tensor
        assert config.calibration_samples == 98 and config.calibration_exclude == (3, 9)
    # On a split set aside before training, a run with fewer training images than the export calibrates on by
    # default would calibrate on the same images again: the calibration rung says so instead of converting.
    set_aside = tuning._replace(positions=np.zeros(0, np.int64), set_aside=True)
    assert "already calibrates on all 100" in rungs["calibration"].config(ExportConfig(mode=Mode.INT8), set_aside).why
    assert rungs["calibration"].config(asked, set_aside).calibration_samples == 100
    names = [r.name for r in remedy.LADDER]
    assert names.index("calibration") < names.index("equalize") < names.index("per-channel") < names.index("qat-2")
    assert names.index("calibration") < names.index("ranges") and names.index("distil-2") < names.index("qat-2")


def test_gated_clients_are_judged_on_the_tuning_split_as_they_feed_it(run_copy, black):
    """With --clients, every attempt is scored as each named client feeds the tuning views, against the float model
    fed the same pixels, and a client that loses more than the limits allow fails the attempt as the int8 model would."""
    from pipeline.export import ExportConfig, Mode, export_model

    result = export_model(ExportConfig(mode=Mode.INT8, calibration_data=black, repair=True, clients=("pycoral", "mediapipe")),
                          run_copy)
    attempts = result.remedy["attempts"]
    assert result.remedy["clients"] == ["pycoral", "mediapipe"]
    assert set(result.remedy["client_references"]) == {"pycoral", "mediapipe"}
    for attempt in attempts:
        assert set(attempt["clients"]) == {"pycoral", "mediapipe"}
        assert set(attempt["clients"]["mediapipe"]) >= {"top1", "agreement"}
    # Calibrated on black frames, the model answers nothing like float in any client either.
    first = attempts[0]
    assert first["clients"]["mediapipe"]["agreement"] < 0.98
    assert any(line.startswith("client_mediapipe: ") for line in first["failures"]), first["failures"]
    assert result.remedy["passed"] == attempts[-1]["passed"]
    assert "as pycoral, mediapipe feed them, int8 is gated against float fed the same" in result.table
    assert "mediapipe 0." in result.table
    html = (run_copy / "report.html").read_text()
    assert "mediapipe: top1 / agreement" in html and html.count('class="remedy-attempt"') == len(attempts)


def test_tuning_failures_judge_each_gated_client_like_the_int8_model():
    from pipeline import gate
    from pipeline.remedy.ladder import tuning_failures

    def scores(correct, agree, n=960):
        return {"top1": gate.Score.counted(correct, n), gate.AGREEMENT: gate.Score.counted(agree, n),
                "macro_f1": gate.Score.counted(correct, n)}

    reference = scores(900, 960)
    # Each client against the float model fed as that client feeds it: its own reference, not the contract's.
    fed_float = scores(880, 960)
    assert tuning_failures(scores(900, 950), reference, gate.GATE, gate.CLASSIFICATION,
                           {"pycoral": (scores(879, 950), fed_float)}) == []
    lines = tuning_failures(scores(900, 950), reference, gate.GATE, gate.CLASSIFICATION,
                            {"pycoral": (scores(879, 950), fed_float), "mediapipe": (scores(860, 920), fed_float)})
    assert len(lines) == 2 and all(line.startswith("client_mediapipe: ") for line in lines), lines
    assert "drop" in lines[0] and "beyond chance" in lines[1]


def test_a_client_is_fed_the_same_picture_as_each_tuning_view(tmp_path):
    """The clients get each view's region of the original, flipped and exposed as the view was, at the original's
    resolution; the whole-image views are the stored file, byte for byte (a run trained before the set-aside split)."""
    from PIL import Image

    from pipeline.remedy import tuning_split
    from pipeline.rundir.run import Run
    from pipeline.train import TrainConfig, train_model as train
    from tests.support.helpers import write_camera_jpegs

    photos = write_camera_jpegs(tmp_path / "photos", per_class=12, size=(96, 64), seed=0, halves=True)
    # tuning_fraction 0: trained as before the split was set aside, so the ladder makes views (a set-aside split has none)
    run = Run.open(train(TrainConfig(data=str(photos), epochs=1, model="small_cnn", image_size=SIZE, tuning_fraction=0.0),
                         tmp_path / "run"))
    tuning = tuning_split.tuning_split(run, 0)
    assert len(tuning.recipes) == len(tuning.images)
    near, mirrored = [], []
    for i, view in enumerate(tuning.recipes):
        picture = tuning_split.client_picture(tuning, i)
        if view.box is None:
            assert picture == tuning.originals[view.original]  # JPEG bytes as stored
            continue
        seen = np.asarray(picture.resize((SIZE, SIZE), Image.BILINEAR), np.float32)
        near.append(np.abs(seen - tuning.images[i]).mean())
        mirrored.append(np.abs(seen[:, ::-1] - tuning.images[i]).mean())
    # The same region within a few grey levels (the contract decodes JPEGs at reduced scale first); mirrored, not.
    assert np.median(near) < 4 and np.median(near) < np.median(mirrored) / 2, (np.median(near), np.median(mirrored))


@pytest.mark.slow  # two QAT trainings of its own (47 s in CI): its file goes early (tests/conftest.py, slow_files_first)
def test_the_distillation_rung_agrees_with_float_more_than_qat_on_the_labels(run_copy, black):
    """The failing export (black calibration frames), then the distillation rung and label QAT each alone on the
    same tuning split: distillation parts from the float model less (this weak 16 px model leaves many near ties, the
    case it is for), calibrated and distilled on the training split, which never held the tuning images, judged like any rung."""
    from pipeline import export
    from pipeline.remedy import ladder as remedy
    from pipeline.rundir.run import Run
    from pipeline.tasks.classify import export as classify_export

    rungs = {r.name: r for r in remedy.LADDER}
    config = export.ExportConfig(mode=export.Mode.INT8, calibration_data=black, repair=True)
    run = Run.open(run_copy)
    distilled = remedy.repair(config, run, classify_export.convert, ladder=[rungs["distil-2"]])
    labelled = remedy.repair(config, run, classify_export.convert, ladder=[rungs["qat-2"]])
    asked, distil = distilled.attempts
    qat = labelled.attempts[1]
    assert not asked.passed, remedy.table(distilled)
    agreement = {a.remedy: a.scores["agreement"].exact for a in (asked, distil, qat)}
    assert agreement["distil-2"] > agreement["none"] and agreement["distil-2"] > agreement["qat-2"], agreement
    assert distil.passed == (not distil.failures and not distil.mapping_lowered)  # judged as every rung is
    facts = distil.model.facts
    assert facts["qat"] == {"epochs": 2, "learns": "the float model's scores"} and facts["remedy"] == "distil-2"
    # The tuning split was set aside before training: calibration and distillation's images (the training split) hold none of it.
    assert distilled.tuning.set_aside and "excluded" not in facts["calibration"] and facts["per_channel"]


def test_near_ties_count_the_answers_int8_noise_can_flip_and_what_they_cost():
    """Float answers with margins 0.02 (near ties) and 0.6; an int8 model that moves every margin by +-0.05:
    the near ties are counted, and half of them are expected to flip."""
    from pipeline.remedy import ladder as remedy

    n = 200
    margins = np.where(np.arange(n) < 40, 0.02, 0.6)
    reference = np.stack([(1 + margins) / 2, (1 - margins) / 2, np.zeros(n)], axis=1)
    shift = np.where(np.arange(n) % 2 == 0, 0.05, -0.05)
    outputs = reference + np.stack([shift / 2, -shift / 2, np.zeros(n)], axis=1)
    ties = remedy.near_ties(reference, outputs)
    assert ties["images"] == n and ties["near_ties"] == 40 and ties["noise"] == pytest.approx(0.05)
    assert ties["expected_agreement"] == pytest.approx(1 - 0.5 * 40 / n)
    line = remedy.ties_line(ties, 0.98)
    assert "40 of 200" in line and "90.0%" in line
    assert "train on more images (or longer, while held-out accuracy still rises)" in line
