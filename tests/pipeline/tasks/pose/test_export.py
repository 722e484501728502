"""`pipeline export --layout` of a pose run, refused before any work where it cannot be: without --int8, a run of more
than one class (Ultralytics reads keypoints from the channel after the first class score), another task's run, a
layout not offered. What it writes is tested through the command (test_stages.py) and by Ultralytics itself."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.errors import ConfigError
from pipeline.tasks import options as task_options
from pipeline.tasks.pose import heads
from pipeline.tasks.pose.export import ULTRALYTICS_FILE, _ultralytics_layout

pytestmark = pytest.mark.host


def _config(layout):
    return SimpleNamespace(task_options={"layout": layout})


def test_layout_ultralytics_names_the_head_module_for_a_one_class_int8_export():
    run = SimpleNamespace(labels=["figure"])
    layout = _ultralytics_layout(_config("ultralytics"), run, heads.get(heads.DEFAULT), True)
    assert layout.__name__ == f"{heads.__name__}.{heads.DEFAULT}.ultralytics" and callable(layout.convert)
    assert _ultralytics_layout(_config(None), run, heads.get(heads.DEFAULT), True) is None
    assert _ultralytics_layout(_config("edgeflow"), run, heads.get(heads.DEFAULT), True) is None
    assert ULTRALYTICS_FILE == "model_int8_ultralytics.tflite"


@pytest.mark.parametrize("labels, int8, says", [
    (["figure"], False, "--layout ultralytics writes an int8 file; add --int8"),
    (["cat", "dog"], True, "this run has 2 classes (cat, dog); Ultralytics' pose reader takes keypoints from the channel "
                           "after the first class score, so its layout holds one class"),
])
def test_layout_ultralytics_is_refused_with_the_reason(labels, int8, says):
    with pytest.raises(ConfigError) as caught:
        _ultralytics_layout(_config("ultralytics"), SimpleNamespace(labels=labels), heads.get(heads.DEFAULT), int8)
    assert says in str(caught.value)


def test_layout_is_a_pose_option_of_export_only():
    assert task_options.for_task("pose", "export", {"layout": "ultralytics"}) == {"layout": "ultralytics"}
    with pytest.raises(ConfigError, match="--layout ultralytics applies to pose runs .* this is a detect run"):
        task_options.for_task("detect", "export", {"layout": "ultralytics"})
    with pytest.raises(ConfigError, match="--layout 'onnx'; expected one of edgeflow, ultralytics"):
        task_options.check("export", {"layout": "onnx"})
