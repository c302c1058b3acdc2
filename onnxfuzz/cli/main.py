"""The ``onnxfuzz`` command line: the group, its commands, and one error policy."""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from types import FrameType

import click

from onnxfuzz import __version__
from onnxfuzz.cli import exits
from onnxfuzz.cli.backend import backend
from onnxfuzz.cli.fuzz import fuzz
from onnxfuzz.cli.generate import generate
from onnxfuzz.cli.infer import infer
from onnxfuzz.cli.metrics import metrics
from onnxfuzz.cli.reduce import reduce
from onnxfuzz.cli.replay import replay
from onnxfuzz.cli.report import report
from onnxfuzz.cli.specs import specs_cmd
from onnxfuzz.cli.triage import triage
from onnxfuzz.errors import OnnxFuzzError


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=exits.TABLE)
@click.version_option(__version__, prog_name="onnxfuzz")
def cli() -> None:
    """Generate valid random ONNX models and test ONNX compilers and runtimes with them."""


for command in (generate, specs_cmd, fuzz, replay, backend, reduce, triage, report, metrics, infer):
    cli.add_command(command)


def _terminated(signum: int, frame: FrameType | None) -> None:
    """SIGTERM stops a command as Ctrl-C does: what it holds is saved and its backend
    workers (in sessions of their own, out of the signal's reach) are ended, exit 3."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error is one line naming the flag or thing at fault."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if on_main_thread else None
    try:
        rv = cli.main(args=argv, prog_name="onnxfuzz", standalone_mode=False)
        if isinstance(rv, int):  # click returns a command's Exit code in this mode
            return rv
    except click.exceptions.Exit as e:
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("onnxfuzz: interrupted", err=True)
        return exits.INTERRUPTED
    except click.ClickException as e:
        click.echo(f"onnxfuzz: error: {e.format_message()}", err=True)
        return exits.USAGE
    except OnnxFuzzError as e:
        click.echo(f"onnxfuzz: error: {e}", err=True)
        return exits.USAGE
    except OSError as e:  # a file or folder the system refused (full disk, permissions)
        where = f"{e.filename}: " if e.filename else ""
        click.echo(f"onnxfuzz: error: {where}{e.strerror or e}", err=True)
        return exits.USAGE
    except Exception as e:  # noqa: BLE001 - onnxfuzz's own bug: said as such, not exit 1
        click.echo(traceback.format_exc().rstrip(), err=True)
        click.echo(
            f"onnxfuzz: internal error ({type(e).__name__}): a bug of onnxfuzz, not of your "
            "input or backend; please report it with the traceback above and the command",
            err=True,
        )
        return exits.INTERNAL
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
    return exits.CLEAN


if __name__ == "__main__":
    sys.exit(main())
