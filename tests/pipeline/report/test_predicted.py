"""pipeline/report/predicted.py: only an Edge TPU measurement of the compiled model is compared with the prediction,
and the line always names the device that measured it. The documents here are made by edge's own writer with the
fields a Coral's `edge bench --edgetpu --json` would fill (no Edge TPU on this machine to make one)."""
from __future__ import annotations

from edge.documents.latency import latency_document
from pipeline.report import predicted

RECORDED = {"cost": {"cost_model_version": "2 (test)", "devices": {
    "usb3": {"label": "USB Accelerator (USB 3.0)", "total_ms": 2.0},
    "devboard": {"label": "Dev Board (Edge TPU on PCIe)", "total_ms": 2.5}}}}


def _bench(edgetpu: bool, median_ms: float):
    return latency_document("m.tflite", "ab" * 32, "tflite_runtime" if edgetpu else "ai_edge_litert", edgetpu, None, 50,
                            9.0, median_ms, median_ms * 1.1, 0, None)


def test_an_edge_tpu_time_of_the_compiled_model_is_compared_per_device():
    bench = _bench(True, 2.2)
    compared = predicted.beside(bench, RECORDED, "model_int8_edgetpu")
    assert compared["comparable"] and [round(r["error_percent"], 1) for r in compared["rows"]] == [-9.1, 13.6]
    line = predicted.line(compared, bench)
    assert "on the Edge TPU (tflite_runtime on " in line
    assert "USB Accelerator (USB 3.0) 2.00 ms (-9.1%), Dev Board (Edge TPU on PCIe) 2.50 ms (+13.6%)" in line


def test_the_int8_model_timed_with_the_edge_tpu_flag_is_still_a_cpu_time():
    # An uncompiled model runs on the CPU even with the Edge TPU's delegate loaded.
    bench = _bench(True, 40.0)
    compared = predicted.beside(bench, RECORDED, "model_int8")
    assert not compared["comparable"] and all(r["error_percent"] is None for r in compared["rows"])
    line = predicted.line(compared, bench)
    assert "on the CPU interpreter (" in line and "not compared with the Edge TPU prediction" in line and "%" not in line


def test_nothing_to_put_beside_without_a_recorded_prediction():
    bench = _bench(False, 4.0)
    assert predicted.beside(bench, None, "model_int8") is None
    assert "no prediction recorded" in predicted.line(None, bench)
