"""``python -m sketch_core.jobs``: see :mod:`sketch_core.jobs`."""

import sys

from sketch_core.jobs.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
