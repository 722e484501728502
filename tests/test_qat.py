"""QAT fine-tunes at the global batch `pipeline train` recorded, and refuses a manifest without one."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.host


def test_qat_uses_the_recorded_global_batch(exported_run, monkeypatch):
    import tf_keras as keras

    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    manifest = run.manifest
    assert manifest["training"]["global_batch"] == 32  # train's default; QAT used to fall back to 64
    seen = {}

    def fake_fit(self, *args, **kwargs):
        seen["batch_size"] = kwargs.get("batch_size")

    monkeypatch.setattr(keras.Model, "fit", fake_fit)
    qat.fine_tune(run, epochs=1)
    assert seen == {"batch_size": 32}


@pytest.mark.parametrize("training", [{}, {"global_batch": 0}, {"global_batch": "32"}, {"batch_size": 64}])
def test_qat_refuses_a_manifest_without_the_global_batch(exported_run, training):
    from pipeline.errors import ManifestError
    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    run.manifest = dict(run.manifest, training=training)
    with pytest.raises(ManifestError, match="training.global_batch .*expected the positive global batch"):
        qat.fine_tune(run, epochs=1)
