"""The edgetpu_compiler console and .log parser: on the real compiler's output quoted verbatim in
shared/EDGETPU.md section 6 (Examples A-C, read from that file), and on texts written for these
tests in the same layouts (the V16/V15/V20 constants and the fatal messages below)."""
from __future__ import annotations

import re

import pytest

from pipeline.edgetpu.compiler_log import parse, parse_operator_table, parse_size
from tests.support.helpers import REPO

EDGETPU_MD = REPO.parent / "shared" / "EDGETPU.md"


def _real_example(letter: str) -> list:
    """The fenced blocks of EDGETPU.md's "Example <letter>": what a real compiler printed, as quoted there."""
    text = EDGETPU_MD.read_text()
    section = re.search(rf"^### Example {letter} .*?$(.*?)(?=^### |^## )", text, re.S | re.M).group(1)
    return re.findall(r"^```\n(.*?)^```", section, re.S | re.M)


def test_real_compiler_16_console_and_log():
    console, log = _real_example("A")  # compiler 16.0.384591198 on an EfficientDet, as printed
    out = parse(console, log)
    assert out.version == "16.0.384591198" and out.succeeded and out.fatal is None
    assert (out.total_ops, out.ops_on_edgetpu, out.ops_on_cpu, out.subgraphs) == (267, 264, 3, 1)
    assert out.on_chip_used == round(4.21 * 1024 ** 2) and out.off_chip_used == 0
    assert out.output_model == "efficientdet_coral_v2_edgetpu.tflite"
    assert sum(r.count for r in out.operators) == 267  # the .log's table accounts for every op
    assert sum(r.count for r in out.operators if r.status != "Mapped to Edge TPU") == 3


def test_real_compiler_15_table_on_the_console():
    (console,) = _real_example("B")  # compiler 15 with -s: the table follows the counts
    out = parse(console)
    assert out.version == "15.0.340273435" and out.succeeded
    assert (out.total_ops, out.ops_on_edgetpu, out.ops_on_cpu) == (294, 1, 293)
    assert sum(r.count for r in out.operators) == 294
    assert [r.count for r in out.operators if r.op == "QUANTIZE"] == [1, 1, 24]  # one operator, three rows


def test_real_compiler_14_log_alone():
    (log,) = _real_example("C")
    out = parse("", log)
    assert out.version == "14.1.317412892" and not out.succeeded  # a .log alone does not say the compile succeeded
    assert (out.ops_on_edgetpu, out.ops_on_cpu) == (19, 6)

V16_PARTIAL = """Edge TPU Compiler version 16.0.384591198
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 1377 ms.

Input model: detector.tflite
Input size: 3.91MiB
Output model: detector_edgetpu.tflite
Output size: 4.87MiB
On-chip memory used for caching model parameters: 3.75MiB
On-chip memory remaining for caching model parameters: 3.25MiB
Off-chip memory used for streaming uncached model parameters: 128.50KiB
Number of Edge TPU subgraphs: 1
Total number of operations: 120
Operation log: detector_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 117
Number of operations that will run on CPU: 3
See the operation log file for individual operation details.
Compilation child process completed within timeout period.
Compilation succeeded! 
"""

V16_LOG = """Edge TPU Compiler version 16.0.384591198
Input: detector.tflite
Output: detector_edgetpu.tflite

Operator                       Count      Status

CONV_2D                        60         Mapped to Edge TPU
DEPTHWISE_CONV_2D              40         Mapped to Edge TPU
CUSTOM                         1          Operation is working on an unsupported data type
QUANTIZE                       1          Mapped to Edge TPU
QUANTIZE                       1          Operation is otherwise supported, but not mapped due to some unspecified limitation
DEQUANTIZE                     1          Operation is working on an unsupported data type
ADD                            16         Mapped to Edge TPU
"""

V15_WITH_TABLE = """Edge TPU Compiler version 15.0.340273435

Model compiled successfully in 88 ms.

Input model: /m/yolo_int8.tflite
Input size: 7.00MiB
Output model: /m/yolo_int8_edgetpu.tflite
Output size: 6.98MiB
On-chip memory used for caching model parameters: 0.00B
On-chip memory remaining for caching model parameters: 8.05MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 40
Operation log: /m/yolo_int8_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 1
Number of operations that will run on CPU: 39

Operator                       Count      Status

QUANTIZE                       1          Mapped to Edge TPU
TRANSPOSE                      2          Operation not supported
CONV_2D                        30         More than one subgraph is not supported
STRIDED_SLICE                  4          Only Strided-Slice with unitary strides supported
RESIZE_NEAREST_NEIGHBOR        3          Operation version not supported
"""

V20_OLD_LAYOUT = """Edge TPU Compiler version 2.0.267685300

Model compiled successfully in 303 ms.

Input model: mobilenet_quant.tflite
Input size: 3.41MiB
Output model: mobilenet_quant_edgetpu.tflite
Output size: 3.87MiB
On-chip memory available for caching model parameters: 7.62MiB
On-chip memory used for caching model parameters: 3.68MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 31
Operation log: mobilenet_quant_edgetpu.log
See the operation log file for individual operation details.
"""


def test_sizes_in_bytes():
    assert parse_size("0.00B") == 0
    assert parse_size("41.75KiB") == 42752
    assert parse_size("5.90MiB") == round(5.90 * 1024 * 1024)
    with pytest.raises(ValueError, match="expected a number"):
        parse_size("12 parsecs")


