"""`python -m pipeline` = the `pipeline` command (the console script calls `main` here too).

Ctrl-C while the command's own modules are still being imported ends with exit 130 and one line,
as it does once a command runs (edge.errors.exits_cleanly), not with a traceback.
"""
import sys


def main() -> None:
    try:
        from pipeline.cli import main as command
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C) while starting; nothing was written", file=sys.stderr)
        sys.exit(130)
    command()


if __name__ == "__main__":
    main()
