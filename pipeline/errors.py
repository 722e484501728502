"""Errors a user can act on. The CLI prints their message and exits with their code."""


class PipelineError(Exception):
    """Bad input or a failed stage: the message says what was got and what was expected."""

    exit_code = 1


class DataError(PipelineError):
    """The data spec or the data itself is unusable."""


class ConfigError(PipelineError):
    """An option or a combination of options is invalid."""


class ManifestError(PipelineError):
    """The run directory does not match its manifest (missing stage, changed file)."""


class HardwareUnavailable(PipelineError):
    """Asked-for hardware or tool (TPU, Edge TPU, edgetpu_compiler) is not there. Never fall back silently."""

    exit_code = 2


class PeerLost(PipelineError):
    """A multi-worker run lost one of its workers; every worker must be restarted to continue."""

    # Exit 3: not bad input (1) nor missing hardware (2); a supervisor can restart on it.
    exit_code = 3


class RunBusy(PipelineError):
    """Another stage holds the run directory's writer lock; nothing was changed."""
