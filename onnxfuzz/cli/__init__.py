"""The command line: one module per subcommand (``main`` assembles them).

Owns argument parsing, terminal output and exit codes.

May import: anything in the library. Nothing in the library imports it.
"""

from onnxfuzz.cli.main import cli, main

__all__ = ["cli", "main"]
