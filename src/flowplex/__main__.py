"""``python -m flowplex``: the same command line as the ``flowplex`` script."""

from flowplex.cli import main

if __name__ == "__main__":
    main()
