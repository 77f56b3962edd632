"""``python -m fastframe``: the same command line as the ``fastframe`` script."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
