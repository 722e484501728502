"""Class names for a model: from a labels file, the label file packed in the model, or the sidecar's or manifest's record.

    from edge.model.labels import labels_from_model, parse_labels, read_labels
    parse_labels("0 background\\n2 cat\\n")      # ['background', '1', 'cat']
    labels_from_model(Path("mobilenet_v1_0.25_128_quant.tflite").read_bytes())[89]   # 'macaw'

A label file is read as pycoral's read_label_file reads it, line by line: a line that is a
number, then a colon or white space, then a name ("0 background", "17:cat") gives that id its
name; any other line is the name of the class numbered by its row (first line 0). So a plain
file is one name per line, a COCO file gives its own ids, and a mixed file takes each line by
that rule. Unlike pycoral, an id given twice is refused rather than overwritten. Labels come
back as a list indexed by class id; ids a file skips (COCO has gaps) hold the id as a string,
so `labels[class_id]` always works and a missing name prints as the id.

`names_only=True` is the stricter rule of the labels.txt that `pipeline prepare` writes beside
TFRecord shards (read by pipeline/data/tfrecords.py): every line is a name, line N names class
id N, and no line is blank or repeated.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from edge.files.bounded import MAX_LABELS_BYTES, read_regular
from edge.errors import InputError, ModelCheckError

# An id line: digits, a colon or white space, then a name. ASCII digits only: str.isdigit()
# also accepts '²', which int() refuses.
_ID_LINE = re.compile(r"([0-9]+)[:\s]+(\S.*)", re.ASCII)
# A larger id is a typo or a name that starts with a number, not a class of an edge classifier;
# filling the gaps up to it would build a list of millions of ids.
MAX_CLASS_ID = 100_000
_FORMS = "one label per line, or `ID label` lines"
_NAMES_ONLY = "one distinct name a line, line N naming class id N"


def read_labels(path: Union[str, Path]) -> List[str]:
    """Labels from a label file; list index = class id (see the module docstring for the format)."""
    path = Path(path)
    try:
        data = read_regular(path, MAX_LABELS_BYTES, "labels file", InputError)
    except OSError as err:
        raise InputError(f"cannot read labels file {path}: {err.strerror or err}; expected {_FORMS}") from err
    return parse_labels(data, f"labels file {path}")


def parse_labels(content: Union[str, bytes], source: str = "labels", names_only: bool = False) -> List[str]:
    """Labels from the text (or UTF-8 bytes) of a label file; `source` names it in errors. names_only: one
    distinct name a line, no `ID name` lines (module docstring)."""
    forms = _NAMES_ONLY if names_only else _FORMS
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{source} is not UTF-8 text (bad byte at {err.start}); expected {forms}") from None
    lines = content.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()  # a trailing newline or two is not a class
    if not lines:
        raise InputError(f"{source} is empty, expected {forms}")
    if names_only:
        return _names(lines, source)
    names: Dict[int, Tuple[str, int]] = {}  # id -> (name, line number) for the duplicate message
    for row, line in enumerate(lines):
        class_id, name = _split(line, row)
        if class_id > MAX_CLASS_ID:
            raise InputError(f"{source} line {row + 1} gives class id {class_id}, expected at most {MAX_CLASS_ID}")
        if class_id in names:
            raise InputError(f"{source} line {row + 1} gives class {class_id} ({name!r}) again, first given on line "
                             f"{names[class_id][1]} ({names[class_id][0]!r}); expected each id once")
        names[class_id] = (name, row + 1)
    return [names[i][0] if i in names else str(i) for i in range(max(names) + 1)]


def _names(lines: List[str], source: str) -> List[str]:
    names = [line.strip() for line in lines]
    first: Dict[str, int] = {}
    for row, name in enumerate(names):
        if not name:
            raise InputError(f"{source} is not a list of class names: line {row + 1} is blank; expected {_NAMES_ONLY}")
        if name in first:
            raise InputError(f"{source} is not a list of class names: line {row + 1} repeats {name!r} (line {first[name]}); "
                             f"expected {_NAMES_ONLY}")
        first[name] = row + 1
    return names


def _split(line: str, row: int) -> Tuple[int, str]:
    """(class id, name) of one line: its own id when it starts with one, else its row number."""
    match = _ID_LINE.fullmatch(line.strip())
    if match:
        return int(match.group(1)), match.group(2).strip()
    return row, line.strip()


def labels_from_model(model_bytes: bytes, output: int = 0, name: str = "model", meta=None) -> Optional[List[str]]:
    """The labels packed in the model for output `output` (its first TENSOR_AXIS_LABELS file), or None when it names none.

    A damaged model, metadata or packed file raises ModelCheckError: the labels are part of the model. `meta`: the
    model's ModelMetadata when the caller has read it already.
    """
    from edge.model.metadata import associated_file, read_metadata

    meta = read_metadata(model_bytes, name) if meta is None else meta
    if not 0 <= output < len(meta.outputs) or not meta.outputs[output].label_files:
        return None
    # The schema: with several label files (one per locale), the first is the default.
    file_name = meta.outputs[output].label_files[0]
    try:
        return parse_labels(associated_file(model_bytes, file_name, name), f"{file_name} packed in {name}")
    except InputError as err:
        raise ModelCheckError(str(err)) from err


def choose_labels(labels_file: Optional[Union[str, Path]], recorded: Optional[Sequence[str]],
                  model_bytes: Optional[bytes] = None, meta=None) -> Tuple[Optional[List[str]], str]:
    """(labels, where they came from): --labels FILE wins, then the labels recorded next to the model, then the
    label file packed in the model (when its bytes are given; `meta` its metadata, when already read); None means
    "print class ids"."""
    if labels_file is not None:
        return read_labels(labels_file), f"labels: {labels_file}"
    if recorded:
        return [str(x) for x in recorded], "labels: recorded next to the model"
    packed = labels_from_model(model_bytes, meta=meta) if model_bytes is not None else None
    if packed:
        return packed, "labels: the label file packed in the model's metadata"
    return None, "labels: none found (pass --labels FILE); printing class ids"
