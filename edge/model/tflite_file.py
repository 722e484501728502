"""Read a .tflite file without TensorFlow: its tensors, operators, versions and options.

Built on the `tflite` package (the flatbuffer schema compiled to pure Python), so it runs on a
device with only numpy, and on Python 3.9. Both sides use it: the export verifier and the Edge
TPU pre-flight on the host, the model checks on the device. Over 300 lines because it is one
job: the whole flatbuffer read once, with every bound checked, in one place.

    python -c "from edge.model.tflite_file import read_model, op_counts; print(op_counts(read_model('m.tflite')))"
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Tuple, Union

from edge.errors import ModelCheckError

FILE_IDENTIFIER = b"TFL3"  # a .tflite flatbuffer's file identifier, at bytes 4..8
EDGETPU_CUSTOM_OP = "edgetpu-custom-op"


class ModelFileError(ModelCheckError):
    """The file is not a readable .tflite model (a ValueError, and an EdgeError the CLIs print cleanly)."""


class ReaderUnavailable(ImportError):
    """The `tflite` package (or its `flatbuffers`) is not installed: the reader cannot run, the model may be fine."""


class TensorInfo(NamedTuple):
    index: int
    name: str
    dtype: str  # numpy dtype name: 'int8', 'uint8', 'int32', 'float32', ...
    shape: Tuple[int, ...]
    shape_signature: Tuple[int, ...]  # -1 marks a dynamic dimension; equal to shape when absent
    is_constant: bool  # holds data in the file (weights, biases)
    scales: Tuple[float, ...]
    zero_points: Tuple[int, ...]
    buffer_size: int  # bytes of data in the file, 0 for activations
    is_variable: bool = False  # state an op keeps between invocations (an LSTM's cell and output state)

    @property
    def is_dynamic(self) -> bool:
        """A dimension left to run time: what the Edge TPU and its compiler refuse."""
        return any(d < 0 for d in self.shape_signature)


class OpInfo(NamedTuple):
    index: int  # position in execution order (subgraph 0)
    name: str  # builtin name ('CONV_2D') or, for CUSTOM ops, the custom code
    version: int
    inputs: Tuple[int, ...]  # tensor indices; -1 = optional input left out
    outputs: Tuple[int, ...]
    options: Dict[str, Any]  # builtin options as plain values; enums by name
    is_custom: bool = False  # a CUSTOM op: `name` is its custom code


class ModelInfo(NamedTuple):
    tensors: List[TensorInfo]
    ops: List[OpInfo]
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    num_subgraphs: int
    file_size: int

    def tensor(self, index: int) -> TensorInfo:
        return self.tensors[index]


def flatbuffer_schema():
    """The `tflite` package: the .tflite flatbuffer schema's generated readers (clear error when absent)."""
    try:
        import tflite  # noqa: F401
    except ImportError as err:
        raise ReaderUnavailable(
            f"reading .tflite files needs the `tflite` package, which cannot be imported here ({err}); "
            "install it with `pip install tflite==2.18.0 flatbuffers` (it comes with `pip install edgeflow`)"
        ) from err
    return tflite


def _enum_names(enum_class) -> Dict[int, str]:
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_") and isinstance(v, int)}


_CACHE: Dict[str, Dict[int, str]] = {}


def _names(kind: str) -> Dict[int, str]:
    if kind not in _CACHE:
        tflite = flatbuffer_schema()
        _CACHE[kind] = _enum_names(getattr(tflite, kind))
    return _CACHE[kind]


def _dtype_name(code: int) -> str:
    name = _names("TensorType").get(code, f"unknown{code}")
    return {"BOOL": "bool", "STRING": "object"}.get(name, name.lower())


