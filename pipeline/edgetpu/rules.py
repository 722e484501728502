"""What edgetpu_compiler 16 maps to the Edge TPU, as data, with where each fact comes from.

Four kinds of source, listed with each fact in docs/edgetpu-sources.md: Coral's model requirements and
supported-operations table, op versions the compiler was publicly reported to reject, the status strings
its operation log prints, and Google's models with their compiled twins (the "reference pairs").
"""
from __future__ import annotations

from typing import Dict

# Status strings exactly as the compiler's operation log prints them (the compiler's own wording).
MAPPED = "Mapped to Edge TPU"
MORE_THAN_ONE_SUBGRAPH = "More than one subgraph is not supported"
NOT_SUPPORTED = "Operation not supported"
VERSION_NOT_SUPPORTED = "Operation version not supported"
UNSUPPORTED_DTYPE = "Operation is working on an unsupported data type"
OTHER_LIMITATION = "Operation is otherwise supported, but not mapped due to some unspecified limitation"
UNSUPPORTED_RANK = "Tensor has unsupported rank (up to 3 innermost dimensions mapped)"
STRIDED_SLICE_STRIDES = "Only Strided-Slice with unitary strides supported"
NOT_CONSTANT = "Filter, bias, or other param is not constant at compile-time"

# Coral's supported-operations table, TFLite builtin names, with the lowest Edge TPU
# runtime that maps each. Two kinds of entry:
# - Known from the reference pairs: Google's compiled twins are all
#   runtime-12 packages (the DarwiNN package's min_runtime_version, pipeline/edgetpu/compiled_check.py),
#   so an op a twin keeps inside edgetpu-custom-op maps at runtime 12. A twin proves no lower runtime.
# - Assumed from Coral's table (commonly cited, partly corroborated by the compiler's change log) where no twin says otherwise.
# Compiler 16 targets runtime 14, so all of these are in reach by default.
SUPPORTED_OPS: Dict[str, int] = {
    **dict.fromkeys((
        "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
        "L2_NORMALIZATION", "LOGISTIC", "MAXIMUM", "MAX_POOL_2D", "MEAN", "MINIMUM", "MUL", "PAD", "RELU",
        "RELU6", "RELU_N1_TO_1", "RESHAPE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SLICE", "SOFTMAX",
        "SPACE_TO_DEPTH", "SPLIT", "SQUEEZE", "STRIDED_SLICE", "SUB", "TANH",
    ), 10),  # Coral's table: "All" (assumed; the twins show the ones they hold at runtime 12)
    # Known, runtime 12: the 8-bit QUANTIZE at the input and the output of the pairs
    # mobilenet_edgetpu_0.75_224_post_training_quant and keras_lstm_mnist_ptq (Coral's table and
    # CHANGES.md, runtime 13 "Added support for ops: ... Quantize", say 13+).
    "QUANTIZE": 12,
    # Known, runtime 12: the pair keras_lstm_mnist_ptq maps its LSTM, int16 cell state included
    # (Coral's table: 14+, read as "needs variable tensors", libedgetpu's runtime 14).
    "UNIDIRECTIONAL_SEQUENCE_LSTM": 12,
    # Assumed, Coral's table: 13+ (CHANGES.md, runtime 13: "Added support for ops: ExpandDims, Pack,
    # Quantize, Sum, and TransposeConv"; PReLU not corroborated).
    **dict.fromkeys(("EXPAND_DIMS", "PACK", "PRELU", "SUM", "TRANSPOSE_CONV"), 13),
    # Assumed, Coral's table: 14+ (TRANSPOSE was "Operation not supported" under compiler 15).
    **dict.fromkeys(("REDUCE_MAX", "REDUCE_MIN", "RSQRT", "SQUARED_DIFFERENCE", "TRANSPOSE"), 14),
}
DEFAULT_RUNTIME = 14  # what compiler 16 targets (compiler 16.0 writes runtime-14 packages)

# Highest op version compiler 16 parses. Each is one below a version reported rejected with
# "Didn't find op for builtin opcode ... Model could not be parsed" in a public report:
# CONV_2D v6, TRANSPOSE_CONV v4, QUANTIZE v3, EXP v2, FULLY_CONNECTED v10+. A version above these fails the whole compile, not one op.
MAX_PARSED_VERSION: Dict[str, int] = {
    "CONV_2D": 5,
    "FULLY_CONNECTED": 9,
    "QUANTIZE": 2,
    "TRANSPOSE_CONV": 3,
    "EXP": 1,
}

# Ops the compiler logs as "working on an unsupported data type" rather than "not supported": they
# produce or consume float by design (Coral's model requirements and the compiler's log of a detector: DEQUANTIZE at the output,
# the CUSTOM TFLite_Detection_PostProcess op).
FLOAT_BY_DESIGN_OPS = ("DEQUANTIZE", "TFLite_Detection_PostProcess")

