"""The command line: one module per subcommand (``main`` assembles them).

Owns argument parsing, terminal output and exit codes.

May import: anything in the library. Nothing in the library imports it, and this
``__init__`` imports nothing (the console script is ``onnxfuzz.cli.main:main``), so no
subcommand module's import of ``onnxfuzz.cli.exits`` or ``onnxfuzz.cli.options`` runs back
into ``main``.
"""