def _snake(name: str) -> str:
    """'DilationHFactor' -> 'dilation_h_factor', as the schema's own field names read."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# Option fields whose values are enums, by the enum class in the schema: reported by name so a
# rule reads `options["weights_format"] == "DEFAULT"` rather than a schema number.
_ENUM_FIELDS = {
    "fused_activation_function": "ActivationFunctionType",
    "padding": "Padding",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "quantized_bias_type": "TensorType",
    "mode": "MirrorPadMode",
    "kernel_type": "LSTMKernelType",
    "combiner": "CombinerType",
}


def _options(op, index: int, op_name: str) -> Dict[str, Any]:
    """The op's builtin options table as a dict, by reflection over the generated class.

    Options that cannot be read raise ModelFileError naming the op: a caller that got {} or a
    partial dict would assume the defaults (stride 1, no activation) and judge the op wrongly.
    """
    tflite = flatbuffer_schema()
    kind = op.BuiltinOptionsType()
    if not kind:
        return {}
    where = f"op {index} {op_name}"
    class_name = _names("BuiltinOptions").get(kind)
    cls = getattr(tflite, class_name, None) if class_name else None
    if cls is None:
        raise ModelFileError(f"{where}: its options are of type {class_name or kind}, which the `tflite` package's "
                             "schema does not know (a newer converter?); expected options this reader can read")
    table = op.BuiltinOptions()
    if table is None:
        raise ModelFileError(f"{where}: it declares {class_name} but the options table is missing")
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    values: Dict[str, Any] = {}
    for attr in dir(cls):
        if not attr[:1].isupper() or attr.startswith(("GetRootAs", "Init")) or "BufferHasIdentifier" in attr:
            continue
        if attr.endswith(("AsNumpy", "Length", "IsNone")):
            continue
        method = getattr(obj, attr)
        key = _snake(attr)
        try:
            if hasattr(obj, attr + "Length"):
                values[key] = [method(j) for j in range(getattr(obj, attr + "Length")())]
            else:
                values[key] = method()
        except Exception as err:  # a damaged table fails in struct, index or type errors alike
            raise ModelFileError(f"{where}: option {key!r} of its {class_name} cannot be read "
                                 f"({type(err).__name__}: {err})") from err
        if key in _ENUM_FIELDS and isinstance(values[key], int) and hasattr(tflite, _ENUM_FIELDS[key]):
            values[key] = _names(_ENUM_FIELDS[key]).get(values[key], values[key])
    return values


def read_model(source: Union[str, Path, bytes, bytearray]) -> ModelInfo:
    """Parse a .tflite model from a path or bytes. Raises ModelFileError when it cannot be read."""
    if isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "model"
    else:
        where = str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise ModelFileError(f"cannot read {where}: {err.strerror or err}") from err
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise ModelFileError(f"{where} is not a TFLite model: expected the 'TFL3' identifier at bytes 4..8, got {data[4:8]!r}")
    try:
        return _parse(data)
    except ReaderUnavailable:
        raise  # the reader is missing, not the model damaged
    except ModelFileError as err:
        raise ModelFileError(f"{where}: {err}") from err
    except Exception as err:  # a damaged flatbuffer fails in struct, index or decode errors alike
        raise ModelFileError(f"{where} is damaged: cannot parse its flatbuffer ({type(err).__name__}: {err})") from err


def _parse(data: bytes) -> ModelInfo:
    tflite = flatbuffer_schema()
    model = tflite.Model.GetRootAsModel(data, 0)
    if model.SubgraphsLength() < 1:
        raise ModelFileError("model has no subgraph")
    builtin_names = _names("BuiltinOperator")
    opcodes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        custom = code.CustomCode()
        name = custom.decode("utf-8", "replace") if builtin_names.get(builtin) == "CUSTOM" and custom else builtin_names.get(builtin, f"BUILTIN_{builtin}")
        opcodes.append((name, code.Version(), builtin_names.get(builtin) == "CUSTOM"))
    buffer_sizes = [model.Buffers(i).DataLength() for i in range(model.BuffersLength())]
    graph = model.Subgraphs(0)
    tensors = []
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        shape = tuple(int(x) for x in (t.ShapeAsNumpy() if t.ShapeLength() else ()))
        signature = tuple(int(x) for x in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
        q = t.Quantization()
        scales = tuple(float(x) for x in q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else ()
        zeros = tuple(int(x) for x in q.ZeroPointAsNumpy()) if q is not None and q.ZeroPointLength() else ()
        size = buffer_sizes[t.Buffer()] if 0 <= t.Buffer() < len(buffer_sizes) else 0
        tensors.append(TensorInfo(i, (t.Name() or b"").decode("utf-8", "replace"), _dtype_name(t.Type()), shape,
                                  signature, size > 0, scales, zeros, size, bool(t.IsVariable())))
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if not 0 <= op.OpcodeIndex() < len(opcodes):
            raise ModelFileError(f"operator {i} names opcode {op.OpcodeIndex()}, the model has {len(opcodes)}")
        name, version, custom = opcodes[op.OpcodeIndex()]
        inputs = tuple(int(x) for x in op.InputsAsNumpy()) if op.InputsLength() else ()
        outputs = tuple(int(x) for x in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        ops.append(OpInfo(i, name, version, inputs, outputs, _options(op, i, name), custom))
    graph_inputs = tuple(int(x) for x in graph.InputsAsNumpy()) if graph.InputsLength() else ()
    graph_outputs = tuple(int(x) for x in graph.OutputsAsNumpy()) if graph.OutputsLength() else ()
    return ModelInfo(tensors, ops, graph_inputs, graph_outputs, model.SubgraphsLength(), len(data))


def is_edgetpu_compiled(info: ModelInfo) -> bool:
    """True when any op is the Edge TPU's custom op, i.e. edgetpu_compiler has run on the model."""
    return any(op.name == EDGETPU_CUSTOM_OP for op in info.ops)


