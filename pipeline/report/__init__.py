"""RUN/report.html: one self-contained page of what a run found, rendered from the run directory.

    pipeline report runs/digits                          (re)write it
    pipeline report runs/digits --latency bench.json     add what `edge bench MODEL --json bench.json` measured

Every stage that adds to a run (train, export, compile, parity) rewrites it at its end, from what
the run directory holds: manifest.json and the files it records. The page needs no network: CSS
inline, plots as inline SVG, thumbnails as inline PNG, and a Content-Security-Policy that lets it
load nothing. Templates: Jinja2 with autoescaping (templates/); plots: matplotlib (plots.py);
what each section shows: sections.py.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

def write(run_dir: Path, strict: bool = False) -> Optional[Path]:
    """Render RUN/report.html from the run directory and write it atomically; returns its path.

    A stage calls this at its end with strict=False: a report that cannot be rendered must not fail
    the stage, so the error is one warning line on stderr and None is returned. `pipeline report`
    calls it with strict=True and gets the error.
    """
    from pipeline.errors import PipelineError
    from pipeline.rundir.files import write_text_atomic
    from pipeline.rundir.run import artifact

    page = Path(run_dir) / artifact("report").name
    try:
        return write_text_atomic(page, render(run_dir))
    except Exception as err:  # a report is never worth a failed stage
        if strict:
            if isinstance(err, PipelineError):
                raise
            raise PipelineError(f"cannot render {page}: {type(err).__name__}: {err}") from err
        print(f"warning: {page} not updated: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
              file=sys.stderr, flush=True)
        return None


def render(run_dir: Path) -> str:
    """The page's HTML (nothing written)."""
    import importlib

    import jinja2

    from pipeline import tasks
    from pipeline.report import sections
    from pipeline.rundir.run import Run

    run = Run.open(run_dir)
    # The skeleton's templates, then the run's task's own (pipeline/tasks/<task>/templates/, when it has sections).
    task_templates = Path(importlib.import_module(tasks.package(run.task)).__file__).parent / "templates"
    loader = jinja2.ChoiceLoader([jinja2.PackageLoader("pipeline.report", "templates"), jinja2.FileSystemLoader(str(task_templates))])
    env = jinja2.Environment(loader=loader, autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(sections.FILTERS)
    return env.get_template("report.html.j2").render(**sections.gather(run))
