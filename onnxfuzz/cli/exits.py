"""The exit codes of every subcommand: one table, shown in ``--help`` and the README."""

CLEAN = 0  # nothing found; a bug that no longer reproduces (fixed); every check passed
FINDINGS = 1  # bugs found; a bug that still reproduces; a check that failed
USAGE = 2  # a bad flag or input, or a set-up error (backend, file, database)
# stopped by Ctrl-C or SIGTERM; the line before says how to go on: `onnxfuzz fuzz --resume`
# (a campaign), the same command again (generate, or fuzz stopped before its campaign was
# stored), the kept model (reduce)
INTERRUPTED = 3
DIFFERENT = 4  # a bug bundle that now fails in another way
# onnxfuzz's own bug (an exception none of its checks expected): not 1, which a script
# reads as findings; 70 is EX_SOFTWARE in sysexits.h
INTERNAL = 70

TABLE = (
    "Exit codes: 0 clean (nothing found, fixed, all checks pass); 1 findings (bugs found, "
    "still reproduces, a check failed); 2 usage or set-up error; 3 interrupted (its last "
    "line says how to go on, e.g. fuzz --resume); 4 fails differently (replay); 70 an "
    "internal error of onnxfuzz (its traceback printed: please report it)."
)
