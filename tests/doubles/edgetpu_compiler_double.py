"""A TEST DOUBLE for Google's edgetpu_compiler: NOT the real compiler, and compiles nothing.

It accepts the real command line (`-s -o DIR -t N ... MODEL`) and, by EDGETPU_DOUBLE_MODE, behaves
like one outcome of the real tool, printing console text shaped like compiler 16's (layout from
shared/EDGETPU.md section 6):
  success   writes DIR/<name>_edgetpu.tflite (the input bytes, unchanged: not an Edge TPU model)
            and DIR/<name>_edgetpu.log, prints a successful console, exits 0; with `-n N` it writes
            DIR/<name>_segment_K_of_N_edgetpu.tflite for K < N instead (bytes: the input + a marker)
  partial   as success, but the log says op 2 and later run on the CPU
  invalid   prints "Model could not be parsed" (CONV_2D version 6), exits 1
  silent    prints "Compilation failed!" with no reason, exits 0 (the exit code alone is not enough)
  hang      sleeps far past any timeout
The arguments it got are written to EDGETPU_DOUBLE_ARGS when that is set, for the tests to check.
"""
import json
import os
import sys
import time
from pathlib import Path

HEADER = "Edge TPU Compiler version 16.0.384591198\nStarted a compilation timeout timer of {t} seconds.\n"


def main(argv):
    mode = os.environ.get("EDGETPU_DOUBLE_MODE", "success")
    if os.environ.get("EDGETPU_DOUBLE_ARGS"):
        Path(os.environ["EDGETPU_DOUBLE_ARGS"]).write_text(json.dumps(argv))
    out_dir = Path(argv[argv.index("-o") + 1])
    timer = argv[argv.index("-t") + 1] if "-t" in argv else "180"
    model = Path(argv[-1])
    if mode == "hang":
        time.sleep(3600)
    if mode == "invalid":
        print(HEADER.format(t=timer) + "ERROR: Didn't find op for builtin opcode 'CONV_2D' version '6'. An older version "
              "of this builtin might be supported. Are you using an old TFLite binary with a newer model?\n\n"
              f"ERROR: Registration failed.\n\nInvalid model: {model}\nModel could not be parsed")
        return 1
    if mode == "silent":
        print(HEADER.format(t=timer) + "Compilation child process completed within timeout period.\nCompilation failed! ")
        return 0
    out = out_dir / f"{model.stem}_edgetpu.tflite"
    if "-n" in argv:
        segments = int(argv[argv.index("-n") + 1])
        for k in range(segments):
            (out_dir / f"{model.stem}_segment_{k}_of_{segments}_edgetpu.tflite").write_bytes(
                model.read_bytes() + f"segment {k} (test double)".encode())
    else:
        out.write_bytes(model.read_bytes())
    rows = [("QUANTIZE", 2, "Mapped to Edge TPU"), ("MUL", 1, "Mapped to Edge TPU"), ("ADD", 1, "Mapped to Edge TPU"),
            ("CONV_2D", 3, "Mapped to Edge TPU"), ("MAX_POOL_2D", 2, "Mapped to Edge TPU"), ("MEAN", 1, "Mapped to Edge TPU"),
            ("FULLY_CONNECTED", 1, "Mapped to Edge TPU"), ("SOFTMAX", 1, "Mapped to Edge TPU")]
    if mode == "partial":
        rows = [("QUANTIZE", 1, "Mapped to Edge TPU"), ("MUL", 1, "Operation not supported"),
                ("QUANTIZE", 1, "More than one subgraph is not supported"), ("ADD", 1, "More than one subgraph is not supported")]
    table = "Operator                       Count      Status\n\n" + "\n".join(f"{op:<31}{n:<11}{s}" for op, n, s in rows)
    (out_dir / f"{model.stem}_edgetpu.log").write_text(
        f"Edge TPU Compiler version 16.0.384591198\nInput: {model.name}\nOutput: {out.name}\n\n{table}\n")
    on_tpu = sum(n for _, n, s in rows if s == "Mapped to Edge TPU")
    total = sum(n for _, n, _ in rows)
    partial = "" if on_tpu == total else (
        "Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model "
        "will instead run on the CPU, which is slower.\n"
        f"Number of operations that will run on Edge TPU: {on_tpu}\nNumber of operations that will run on CPU: {total - on_tpu}\n")
    print(HEADER.format(t=timer) + f"""
Model compiled successfully in 412 ms.

Input model: {model}
Input size: 31.61KiB
Output model: {out}
Output size: 98.27KiB
On-chip memory used for caching model parameters: 41.75KiB
On-chip memory remaining for caching model parameters: 7.95MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: {total}
Operation log: {out_dir / (model.stem + '_edgetpu.log')}
{partial}
{table}
Compilation child process completed within timeout period.
Compilation succeeded! """)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
