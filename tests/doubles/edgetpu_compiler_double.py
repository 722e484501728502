"""A TEST DOUBLE for Google's edgetpu_compiler: NOT the real compiler, and it compiles nothing.

It only hands back what the real compiler made. Given a model whose bytes equal a CPU model
`X.tflite` in shared/reference/coral/, it writes that model's real compiled twin
`X_edgetpu.tflite` (made by Google's edgetpu_compiler) as `<name>_edgetpu.tflite`, with console
text and a `.log` in compiler 16's layout (EDGETPU.md section 6). What it prints is counted from
the two real files with the `tflite` package: total ops = the CPU model's, ops on the CPU = the
twin's ops other than edgetpu-custom-op. Per-op statuses of CPU ops are not in any file, so for a
twin that keeps ops on the CPU the .log carries no operator table rather than invented statuses.

Any other model (and any `-n` request: there are no segmented twins of the reference models) fails
as the real compiler does when it gives no reason: "Compilation failed!", exit 1.

EDGETPU_DOUBLE_MODE picks a fault for tests of the stage's refusals:
  hang       sleeps far past any timeout
  unchanged  a broken compiler: "succeeds" but writes the input model back unchanged
  mixup      "succeeds" but writes the real twin of a different reference model
  cut-log    writes the real twin, but its console and .log stop before the operator table and counts
The arguments it got are written to EDGETPU_DOUBLE_ARGS when that is set, for the tests to check.
"""
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

HEADER = "Edge TPU Compiler version 16.0.384591198\nStarted a compilation timeout timer of {t} seconds.\n"
FAILED = "Compilation child process completed within timeout period.\nCompilation failed! "
SUCCEEDED = "Compilation child process completed within timeout period.\nCompilation succeeded! "
CUSTOM_OP = "edgetpu-custom-op"


def reference_dir() -> Path:
    # tests/doubles/ -> project root -> its parent holds shared/reference/coral/
    return Path(os.environ.get("EDGETPU_DOUBLE_REFERENCE") or Path(__file__).resolve().parents[3] / "shared/reference/coral")


def op_names(path: Path) -> list:
    """Operator names of subgraph 0 (custom code for custom ops), read with the tflite package."""
    import tflite

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    graph, names = model.Subgraphs(0), []
    for i in range(graph.OperatorsLength()):
        code = model.OperatorCodes(graph.Operators(i).OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        names.append(code.CustomCode().decode() if tflite.opcode2name(builtin) == "CUSTOM" else tflite.opcode2name(builtin))
    return names


def twins() -> list:
    """(CPU model, its real compiled twin) pairs in the reference folder."""
    folder = reference_dir()
    return [(twin.with_name(twin.name.replace("_edgetpu.tflite", ".tflite")), twin)
            for twin in sorted(folder.glob("*_edgetpu.tflite"))
            if twin.with_name(twin.name.replace("_edgetpu.tflite", ".tflite")).is_file()]


def main(argv):
    mode = os.environ.get("EDGETPU_DOUBLE_MODE", "")
    if os.environ.get("EDGETPU_DOUBLE_ARGS"):
        Path(os.environ["EDGETPU_DOUBLE_ARGS"]).write_text(json.dumps(argv))
    out_dir = Path(argv[argv.index("-o") + 1]) if "-o" in argv else Path.cwd()
    timer = argv[argv.index("-t") + 1] if "-t" in argv else "180"
    model = Path(argv[-1])
    print(HEADER.format(t=timer), end="", flush=True)
    if mode == "hang":
        time.sleep(3600)
    data = model.read_bytes()
    pairs = twins()
    match = next((pair for pair in pairs if pair[0].read_bytes() == data), None)
    if match is None or "-n" in argv:
        print(FAILED)
        print("(test double: no real compiled twin for this model)", file=sys.stderr)
        return 1
    source, twin = match
    if mode == "mixup":
        twin = next(t for s, t in pairs if s != source)
    out = out_dir / f"{model.stem}_edgetpu.tflite"
    out.write_bytes(data if mode == "unchanged" else twin.read_bytes())
    total = len(op_names(source))
    on_cpu = [n for n in op_names(twin) if n != CUSTOM_OP]
    table = ""
    if not on_cpu:  # every op mapped: the one status the files prove
        rows = Counter(op_names(source))
        table = "Operator                       Count      Status\n\n" + "\n".join(
            f"{name:<31}{n:<11}Mapped to Edge TPU" for name, n in rows.items()) + "\n"
    log = out.with_suffix(".log")
    head = f"Edge TPU Compiler version 16.0.384591198\nInput: {model.name}\nOutput: {out.name}\n\n"
    log.write_text(head if mode == "cut-log" else head + table)
    print(f"\nModel compiled successfully in 412 ms.\n\nInput model: {model}\nInput size: {model.stat().st_size / 1024:.2f}KiB\n"
          f"Output model: {out}\nOutput size: {out.stat().st_size / 1024:.2f}KiB")
    if mode == "cut-log":
        print(SUCCEEDED)
        return 0
    print(f"Number of Edge TPU subgraphs: 1\nTotal number of operations: {total}\nOperation log: {log}")
    if on_cpu:
        print("\nModel successfully compiled but not all operations are supported by the Edge TPU. A percentage of the "
              "model will instead run on the CPU, which is slower. If possible, consider updating your model to use only "
              "operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.\n"
              f"Number of operations that will run on Edge TPU: {total - len(on_cpu)}\n"
              f"Number of operations that will run on CPU: {len(on_cpu)}")
    print(f"\n{table}{SUCCEEDED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
