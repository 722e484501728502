"""The worst client, for people: one line naming the client that loses most against the float model, and what
repairs it. Each task names its rows (ClientRows) and words the rest of its parity report itself."""
from __future__ import annotations

from typing import NamedTuple


class ClientRows(NamedTuple):
    """How a task's client rows are named in the worst-client line."""

    key: str  # the metric a row's drop_pp is of
    shown: str  # its name for people
    hint: str  # the --clients that gates them
    repairable: bool  # the remedy ladder can judge these clients on the task's tuning split (`export --remedy --clients`)


CLIENT_GAP_PP = 2.0  # a client this much further below float than the int8 model on the pixel contract gets advice


def _beyond(pp: float) -> bool:
    """More than CLIENT_GAP_PP: drops are differences of shares, so 4 of 200 images is 2.0000000000000018 pp."""
    return round(pp, 9) > CLIENT_GAP_PP


def worst_client(clients: dict, worst: ClientRows) -> str:
    """One line naming the client that loses most against the float model (manifest or report entries), or "";
    with what repairs it when it loses more than CLIENT_GAP_PP beyond the int8 model on the pixel contract (the
    "edgeflow" row) and the task's remedy ladder can judge clients (`client_advice`)."""
    key, shown, hint, repairable = worst
    scored = {name: c for name, c in clients.items() if "refused" not in c and name != "edgeflow"}
    if not scored:
        return ""
    name = max(scored, key=lambda n: scored[n]["drop_pp"])
    gated = [n for n, c in clients.items() if c.get("gated")]
    how = f"gated: {', '.join(gated)}" if gated else f"reported, not gated; --clients {hint} gates them"
    line = (f"worst client: {name}, {shown} {scored[name][key]:.4f}, drop {scored[name]['drop_pp']:.2f} pp against "
            f"the float model ({how})")
    contract = clients.get("edgeflow", {})
    gap = scored[name]["drop_pp"] - contract["drop_pp"] if "drop_pp" in contract else 0.0
    if repairable and _beyond(gap):
        line += f"; {gap:.2f} pp more than the int8 model fed the pixel contract: " + client_advice(name, scored[name])
    return line


def client_advice(name: str, row: dict) -> str:
    """What repairs a client that loses more than the int8 model fed the contract, told apart from the row's float
    model fed alike: when the float model itself loses more than CLIENT_GAP_PP fed as the client feeds, the loss is
    the client's fit of the picture, which no int8 export repairs (the remedy ladder gates int8 against float fed
    alike): training for that feed does. When int8 loses more than CLIENT_GAP_PP against float under that feed, the
    remedy ladder with the client judged does. Two parts each within CLIENT_GAP_PP get no command. A row from before
    the float model was fed alike gets the remedy advice, with why unsure."""
    alike = row.get("float_fed_alike")
    # Sized to the run's tuning split, where parity recorded it (pipeline/remedy/advice.py).
    remedy = (alike or {}).get("remedy") or f"`pipeline export RUN --int8 --remedy --clients {name}` repairs it with {name} judged"
    if alike is None:
        return remedy + " (run `pipeline parity RUN` again to see whether the float model loses under this feed too)"
    float_drop, int8_drop = alike["float_drop_pp"], alike["int8_drop_pp"]
    if not _beyond(float_drop) and _beyond(int8_drop):
        # The ladder's calibration rung calibrates on the judged client's feeds too, so ranges set on the contract's
        # pixels alone no longer clip the client's (halftone-like PNGs, small CNN 16 px: MediaPipe 24-44 pp under
        # the contract before, within 1.5 pp after; tests/commands/advice/test_remedy.py, bench/results/clients.md).
        return (f"int8 loses {int8_drop:.2f} pp against the float model fed as {name} feeds (which itself "
                f"{_loses(float_drop)}): {remedy}")
    if not _beyond(float_drop):
        # Two small parts: the ladder, gating int8 against float fed alike, finds too little to repair. (Small CNN,
        # 16 px photo crops, --client-fits: float 1.75 pp, int8 1.25 pp; `export --remedy --clients mediapipe`
        # kept the export as asked and the gap stayed 2.25 pp, bench/results/clients.md.)
        fits = "" if alike.get("trained_with_client_fits") else ", training for that feed (--client-fits)"
        return (f"the float model {_loses(float_drop)} fed as {name} feeds and int8 {int8_drop:.2f} pp more "
                f"against it, each within {CLIENT_GAP_PP:g} pp: too little for an export to repair (the remedy ladder "
                f"gates int8 against float fed alike); a larger model input (--image-size, less shrink){fits}, or "
                f"{name} fed pictures near the input size, may")
    then = (f"; int8 loses {int8_drop:.2f} pp more against it, which `pipeline export RUN --int8 --remedy --clients "
            f"{name}` repairs after that" if _beyond(int8_drop) else "")
    if alike.get("trained_with_client_fits"):
        # Training with the fits again would repeat this run: not advice. (Digits, 16 px, 4 epochs, with the fits:
        # MediaPipe's float loss 4.2 pp; at 32 px and 10 epochs 1.8 pp, bench/results/clients.md.)
        return (f"the float model itself loses {float_drop:.2f} pp fed as {name} feeds, though training fitted images "
                f"as {name} does (--client-fits): the model's own limit, not quantization, and no export repairs it; "
                f"a larger model input (--image-size) or more training (--epochs) may, or feed {name} pictures near "
                f"the input size{then}")
    return (f"the float model itself loses {float_drop:.2f} pp fed as {name} feeds (its fit of the picture, not "
            f"quantization; no export repairs it): train for that feed, `pipeline train ... --client-fits`, or a "
            f"larger --image-size (less shrink), or feed {name} pictures near the input size{then}")


def _loses(pp: float) -> str:
    """A drop in words: a float model can do better under a client's feed than on the contract."""
    return f"loses {pp:.2f} pp" if pp >= 0 else f"gains {-pp:.2f} pp"