def test_compiler_16_partial_mapping_with_its_log():
    out = parse(V16_PARTIAL, V16_LOG)
    assert out.version == "16.0.384591198" and out.succeeded and out.fatal is None
    assert (out.ops_on_edgetpu, out.ops_on_cpu, out.subgraphs, out.total_ops) == (117, 3, 1, 120)
    assert out.on_chip_used == round(3.75 * 1024 ** 2) and out.off_chip_used == round(128.5 * 1024)
    assert out.output_model == "detector_edgetpu.tflite"
    quantize = [r for r in out.operators if r.op == "QUANTIZE"]
    assert [r.status for r in quantize] == ["Mapped to Edge TPU",
                                            "Operation is otherwise supported, but not mapped due to some unspecified limitation"]
    assert sum(r.count for r in out.operators) == 120


def test_compiler_15_table_on_the_console():
    out = parse(V15_WITH_TABLE)
    assert out.version.startswith("15.") and out.succeeded
    assert (out.ops_on_edgetpu, out.ops_on_cpu) == (1, 39)
    statuses = {r.op: r.status for r in out.operators}
    assert statuses["STRIDED_SLICE"] == "Only Strided-Slice with unitary strides supported"
    assert statuses["RESIZE_NEAREST_NEIGHBOR"] == "Operation version not supported"


def test_compiler_2_layout_fully_mapped():
    out = parse(V20_OLD_LAYOUT)
    assert out.succeeded and out.on_chip_remaining is None
    assert out.on_chip_used == round(3.68 * 1024 ** 2)
    assert (out.ops_on_edgetpu, out.ops_on_cpu) == (31, 0)  # no "will run on CPU" line: all mapped


@pytest.mark.parametrize("console, reason", [
    ("Edge TPU Compiler version 16.0.384591198\nERROR: Didn't find op for builtin opcode 'TRANSPOSE_CONV' version '4'. "
     "An older version of this builtin might be supported.\n\nERROR: Registration failed.\n\nInvalid model: m.tflite\n"
     "Model could not be parsed\n", "op TRANSPOSE_CONV version 4 is too new"),
    ("Edge TPU Compiler version 14.1.317412892\nInvalid model: m.tflite\nModel not quantized\n", "model not quantized"),
    ("Edge TPU Compiler version 2.1.302470888\n\nInternal compiler error. Aborting!\n", "internal compiler error"),
    ("Edge TPU Compiler version 16.0.384591198\nStarted a compilation timeout timer of 180 seconds.\n"
     "ERROR: Encountered unresolved custom op: Atan.\nERROR: Node number 1 (Atan) failed to prepare.\n\n"
     "Compilation failed: Model failed in Tflite interpreter. Please ensure model can be loaded/run in Tflite interpreter.\n"
     "Compilation child process completed within timeout period.\nCompilation failed! \n", "unresolved custom op Atan"),
    ("Edge TPU Compiler version 16.0.384591198\nStarted a compilation timeout timer of 5 seconds.\n"
     "Compilation child process completed within timeout period.\nCompilation failed! \n", "gave no reason"),
])
def test_fatal_outputs(console, reason):
    out = parse(console)
    assert not out.succeeded
    assert reason in out.fatal


def test_compiler_2_available_memory_line():
    assert parse(V20_OLD_LAYOUT).on_chip_available == round(7.62 * 1024 ** 2)


@pytest.mark.parametrize("console, reason", [
    # compiler 16 on a model converted with a dynamic batch (google-coral/edgetpu #829 shape)
    ("Edge TPU Compiler version 16.0.384591198\nStarted a compilation timeout timer of 180 seconds.\n"
     "ERROR: Attempting to use a delegate that only supports static-sized tensors with a graph that has "
     "dynamic-sized tensors.\nCompilation failed: Model failed in Tflite interpreter. Please ensure model can be "
     "loaded/run in Tflite interpreter.\nCompilation child process completed within timeout period.\n"
     "Compilation failed! \n", "dynamic-sized tensors"),
    # an "Invalid model" with a reason this parser has no special case for: the reason line is kept
    ("Edge TPU Compiler version 16.0.384591198\nInvalid model: m.tflite\nSomething new went wrong\n",
     "invalid model: Something new went wrong"),
])
def test_more_fatal_outputs(console, reason):
    out = parse(console)
    assert not out.succeeded and reason in out.fatal


def test_log_file_alone_with_repeated_operators():
    log = ("Edge TPU Compiler version 14.1.317412892\nInput: net.tflite\nOutput: net_edgetpu.tflite\n\n"
           "Operator                       Count      Status\n\n"
           "CONCATENATION                  2          More than one subgraph is not supported\n"
           "CONV_2D                        9          Mapped to Edge TPU\n"
           "CONV_2D                        3          More than one subgraph is not supported\n"
           "RESIZE_NEAREST_NEIGHBOR        1          Operation version not supported\n")
    out = parse("", log)
    assert out.version == "14.1.317412892" and not out.succeeded  # no console: success is not claimed
    assert [(r.op, r.count) for r in out.operators if r.op == "CONV_2D"] == [("CONV_2D", 9), ("CONV_2D", 3)]
    assert (out.ops_on_edgetpu, out.ops_on_cpu) == (9, 6)


def test_table_rows_split_on_two_or_more_spaces():
    rows = parse_operator_table("Operator                       Count      Status\n\n"
                                "RESIZE_NEAREST_NEIGHBOR        12         Mapped to Edge TPU\n")
    assert rows[0] == ("RESIZE_NEAREST_NEIGHBOR", 12, "Mapped to Edge TPU")


def test_log_cut_before_its_table_gives_no_counts():
    # Missing data stays missing (None), never 0 ops on the CPU: --require-full-mapping relies on it.
    out = parse("", "Edge TPU Compiler version 16.0.384591198\nInput: m.tflite\nOutput: m_edgetpu.tflite\n\n")
    assert out.operators == [] and out.ops_on_cpu is None and out.ops_on_edgetpu is None
    assert parse_operator_table("Operator                       Count      Status\n\n") == []
