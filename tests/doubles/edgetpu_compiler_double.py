"""A TEST DOUBLE for Google's edgetpu_compiler: NOT the real compiler, and it compiles nothing.

Only the model it writes is real. Given a model whose bytes equal a CPU model `X.tflite` in
shared/reference/coral/, it writes that model's real compiled twin `X_edgetpu.tflite` (made by
Google's edgetpu_compiler) as `<name>_edgetpu.tflite`.

Its console text and `.log` are MADE UP, and both say so in their first line: no compiler printed
them. They follow compiler 16's layout (EDGETPU.md section 6) so that the stage's parser reads them,
with the version `test-double` (not a real compiler's), the double's own run time, and counts read
from the two real files with the `tflite` package: total ops = the CPU model's, ops on the CPU =
the twin's ops other than edgetpu-custom-op. It prints and writes no operator table: the compiler's
per-op statuses are in no file, and a table made up from the file counts would only tell the stage
what the test already put in. So the stage reads no table from it (`log_table_read` false, and
`--require-full-mapping` is refused for want of one). No test may take this text for a
compiler's: tests assert on the real files and on what the stage does.

Any other model (and any `-n` request: there are no segmented twins of the reference models) fails
with the two lines the real compiler prints when it gives no reason (EDGETPU.md section 6), exit 1.

EDGETPU_DOUBLE_MODE picks a fault for tests of the stage's refusals:
  hang       sleeps far past any timeout
  unchanged  a broken compiler: "succeeds" but writes the input model back unchanged
  mixup      "succeeds" but writes the real twin of a different reference model
  cut-log    writes the real twin, but its console stops before the counts
  hang-child  like hang, after starting a child process that sleeps too (the real compiler forks a
             "compilation child process"), so a test can check that the whole process group ends
  leave-child  starts such a child (its output not on the console), then goes on as usual and exits
             while the child still sleeps
The arguments it got are written to EDGETPU_DOUBLE_ARGS when that is set, for the tests to check;
its pid and its child's (if any), one per line, to EDGETPU_DOUBLE_PIDS.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# The first line of everything the double prints or writes: what follows was not printed by a compiler.
MADE_UP = ("TEST DOUBLE of edgetpu_compiler (tests/doubles/edgetpu_compiler_double.py): no compiler ran; this text is "
           "made up in compiler 16's layout{extra}.\n")
VERSION = "test-double"  # what it gives as the compiler version: no real compiler has this one
HEADER = "Edge TPU Compiler version " + VERSION + "\nStarted a compilation timeout timer of {t} seconds.\n"
# The real compiler's last two lines when it fails without giving a reason (EDGETPU.md section 6).
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
    started = time.monotonic()
    print(MADE_UP.format(extra=""), end="")
    print(HEADER.format(t=timer), end="", flush=True)
    pids = [os.getpid()]
    if mode in ("hang-child", "leave-child"):
        quiet = subprocess.DEVNULL if mode == "leave-child" else None
        pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], stdout=quiet,
                                     stderr=quiet).pid)
    if os.environ.get("EDGETPU_DOUBLE_PIDS"):  # written whole, then renamed: a reader never sees half of it
        pid_file = Path(os.environ["EDGETPU_DOUBLE_PIDS"])
        pid_file.with_suffix(".tmp").write_text("".join(f"{pid}\n" for pid in pids))
        pid_file.with_suffix(".tmp").replace(pid_file)
    if mode in ("hang", "hang-child"):
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
    log = out.with_suffix(".log")
    real = "the input model written back" if mode == "unchanged" else f"Google's compiled twin {twin.name}"
    head = (MADE_UP.format(extra=f"; the model beside it is a copy of {real}")
            + f"Edge TPU Compiler version {VERSION}\nInput: {model.name}\nOutput: {out.name}\n\n")
    log.write_text(head)
    elapsed = round((time.monotonic() - started) * 1000)  # the double's own time: it compiled nothing
    print(f"\nModel compiled successfully in {elapsed} ms.\n\nInput model: {model}\n"
          f"Input size: {model.stat().st_size / 1024:.2f}KiB\nOutput model: {out}\nOutput size: {out.stat().st_size / 1024:.2f}KiB")
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
    print(f"\n{SUCCEEDED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
