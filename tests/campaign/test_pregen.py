"""Tests made ahead in a generator process are the tests the campaign process would make."""

from __future__ import annotations

import numpy as np

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.pregen import Pregenerator

CFG = Config(min_nodes=3, max_nodes=12)


def test_made_ahead_is_byte_identical_and_in_order() -> None:
    gen = Generator(CFG)
    pre = Pregenerator(CFG)
    pre.start()
    try:
        seeds = [7, 3, 11, 5, 2]
        for i, seed in enumerate(seeds):
            pre.request(i, seed)
        for i, seed in enumerate(seeds):
            m = pre.receive()
            assert (m.index, m.seed, m.error) == (i, seed, None)
            here = gen.generate(seed)
            assert m.model_bytes == here.model.SerializeToString()
            assert m.case is not None and m.case.model == here.model
            assert m.case.choices == here.choices and m.case.ops == here.ops
            want = here.make_inputs(seed)
            assert sorted(m.inputs) == sorted(want)
            for k, v in want.items():
                np.testing.assert_array_equal(m.inputs[k], v)
    finally:
        pre.close()


def test_a_killed_generator_is_restarted_and_owes_nothing() -> None:
    pre = Pregenerator(CFG)
    pre.start()
    try:
        for i in range(4):
            pre.request(i, 100 + i)
        assert pre.receive().index == 0
        pre._proc.kill()  # the rest are owed by a dead process
        pre._proc.wait()
        got = [pre.receive() for _ in range(3)]
        pre.request(4, 104)
        got.append(pre.receive())
        assert [m.index for m in got] == [1, 2, 3, 4]
        assert pre.restarts == 1
        want = Generator(CFG).generate(103).model.SerializeToString()
        assert got[2].model_bytes == want
    finally:
        pre.close()


def test_a_generation_error_comes_back_as_data() -> None:
    # A negative seed makes input sampling raise, as a spec bug would: the error is sent back
    # (the campaign stores it as a generator-error) and the process goes on.
    pre = Pregenerator(CFG)
    pre.start()
    try:
        pre.request(0, -1)
        m = pre.receive()
        assert m.case is None and m.error
        pre.request(1, 5)
        assert pre.receive().error is None  # the process carries on
    finally:
        pre.close()


def test_a_generator_whose_campaign_dies_leaves_quietly(tmp_path) -> None:
    """A campaign killed with tests made ahead and unread (SIGTERM from `timeout`, kill -9):
    its generator process finds the connection reset and exits without a traceback on the
    terminal it shares with the campaign (it printed one per lane)."""
    import os
    import subprocess
    import sys
    import time

    campaign = (
        "import os, sys\n"
        "from onnxfuzz.generate.lang.config import Config\n"
        "from onnxfuzz.run.pregen import Pregenerator\n"
        "pre = Pregenerator(Config(min_nodes=3, max_nodes=12))\n"
        "pre.start()\n"
        "for i in range(6):\n"
        "    pre.request(i, i)\n"
        "pre.receive()\n"  # the rest are made and sent, never read
        "print(pre._proc.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        out = subprocess.run(
            [sys.executable, "-c", campaign],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    child = int(out.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the generator process outlived its campaign by 30 s")
    assert "Traceback" not in err.read_text(), err.read_text()[-2000:]
