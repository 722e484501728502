"""A device that is the same Edge TPU behind another link, fitted as the base device's time plus what its link adds.

The Dev Board's Edge TPU is the USB Accelerator's chip, so the work it does on the chip takes the same time; what
differs is the host and the link to it: the parameters streamed every inference cross the Dev Board's PCIe instead of
USB 3.0. So the Dev Board's time is the USB Accelerator's predicted time plus c x streamed MiB, c fitted on the Dev
Board column (non-negative least squares on relative error). On USB 2.0 the link is slower for everything sent and read
back: the base time plus c1 x the input and output MiB plus c2 x the streamed MiB, fitted on pycoral's Raspberry Pi 3 B
reference times (Inception v4 streams, the others are cached whole) and judged on its Raspberry Pi 3 B+ ones.

Judged like the base device: each row is predicted by a model that did not see it, neither in the base device's feature
set and coefficients nor in c.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

import numpy as np
from scipy.optimize import nnls

from bench.edgetpu_cost.pycoral_reference import HOSTS, column
from bench.edgetpu_cost.pycoral_reference import SOURCE as PYCORAL_SOURCE

# USB 2.0: pycoral's reference times on a Raspberry Pi 3 B (fitted) and on a Raspberry Pi 3 B+ (judged), both on the
# boards' USB 2.0 ports (pycoral_reference.py). Among the rows rebuilt here, Inception v4 streams parameters: it grounds
# what USB 2.0 costs per streamed MiB.
USB2_HOST, USB2_JUDGE_HOST = "rp3b", "rp3b+"
USB2_SOURCE = f"{PYCORAL_SOURCE}: host '{USB2_HOST}', {HOSTS[USB2_HOST]}"
USB2 = column(USB2_HOST)
# Other public USB 2.0 figures, to judge the final model on (not fitted).
USB2_CHECKS = [(arch, ms, f"pycoral's '{USB2_JUDGE_HOST}' reference ({HOSTS[USB2_JUDGE_HOST]}), {arch}: {ms:g} ms")
               for arch, ms in column(USB2_JUDGE_HOST).items()] + [
    # A Coral maintainer, google-coral/edgetpu #151, 2020-06-18, on a Raspberry Pi 3's USB 2.0 port: "~9 [ms] for a 224
    # mobilenet v1 and ~12 [ms] for v2" (the reply writes "seconds" where the issue it answers is about a 9.5 ms invoke).
    ("mobilenet_v1_224", 9.0, "google-coral/edgetpu #151 (a Coral maintainer, 2020-06-18): Raspberry Pi 3, USB 2.0, "
                              "MobileNet v1 224: about 9 ms"),
    ("mobilenet_v2_224", 12.0, "google-coral/edgetpu #151 (the same reply): MobileNet v2 224: about 12 ms"),
    ("mobilenet_v1_224", 9.5, "google-coral/edgetpu #151 (the issue itself): C++ tflite_runtime API, armv7l host, USB 2.0, "
                              "compiled MobileNet v1 224: 9.5 ms"),
    ("mobilenet_v2_224", 19.0, "google-coral/edgetpu #793: Dev Board Mini (its Edge TPU is on USB 2.0 inside the board, "
                               "#352), pycoral's classify_image.py in Python, MobileNet v2 224 (iNat birds): 19.0 ms"),
]


def _fit_extra(E: np.ndarray, residual: np.ndarray, y: np.ndarray) -> np.ndarray:
    w = 1.0 / y
    coef, _ = nnls(E * w[:, None], residual * w)
    return coef


class Base:
    """The base device's model as fit.py chooses it: `choose(names, y)` -> feature set, `fit(X, y)` -> coefficients."""

    def __init__(self, feats: Dict[str, Dict[str, float]], names: List[str], y: Dict[str, float],
                 choose: Callable, fit: Callable):
        self.feats, self.names, self.y, self.choose, self.fit = feats, names, y, choose, fit

    def predict_without(self, held: Sequence[str], fs=None):
        """Predictions for every architecture by a base model fitted on the base rows other than `held` (its feature
        set chosen without them too, unless `fs` is given)."""
        keep = [n for n in self.names if n not in held]
        y = np.array([self.y[n] for n in keep])
        fs = fs or self.choose(self.feats, keep, y)
        coef = self.fit(np.array([[self.feats[n][k] for k in fs] for n in keep]), y)
        return {n: float(np.array([f[k] for k in fs]) @ coef) for n, f in self.feats.items()}, fs


def fit_linked(base: Base, y: Dict[str, float], extra: Sequence[str], fs_final) -> dict:
    """The linked device on the rows `y` (architecture -> published ms): its link coefficients on every row, and each
    row predicted by a model (base and link) that did not see it, also with the base's final feature set held fixed."""
    names = list(y)
    Y = np.array([y[n] for n in names])
    E = np.array([[base.feats[n][k] for k in extra] for n in names])
    whole, _ = base.predict_without([], fs_final)
    coef = _fit_extra(E, Y - np.array([whole[n] for n in names]), Y)
    nested, fixed, chosen = [], [], []
    for i, held in enumerate(names):
        keep = [j for j in range(len(names)) if j != i]
        for out, fs in ((nested, None), (fixed, fs_final)):
            pred, used = base.predict_without([held], fs)
            c = _fit_extra(E[keep], Y[keep] - np.array([pred[names[j]] for j in keep]), Y[keep]) if keep else np.zeros(len(extra))
            out.append(pred[held] + float(E[i] @ c))
            if out is nested:
                chosen.append(used)
    return {"names": names, "y": Y, "coef": {k: round(float(c), 6) for k, c in zip(extra, coef)},
            "loo": np.array(nested), "simple": np.array(fixed), "chosen": chosen, "base_final": whole}


def predict_final(fit: dict, feats: Dict[str, float], extra: Sequence[str], base_ms: float) -> float:
    return base_ms + sum(fit["coef"][k] * feats[k] for k in extra)