# Limits that Coral's table gives in two rows, "<=12" and "13+": below the runtime
# here, the "<=12" row applies (preflight._OLD_RUNTIME_CHECKS).
LOOSENED_AT_RUNTIME: Dict[str, int] = {
    # Known, runtime 12: the pair deeplabv3_mnv2_dm05_pascal_quant maps its three 2x2-dilated
    # depthwise convolutions in a runtime-12 package. Coral's "<=12: dilated kernels not supported"
    # is kept for runtimes 10 and 11, which no twin shows.
    "DEPTHWISE_CONV_2D": 12,
    # Assumed, Coral's table (no twin holds a SQUEEZE, MEAN or PAD): below 13, Squeeze needs leading 1s,
    # Mean and Pad work on x/y only.
    "SQUEEZE": 13,
    "MEAN": 13,
    "PAD": 13,
}

# Ops whose weights and biases (inputs 1 and 2) must be constant (model requirements, section 1).
WEIGHTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
SOFTMAX_MAX_ELEMENTS = 16000  # "Supports only 1D input tensor with a max of 16,000 elements" (2c)
EIGHT_BIT = ("int8", "uint8")

# Graph-following partition (Coral's model requirements: "cannot partition the model more than once"; a
# public compiler log: supported ops after an unsupported one get MORE_THAN_ONE_SUBGRAPH; the reference pair
# deeplabv3_mnv2_dm05_pascal_quant keeps exactly the resize and what reads it on the CPU, down to
# the output): the compiler builds one Edge TPU segment. An op that reads the output of a CPU op which itself
# runs after mapped ops would need a second segment, so it stays on the CPU with
# MORE_THAN_ONE_SUBGRAPH; ops on other paths, and CPU ops in front of the segment (a float
# QUANTIZE at the input, in public compiler logs), do not end it.

# Variable tensors (the state an LSTM keeps between invocations) may be int16: TFLite's int8
# UNIDIRECTIONAL_SEQUENCE_LSTM keeps its cell state in int16, and the reference pair
# keras_lstm_mnist_ptq shows the compiler mapping such an LSTM with the int16 state as an input of
# edgetpu-custom-op, in a runtime-12 package (although libedgetpu's runtime_version.h names runtime 14,
# kCoralGrouperRelease, "Support for variable tensors").
STATE_DTYPES = ("int8", "uint8", "int16")

# A bilinear resize from a 1x1 image is a broadcast of one pixel. The reference pair
# deeplabv3_mnv2_dm05_pascal_quant shows the compiler leaving RESIZE_BILINEAR 1x1 -> 33x33 on the
# CPU (Coral's table: "Depending on input/output size, this operation might not be mapped to the
# Edge TPU to avoid loss in precision"). Larger inputs are not calibrated: no pair shows one.
RESIZE_FROM_SINGLE_PIXEL = ("RESIZE_BILINEAR",)

# Custom ops are not in the supported-operations table; the compiler logs them under the name
# CUSTOM (its log of a detector shows it) and leaves them on the CPU (the reference pair
# posenet_mobilenet_v1_075_353_481_quant_decoder keeps its decoder custom op outside).
CUSTOM_LOG_NAME = "CUSTOM"

# What to use instead of an op the Edge TPU does not have, where a supported op (or pair of ops) takes its
# place in the model; the pre-flight's advice for that op. Each replacement is written from ops in
# SUPPORTED_OPS as TF 2.21's converter emits them: swish x*sigmoid(x) converts to LOGISTIC and MUL;
# ReLU6 and ReLU to RELU6 and RELU, or fused into the op before. Changing an activation changes the model: fine-tune after it.
REPLACEMENTS: Dict[str, str] = {
    "HARD_SWISH": "use ReLU6 (keras.layers.ReLU(6.0)) or swish x*sigmoid(x) (tf.nn.silu, converted to LOGISTIC and "
                  "MUL, both mapped) instead of hard-swish, then fine-tune",
    "LEAKY_RELU": "use ReLU (keras.layers.ReLU()) instead of LeakyReLU, then fine-tune",
    "GELU": "use swish x*sigmoid(1.702*x) (LOGISTIC and MUL, both mapped; within 0.021 of GELU everywhere) or "
            "ReLU instead of GELU",
    "ELU": "use ReLU (keras.layers.ReLU()) instead of ELU, then fine-tune",
    "LOG_SOFTMAX": "use SOFTMAX (the same ranking of classes; take the log on the host where it is needed)",
    "SQUARE": "multiply the tensor by itself (MUL maps)",
}
