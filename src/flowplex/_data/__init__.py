"""Data shipped with flowplex: the ``flowplex demo`` graph and its agent transcripts."""
