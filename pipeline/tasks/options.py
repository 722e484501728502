"""Each task's own command-line options, declared in its package (pipeline/tasks/<task>/options.py) and offered by
the commands through the registry: the command line adds every task's options, and a run of another task refuses
them (or ignores them, as the option says).

    OPTIONS = {"parity": (Option("--top-k", "top_k", "k for top-k accuracy (default 5)", int, default=5),)}
    def check(command, given): ...            # values out of range: ConfigError, before any work

    declared("parity")                        # every task's parity options, for the command line
    check("parity", {"top_k": 0})             # each owning task's own refusals
    for_task("detect", "parity", given)       # the detect run's options, defaults filled; another task's refused
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from pipeline import tasks
from pipeline.errors import ConfigError


class Option(NamedTuple):
    """One task option of one command."""

    flag: str  # as the command line spells it: "--top-k"
    key: str  # its name in the config's task_options (and the command's parameter)
    help: str
    type: Any = None  # int, float, a tuple of choices; None: a string
    default: Any = None  # its value when not given (None: the task's code decides)
    show_default: bool = False  # --help shows the default, as click's show_default
    # What a run of another task answers when it is given (format fields: flag, value, task); None: ignored there.
    elsewhere: Optional[str] = None


def _module(task: str):
    """Task `task`'s options module, or None when it declares none."""
    return tasks.part(task, "options")


def said(attribute: str) -> List[Tuple[str, Any]]:
    """(task, what its options.py says under `attribute`) for every task that says it. The commands' help texts are
    built from these words, so that no command names a task and a new task's words come from its own folder."""
    found = [(name, getattr(_module(name), attribute, None)) for name in tasks.names()]  # None: no options.py
    return [(name, words) for name, words in found if words]


def of_task(task: str, command: str) -> List[Option]:
    module = _module(task)
    return list(module.OPTIONS.get(command, ())) if module is not None else []


def declared(command: str) -> List[Option]:
    """Every task's options of `command`, each flag once (the first task to declare it)."""
    found: Dict[str, Option] = {}
    for task in tasks.names():
        for option in of_task(task, command):
            found.setdefault(option.flag, option)
    return list(found.values())


def check(command: str, given: Mapping[str, Any]) -> None:
    """Each task's own refusals of the values given (None: not given) for its options of `command`."""
    for task in tasks.names():
        mine = {o.key for o in of_task(task, command)}
        values = {k: v for k, v in given.items() if k in mine and v is not None}
        if values:
            _module(task).check(command, values)


def for_task(task: str, command: str, given: Mapping[str, Any]) -> Dict[str, Any]:
    """The values of task `task`'s options of `command`, its defaults where not given; an option only another task
    declares, given (and not at that option's default), refused as the option says, else left out."""
    mine = {o.key: o for o in of_task(task, command)}
    for key, value in given.items():
        if key in mine or value is None:
            continue
        other = next((o for o in declared(command) if o.key == key), None)
        if other is not None and other.elsewhere is not None and value != other.default:
            raise ConfigError(other.elsewhere.format(flag=other.flag, value=value, task=task))
    values = {key: given.get(key) if given.get(key) is not None else option.default for key, option in mine.items()}
    if values:
        _module(task).check(command, {k: v for k, v in values.items() if v is not None})
    return values
