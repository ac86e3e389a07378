"""``python -m flowplex``: the same command line as the ``flowplex`` script."""

from flowplex._launch import main

if __name__ == "__main__":
    main()
