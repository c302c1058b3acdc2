"""Ctrl-C (and SIGTERM) as a user sends it to a running command, in a subprocess: what
each command keeps, and what its last words say to do next."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
ROOT = Path(__file__).resolve().parents[2]


class _Running:
    """The command line in a process of its own, its output unbuffered and read line by
    line as it is said (threads: a pipe read waits)."""

    def __init__(self, *argv: str, env: dict[str, str] | None = None) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-m", "onnxfuzz", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=ROOT,
        )
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.readers = [
            threading.Thread(target=self._read, args=(name,), daemon=True) for name in self.lines
        ]
        for r in self.readers:
            r.start()

    def __enter__(self) -> _Running:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.p.poll() is None:  # a test that failed before it stopped the process
            self.p.kill()
            self.p.wait(60)

    def _read(self, name: str) -> None:
        for line in getattr(self.p, name):
            self.lines[name].append(line)

    def wait_for(self, pattern: str, stream: str, limit: float) -> str:
        """The first line of ``stream`` that matches ``pattern`` (AssertionError with
        what the process said, after ``limit`` seconds or once it has ended)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            ended = self.p.poll() is not None
            for line in list(self.lines[stream]):
                if found := re.search(pattern, line):
                    return found.group(0)
            if ended:
                break
            time.sleep(0.1)
        said = "".join(self.lines["stdout"] + self.lines["stderr"])
        raise AssertionError(f"no {pattern!r} on {stream} within {limit} s: {said[-3000:]}")

    def stop(self, signum: int) -> tuple[int, str]:
        """Its exit code and all it said on stderr, once ``signum`` ended it."""
        self.p.send_signal(signum)
        code = self.p.wait(120)
        for r in self.readers:
            r.join(10)
        return code, "".join(self.lines["stderr"])


def _chain(path: Path, nodes: int, pair: tuple[str, str] = ("Mul", "Add")) -> None:
    """``nodes`` elementwise ops in a chain, the ``pair`` in the middle (which the planted
    adapter fails on: a reduction of it drops the other nodes one by one)."""
    ops = ["Relu", "Abs", "Sigmoid", "Tanh"]
    made = []
    for k in range(nodes):
        op = {nodes // 2: pair[0], nodes // 2 + 1: pair[1]}.get(k, ops[k % 4])
        ins = [f"t{k}", f"t{k}"] if op in ("Mul", "Add") else [f"t{k}"]
        made.append(helper.make_node(op, ins, [f"t{k + 1}"]))
    x = helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(made, "chain", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)


def _signature(model: onnx.ModelProto, inputs: dict[str, np.ndarray], failing: str) -> str:
    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.reduce.reproduce import Reproducer, Target

    with BackendPool(["ort", failing], timeout=60) as pool:
        first, _ = Reproducer(pool, Target(failing, "ort")).run(model, inputs)
    return first.signature or ""


def test_ctrl_c_during_reduce_keeps_the_smallest_failing_model_so_far(tmp_path) -> None:
    """Ctrl-C in a long reduction wrote nothing: its minutes were lost. It writes the
    smallest model that has shown the failure so far, with its inputs, where --out
    said, and says so; `onnxfuzz reduce` of that model goes on from it."""
    from onnxfuzz.generate.corpus.testdata import read_inputs

    path = tmp_path / "chain.onnx"
    _chain(path, 40)
    # a crash restarts the worker: each candidate that keeps the pair takes a while
    failing = f"{ADAPTERS}:PairCrash:first=Mul,then=Add"
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", failing, "--out", str(out)]
    with _Running(*argv) as p:
        signature = p.wait_for(r"reducing: .+", "stdout", 120).removeprefix("reducing: ")
        p.wait_for(r"reduced so far: 40 -> \d+ nodes", "stderr", 120)
        code, err = p.stop(signal.SIGINT)
    assert code == 3, err
    said = re.search(r"interrupted: the smallest failing model so far \((\d+) of 40 nodes", err)
    assert said is not None and f"is at {out}/model.onnx" in err, err
    assert f"`onnxfuzz reduce {out}/model.onnx --backend ort --inputs {out}/test_data_set_0 " in err
    model = onnx.load(out / "model.onnx")
    onnx.checker.check_model(model, full_check=True)
    assert len(model.graph.node) == int(said.group(1)) < 40
    inputs = read_inputs(out / "test_data_set_0")
    assert _signature(model, inputs, failing) == signature


def test_ctrl_c_before_reduce_finds_anything_smaller_writes_nothing(tmp_path) -> None:
    """SIGTERM as Ctrl-C: before a candidate was kept there is nothing to keep; said so."""
    path = tmp_path / "chain.onnx"
    _chain(path, 6, ("Neg", "Relu"))
    slow = f"{ADAPTERS}:SlowRaise:op=Neg,delay=5"  # the first candidate takes 5 s
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", slow, "--out", str(out)]
    with _Running(*argv) as p:
        p.wait_for(r"reducing: .+", "stdout", 240)
        code, err = p.stop(signal.SIGTERM)
    assert code == 3, err
    assert "interrupted: no smaller model has failed yet (6 nodes): nothing written" in err, err
    assert not out.exists()


def test_ctrl_c_while_the_backends_start_says_there_is_nothing_to_resume(tmp_path) -> None:
    """Ctrl-C before campaign.db was written exited 3, whose line promised `--resume`,
    which then said the folder "holds no campaign". It says there is nothing to resume."""
    out = tmp_path / "c"
    hangs = f"{ADAPTERS}:InitHangs"
    argv = ["fuzz", "--backend", "ort", "--backend", hangs, "--tests", "2", "--out", str(out)]
    with _Running(*argv, env={"ONNXFUZZ_START_TIMEOUT": "8"}) as p:  # said at 4 s
        p.wait_for(f"starting backend {re.escape(hangs)} has taken", "stderr", 120)
        code, err = p.stop(signal.SIGINT)
    assert code == 3, err
    assert err.strip().splitlines()[-1] == (
        "interrupted before the campaign started (its backends were starting): nothing to "
        "resume; run the same command again"
    ), err
    assert not (out / "campaign.db").exists()


def test_ctrl_c_during_the_probe_says_how_to_resume(tmp_path) -> None:
    """campaign.db is written before the probe: stopped there, --resume continues it (it
    said "onnxfuzz: interrupted" and no more)."""
    out = tmp_path / "c"
    stuck = f"{ADAPTERS}:Stuck"  # every probe run hangs to its --timeout
    argv = ["fuzz", "--backend", "ort", "--backend", stuck, "--ops", "Relu", "--tests", "2"]
    argv += ["--timeout", "60", "--out", str(out)]
    with _Running(*argv, env={"ONNXFUZZ_CACHE": str(tmp_path / "cache")}) as p:
        p.wait_for(r"probing stuck: 0/", "stderr", 240)
        code, err = p.stop(signal.SIGINT)
    assert code == 3, err
    assert f"interrupted: continue with  onnxfuzz fuzz --resume --out {out}" in err, err
    assert (out / "campaign.db").exists()
