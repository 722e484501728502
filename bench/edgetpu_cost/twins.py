"""Judge the chosen parameter layout on compiled twins it was not chosen on: Google's test models (google-coral/test_data),
each uncompiled .tflite beside its *_edgetpu.tflite, and the co-compiled files of its cocompilation/ folder.

    .venv/bin/python bench/edgetpu_cost/twins.py /work/cache-cost/coral_test_data

The folder is filled from a copy of google-coral/test_data (never committed here), for example
`git -C <test_data repo> show HEAD:mobilenet_v1_0.5_160_quant_edgetpu.tflite > DIR/mobilenet_v1_0.5_160_quant_edgetpu.tflite`.
For each pair: the compiled parameter bytes (cached, streamed) read from the DarwiNN package (compiled_layout.py) beside
the cost model's prediction from the uncompiled file. A co-compiled file holds one model compiled together with others
that share the chip's cache: its total says whether the layout of the model alone still holds, its cached share how the
compiler divided the cache.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, NamedTuple, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.edgetpu_cost.compiled_layout import split as compiled_split  # noqa: E402
from edge.model.tflite_file import read_model  # noqa: E402
from pipeline.edgetpu import preflight  # noqa: E402
from pipeline.edgetpu.cost.features import model_cost  # noqa: E402
from pipeline.edgetpu.cost.layout import Layout, split  # noqa: E402

COCOMPILED = re.compile(r"(?P<model>.+)_cocompiled_with_(?P<partner>.+)_edgetpu\.tflite$")


class Twin(NamedTuple):
    name: str
    compiled_cached: int
    compiled_streamed: int
    predicted_cached: int
    predicted_streamed: int
    partner: Optional[str] = None  # for a co-compiled file: what it was compiled with (as its file name says)

    @property
    def error(self) -> float:
        """Relative error of the predicted total parameter bytes."""
        return (self.predicted_cached + self.predicted_streamed) / (self.compiled_cached + self.compiled_streamed) - 1


def predicted_split(path: Path, layout: Layout):
    """The cost model's cached and streamed bytes for an uncompiled file, as `pipeline compile --check-only` predicts them."""
    info = read_model(path)
    cost = model_cost(info, preflight.analyze(path).rows, layout.op_bytes)
    return split(cost, layout.capacity_bytes)


def judge(folder: Path, layout: Layout) -> List[Twin]:
    """Every pair in `folder` and every co-compiled file in `folder`/cocompilation whose model's uncompiled twin is there."""
    twins = []
    for compiled in sorted(folder.glob("*_edgetpu.tflite")):
        plain = folder / compiled.name.replace("_edgetpu.tflite", ".tflite")
        if plain.exists():
            truth, mem = compiled_split(compiled), predicted_split(plain, layout)
            twins.append(Twin(plain.stem, truth["cached"], truth["streamed"], mem.cached_bytes, mem.streamed_bytes))
    for compiled in sorted((folder / "cocompilation").glob("*_edgetpu.tflite")):
        m = COCOMPILED.match(compiled.name)
        plain = folder / f"{m['model']}.tflite" if m else None
        if plain and plain.exists():
            truth, mem = compiled_split(compiled), predicted_split(plain, layout)
            twins.append(Twin(m["model"], truth["cached"], truth["streamed"], mem.cached_bytes, mem.streamed_bytes,
                              m["partner"]))
    return twins


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def section(twins: List[Twin], folder: Path) -> List[str]:
    """The results' paragraphs on these twins: every one, and what the misses say."""
    if not twins:
        return ["", f"Google's test models were not judged in this run ({folder} absent: see bench/edgetpu_cost/twins.py)."]
    alone = [t for t in twins if not t.partner]
    together = [t for t in twins if t.partner]
    L = ["", "### Judged on Google's test models (not used to choose the layout)", "",
         "Source: google-coral/test_data (each uncompiled model beside its `_edgetpu.tflite`, compiled by Google; the files "
         f"under 4 MiB of its mirror, copied to {folder}, never committed). Compiled bytes read from each DarwiNN package "
         "(compiled_layout.py); predicted from the uncompiled file by the cost model as `pipeline compile --check-only` "
         "runs it. Two of them (mobilenet_v1_0.25_128_quant, deeplabv3_mnv2_dm05_pascal_quant) are the reference pairs the "
         "layout was chosen on; the rest are new.", "",
         "| model | compiled KiB: cached / streamed | predicted KiB: cached / streamed | error (total) |", "|---|---|---|---|"]
    L += [f"| {t.name} | {_kib(t.compiled_cached)} / {_kib(t.compiled_streamed)} | {_kib(t.predicted_cached)} / "
          f"{_kib(t.predicted_streamed)} | {100 * t.error:+.1f}% |" for t in alone]
    L += ["", "Co-compiled (cocompilation/: the model named first, compiled together with the partner its file names; "
          "'3quant' is three other models the file does not name):", "",
          "| model | compiled with | compiled KiB: cached / streamed | the same model compiled alone: cached / streamed | "
          "predicted (alone) | error (total) |", "|---|---|---|---|---|---|"]
    by_name = {t.name: t for t in alone}
    for t in together:
        a = by_name.get(t.name)
        solo = f"{_kib(a.compiled_cached)} / {_kib(a.compiled_streamed)}" if a else "not in the folder"
        L.append(f"| {t.name} | {t.partner} | {_kib(t.compiled_cached)} / {_kib(t.compiled_streamed)} | {solo} | "
                 f"{_kib(t.predicted_cached)} / {_kib(t.predicted_streamed)} | {100 * t.error:+.1f}% |")
    return L


if __name__ == "__main__":
    from pipeline.edgetpu.cost import coefficients

    for t in judge(Path(sys.argv[1]), coefficients.layout()):
        print(t.name, t.partner or "", t.compiled_cached, t.compiled_streamed, t.predicted_cached, t.predicted_streamed,
              f"{100 * t.error:+.1f}%")
