"""The command-line subcommands `models`, `cuda` and `devices`; `cli.py` is the entry point that
parses the command line and dispatches here (`bench` lives in `bench.py`)."""
