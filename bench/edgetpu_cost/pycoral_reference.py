"""pycoral's benchmark references: a second, independent set of public Edge TPU times, on five hosts.

google-coral/pycoral, benchmarks/reference/inference_reference_<machine>.csv, written by benchmarks/inference_benchmarks.py:
the compiled model (Coral's own *_edgetpu.tflite) run in Python through pycoral's make_interpreter, interpreter.invoke()
on one random uint8 input, the mean of 200 invokes in ms (timeit over 200 calls after allocate_tensors, so the first
invoke, which loads the cached parameters, is inside the mean). Hosts, as the script's docstring names them: 'x86_64' an
Intel Xeon E5-1650 v3 with the USB Accelerator on USB 3.0; 'rp3b' a Raspberry Pi 3 B and 'rp3b+' a Raspberry Pi 3 B+,
each with the USB Accelerator on USB 2.0 (the only USB these boards have); 'aarch64' the Dev Board. 'rp4b' (a
Raspberry Pi 4 B) has a reference file but is not named in the docstring: its USB Accelerator is taken to be on one of
its two USB 3.0 ports, an assumption: neither the file nor the script says which port.

Rows rebuilt here (bench/edgetpu_cost/architectures.py): MobileNet v1 and v2 224, Inception v1 224, Inception v4 299.
The two SSD rows (ssd_mobilenet_v1_coco_quant_postprocess, ssd_mobilenet_v2_face_quant_postprocess) are not: their
anchors and post-processing are not given, the same reason Coral's table's SSD rows are not used.
"""
from __future__ import annotations

import statistics

SOURCE = ("google-coral/pycoral benchmarks/reference/inference_reference_<machine>.csv (benchmarks/inference_benchmarks.py: "
          "Python, pycoral's make_interpreter, the mean of 200 interpreter.invoke() on a random uint8 input, Coral's compiled "
          "models)")
HOSTS = {
    "x86_64": "Intel Xeon E5-1650 v3 + USB Accelerator on USB 3.0",
    "aarch64": "the Dev Board (Edge TPU on PCIe)",
    "rp3b": "Raspberry Pi 3 B + USB Accelerator on USB 2.0",
    "rp3b+": "Raspberry Pi 3 B+ + USB Accelerator on USB 2.0",
    "rp4b": "Raspberry Pi 4 B + USB Accelerator (assumed on a USB 3.0 port; the script's docstring does not name this host)",
}
# ms per inference, by pycoral's model file -> the architecture rebuilt here (None: not rebuilt).
MODELS = {
    "inception_v1_224_quant_edgetpu.tflite": "inception_v1_224",
    "inception_v4_299_quant_edgetpu.tflite": "inception_v4_299",
    "mobilenet_v1_1.0_224_quant_edgetpu.tflite": "mobilenet_v1_224",
    "mobilenet_v2_1.0_224_quant_edgetpu.tflite": "mobilenet_v2_224",
    "ssd_mobilenet_v1_coco_quant_postprocess_edgetpu.tflite": None,
    "ssd_mobilenet_v2_face_quant_postprocess_edgetpu.tflite": None,
}
TIMES = {  # host -> the file's values in MODELS' order
    "x86_64": (3.06, 84.25, 2.17, 2.29, 10.02, 5.36),
    "aarch64": (4.0, 100.33, 2.22, 2.56, 14.83, 7.78),
    "rp3b": (19.21, 1060.16, 9.22, 10.77, 62.6, 39.39),
    "rp3b+": (18.94, 1054.94, 9.0, 10.61, 57.68, 38.75),
    "rp4b": (6.212595004999457, 141.1971434499992, 4.203926894997494, 4.548063964998619, 15.089709284998207,
             9.305470129997957),
}


