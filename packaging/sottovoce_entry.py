"""Entry script for the PyInstaller bundle: the same `sottovoce` command as the pip install.

PyInstaller needs a script, not a console_scripts entry point; this is that script and nothing
more, so the frozen app and `pip install sottovoce` run exactly the same code.
"""

import multiprocessing
import sys

from app.cli import main

if __name__ == "__main__":
    # A frozen app must call this before anything else, or a worker process started by a library
    # (e.g. a multiprocessing pool) would re-run the whole app instead of the worker.
    multiprocessing.freeze_support()
    sys.exit(main())
