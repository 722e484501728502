"""Where the pre-flight's prediction and the real compiler disagree: the compiled files' CPU ops first, then the log's statuses."""
from __future__ import annotations

from collections import Counter
from typing import List

from pipeline.edgetpu import compiled_check, compiler_log, preflight


def disagreements(prediction: preflight.Preflight, parsed: compiler_log.CompilerOutput,
                  compiled: List[compiled_check.CompiledFacts]) -> List[str]:
    """Where the prediction differs from the compiled files' CPU ops, then from the log's statuses."""
    lines = []
    predicted_cpu = Counter(r.op for r in prediction.rows if not r.on_edgetpu)
    actual_cpu = Counter(op for c in compiled for op in c.cpu_ops)
    if parsed.ops_on_cpu is not None and parsed.ops_on_cpu != sum(actual_cpu.values()):
        lines.append(f"the compiler's output says {parsed.ops_on_cpu} op(s) on the CPU, the compiled file(s) keep "
                     f"{sum(actual_cpu.values())}")
    for op in sorted(set(predicted_cpu) | set(actual_cpu)):
        if predicted_cpu[op] != actual_cpu[op]:
            lines.append(f"{op} on the CPU: predicted {predicted_cpu[op]}, compiled file {actual_cpu[op]}")
    if parsed.operators:  # the log's statuses, when it has a table
        predicted = Counter()
        for r in prediction.rows:
            predicted[(r.log_op, r.status)] += 1
        actual = compiler_log.status_counts(parsed.operators)
        for key in sorted(set(predicted) | set(actual)):
            if predicted.get(key, 0) != actual.get(key, 0):
                lines.append(f"{key[0]} '{key[1]}': predicted {predicted.get(key, 0)}, compiler {actual.get(key, 0)}")
    return lines
