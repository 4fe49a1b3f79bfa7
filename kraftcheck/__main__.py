"""``python -m kraftcheck``: the same as the ``kraftcheck`` command."""

from kraftcheck.cli.main import main

if __name__ == "__main__":
    main()