def column(host: str) -> dict:
    """Architecture rebuilt here -> ms on `host` (the rows not rebuilt left out)."""
    return {arch: ms for arch, ms in zip(MODELS.values(), TIMES[host]) if arch}


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def judged_errors(usb3: dict, devboard: dict) -> dict:
    """host -> {architecture: (pycoral ms, nested leave-one-out prediction)} for the x86_64 (USB 3.0) and aarch64 (Dev
    Board) columns, against fit.py's reports of Coral's columns."""
    out = {}
    for host, r in (("x86_64", usb3), ("aarch64", devboard)):
        out[host] = {arch: (ms, float(r["loo"][r["names"].index(arch)])) for arch, ms in column(host).items()
                     if arch in r["names"]}
    return out


def section(usb3: dict, devboard: dict, rp4b: dict, coral: dict) -> list:
    """The results' section on pycoral's x86_64, aarch64 and rp4b columns, against the nested leave-one-out predictions
    (`usb3`, `devboard`: fit.py's reports, each row predicted by a model that did not see its architecture) and, for the
    Raspberry Pi 4, a linked fit of its own (`rp4b`, linked.fit_linked's result)."""
    def loo(r, arch):
        return float(r["loo"][r["names"].index(arch)]) if arch in r["names"] else None

    L = ["", "## A second measurement: pycoral's reference times (judged, not fitted)", "",
         f"Source: {SOURCE}. The x86_64 and aarch64 columns measure rows of Coral's table again, in Python rather than C++ "
         "and on their own hosts; each is set beside the prediction of a model that did not see the architecture (the "
         "nested leave-one-out of Coral's column). The SSD rows are not rebuilt here.", "",
         "| architecture | host | pycoral ms | Coral's table ms | predicted ms (nested LOO) | error vs pycoral |",
         "|---|---|---|---|---|---|"]
    judged = judged_errors(usb3, devboard)
    for host, col in (("x86_64", 2), ("aarch64", 4)):
        for arch, (ms, p) in judged[host].items():
            L.append(f"| {arch} | {host} ({HOSTS[host]}) | {ms:g} | {coral[arch][col]:g} | {p:.1f} | {_pct(p / ms - 1)} |")
    for host, rows in judged.items():
        errs = [abs(p / ms - 1) for ms, p in rows.values()]
        if errs:
            L += ["", f"{host}: median error {100 * statistics.median(errs):.1f}%, worst {100 * max(errs):.1f}% over "
                  f"{len(errs)} architectures."]
    names, y = rp4b["names"], rp4b["y"]
    L += ["", "Raspberry Pi 4 B ('rp4b'; the USB Accelerator assumed on one of its USB 3.0 ports; the host is not named "
          "in the script's docstring): the same Edge TPU behind the Pi 4's USB 3.0 controller and a slower CPU. Fitted the way the Dev "
          f"Board is (the USB 3.0 prediction plus c x {' and '.join(rp4b['coef'])}: {rp4b['coef']}), judged by nested "
          "leave-one-out over its four rows:", "",
          "| architecture | pycoral ms (rp4b) | USB 3.0 prediction (nested LOO) | predicted ms (nested LOO, this fit) | error |",
          "|---|---|---|---|---|"]
    for i, n in enumerate(names):
        L.append(f"| {n} | {y[i]:.2f} | {loo(usb3, n):.1f} | {rp4b['loo'][i]:.1f} | {_pct(rp4b['loo'][i] / y[i] - 1)} |")
    return L + ["", "Not shipped as a device: its streaming coefficient rests on Inception v4 alone (left out, the fit has "
                "no row that streams), and what it adds per invoke (the intercept) is the Pi 4's Python and host, which a "
                "C++ caller would partly not see. A Raspberry Pi 4 user is given the USB 3.0 prediction, which is below "
                "every one of pycoral's Pi 4 times (the table's third column against its second): by 1 to 2.6 ms for the "
                "models cached whole and by 40% for Inception v4, whose 33 MiB cross the Pi 4's USB 3.0 more slowly than "
                "a desktop's.",
                "", "On the x86_64 host the two MobileNets carry the USB 3.0 model's own leave-one-out misses (-32% and "
                "+37% against Coral's table), widened because pycoral's x86_64 times are about 10% below Coral's for them; "
                "pycoral's Dev Board column agrees with Coral's within 8%."]
