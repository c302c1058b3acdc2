"""BackendPool: the one way jobs run a model on their backends (real ONNX Runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxfuzz.backend import load_adapter
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Stage, Status
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


@pytest.fixture(scope="module")
def case():
    c = Generator(Config(min_nodes=3, max_nodes=3, ops=frozenset({"Add"}))).generate(5)
    return c.model.SerializeToString(), c.make_inputs(5)


def test_run_all_and_run_one_agree(case) -> None:
    data, inputs = case
    with BackendPool(["ort", "ort:opt=none"], timeout=30) as pool:
        both = pool.run_all(data, inputs)
        assert set(both) == {"ort", "ort:opt=none"}
        assert all(o.status == Status.OK for o in both.values())
        one = pool.run_one("ort", data, inputs)
        assert one.status == Status.OK
        for name, value in both["ort"].outputs.items():
            assert (one.outputs[name] == value).all()
        only = pool.run_all(data, inputs, only=["ort:opt=none"])
        assert set(only) == {"ort:opt=none"}


def test_a_test_in_flight_is_kept_across_other_runs(case) -> None:
    data, inputs = case
    crash = f"{ADAPTERS}:Segfault:op=Add"
    with BackendPool(["ort", crash], timeout=30) as pool:
        pool.start_test(data, inputs)
        again = pool.run_one("ort", data, inputs)  # settles the test in flight first
        assert again.status == Status.OK
        kept = pool.wait()
        assert kept["ort"].status == Status.OK
        assert kept[crash].status == Status.CRASH and kept[crash].stage == Stage.RUN
        # the crashed worker is respawned for the next run
        assert pool.run_one(crash, data, inputs).status == Status.CRASH


def test_unavailable_or_broken_backends_are_refused_by_name() -> None:
    with pytest.raises(BackendError, match="no backend named 'nope'"), BackendPool(["nope"]):
        pass
    with pytest.raises(BackendError, match="optional hooks must be methods: supports"):
        load_adapter(f"{ADAPTERS}:HookNotCallable")