def cpu_ops(info: ModelInfo) -> List[OpInfo]:
    """The ops of a compiled model outside `edgetpu-custom-op`: what the compiler left on the CPU."""
    return [op for op in info.ops if op.name != EDGETPU_CUSTOM_OP]


class TensorSignature(NamedTuple):
    name: str
    dtype: str
    shape: Tuple[int, ...]
    scales: Tuple[float, ...]
    zero_points: Tuple[int, ...]

    def describe(self) -> str:
        quant = f" scale {list(self.scales)} zero point {list(self.zero_points)}" if self.scales else ""
        return f"{self.name!r} {self.dtype} {list(self.shape)}{quant}"


def io_signatures(info: ModelInfo) -> Tuple[List[TensorSignature], List[TensorSignature]]:
    """(inputs, outputs) of subgraph 0 as name, dtype, shape and quantization, in the model's order."""
    def sig(i: int) -> TensorSignature:
        t = info.tensor(i)
        return TensorSignature(t.name, t.dtype, t.shape, t.scales, t.zero_points)
    return [sig(i) for i in info.inputs], [sig(i) for i in info.outputs]


def edgetpu_min_runtime_versions(source: Union[str, Path, bytes, bytearray]) -> List[int]:
    """The min_runtime_version of each edgetpu-custom-op's DarwiNN package, in op order.

    custom_options is a flexbuffer map whose key "4" holds the package, a flatbuffer with the
    identifier "DWN1" whose first field is min_runtime_version (the layout libedgetpu's custom_op_data.cc
    and executable.fbs define). libedgetpu refuses a package that needs a newer runtime.
    """
    import struct

    from flatbuffers import flexbuffers
    from flatbuffers.table import Table

    data = bytes(source) if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    model = flatbuffer_schema().Model.GetRootAsModel(data, 0)
    graph, versions = model.Subgraphs(0), []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() != EDGETPU_CUSTOM_OP.encode():
            continue
        try:
            value = flexbuffers.GetRoot(op.CustomOptionsAsNumpy().tobytes()).AsMap["4"]
            package = bytes(value.AsBlob) if value.IsBlob else bytes(flexbuffers.String(value._Indirect(), value._byte_width).Bytes)
            if package[4:8] != b"DWN1":
                raise ValueError(f"identifier {package[4:8]!r}, expected b'DWN1'")
            table = Table(bytearray(package), struct.unpack_from("<I", package, 0)[0])
            field = table.Offset(4)  # field 0: min_runtime_version
            versions.append(struct.unpack_from("<i", package, table.Pos + field)[0] if field else 0)
        except Exception as err:  # a damaged package fails in many ways alike
            raise ModelFileError(f"op {i} {EDGETPU_CUSTOM_OP} has no readable Edge TPU package ({type(err).__name__}: {err})") from err
    return versions


def dynamic_tensors(info: ModelInfo) -> List[TensorInfo]:
    """Tensors with a dynamic dimension (-1 in the shape signature): what the Edge TPU and its compiler refuse."""
    return [t for t in info.tensors if t.is_dynamic]


def ops_over_version(info: ModelInfo, limits: Mapping[str, int]) -> List[Tuple[OpInfo, int]]:
    """(op, its limit) for each op whose version is above `limits[op.name]`; ops without a limit pass."""
    return [(op, limits[op.name]) for op in info.ops if op.name in limits and op.version > limits[op.name]]


def op_counts(info: ModelInfo) -> Dict[Tuple[str, int], int]:
    """How many ops of each (name, version) the model has."""
    counts: Dict[Tuple[str, int], int] = {}
    for op in info.ops:
        counts[(op.name, op.version)] = counts.get((op.name, op.version), 0) + 1
    return counts


def constant_data(source: Union[str, Path, bytes, bytearray], index: int):
    """The values of constant tensor `index` (subgraph 0) as a numpy array, or None for an activation."""
    import numpy as np

    data = bytes(source) if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    model = flatbuffer_schema().Model.GetRootAsModel(data, 0)
    tensor = model.Subgraphs(0).Tensors(index)
    buffer = model.Buffers(tensor.Buffer())
    if buffer.DataLength() == 0:
        return None
    dtype = np.dtype(_dtype_name(tensor.Type()))
    shape = tuple(int(x) for x in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    return np.frombuffer(buffer.DataAsNumpy().tobytes(), dtype=dtype).reshape(shape)
