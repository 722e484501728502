"""`python -m pipeline` = the `pipeline` command."""
from pipeline.cli import main

main()
