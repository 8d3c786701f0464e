"""Entry point of the bundled app: the same `s2s-desktop` command as the console script."""

import multiprocessing
import sys

from s2s_desktop.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not start the app again
    sys.exit(main())
