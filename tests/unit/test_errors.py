"""Bad specs and bad options fail with an error naming the thing and the fix."""

from __future__ import annotations

import pytest

from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.build.builder import GenBuilder
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.domains import Ints
from onnxfuzz.generate.lang.graph import Graph
from onnxfuzz.generate.lang.intervals import Interval
from onnxfuzz.generate.lang.spec import REGISTRY, OpSpec, load_specs, op_info, register_spec


def _build(fn, op: str = "Relu") -> None:
    spec = OpSpec(op, fn)
    b = GenBuilder(spec, op_info(op, 21), Config(), Graph(), ChoiceStream(0))
    fn(b, None)


def test_empty_attribute_domain_names_op_and_variable() -> None:
    def bad(b, p):
        x = b.input(0)
        b.attr("axis", Ints(x.rank + 1, x.rank))

    with pytest.raises(SpecError) as e:
        _build(bad)
    assert e.value.op == "Relu" and e.value.variable == "axis"
    assert "empty domain" in str(e.value)


def test_empty_dim_domain_names_the_axis() -> None:
    def bad(b, p):
        b.input(0, dims=[Ints(3, 2)])

    with pytest.raises(SpecError, match=r"spec Relu: variable 'X.shape\[0\]': empty domain"):
        _build(bad)


def test_unknown_input_name_lists_the_schema_inputs() -> None:
    def bad(b, p):
        b.input("data")

    with pytest.raises(SpecError, match=r"no input named 'data'.*\['X'\]"):
        _build(bad)


def test_output_interval_outside_the_dtype_bound_is_a_spec_bug() -> None:
    def bad(b, p):
        x = b.input(0, dtype=1)
        b.output(x.shape, interval=Interval(0, 1e9))

    with pytest.raises(SpecError, match="exceeds the float32 bound"):
        _build(bad)


def test_missing_output_interval_is_a_spec_bug() -> None:
    def bad(b, p):
        x = b.input(0, dtype=1)
        b.output(x.shape)

    with pytest.raises(SpecError, match="give the output's value interval"):
        _build(bad)


def test_registry_refuses_unknown_ops_bad_signatures_and_duplicates() -> None:
    load_specs()
    with pytest.raises(SpecError, match="no such operator"):
        register_spec(OpSpec("NotAnOp", lambda b, p: None))
    with pytest.raises(SpecError, match=r"build must be a function \(b, p\)"):
        register_spec(OpSpec("Relu", lambda b: None))
    with pytest.raises(SpecError, match="registered twice"):
        register_spec(OpSpec("Relu", lambda b, p: None))
    assert REGISTRY["Relu"].family == "elementwise_unary"


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"min_nodes": 5, "max_nodes": 2}, "--nodes"),
        ({"picking_rate": 1.5}, "--picking-rate"),
        ({"opset": 30}, "--opset"),
        ({"max_dim": 0}, "--max-dim"),
    ],
)
def test_config_errors_name_the_flag(kwargs, flag) -> None:
    with pytest.raises(ConfigError, match=flag):
        Config(**kwargs)


def test_unknown_ops_name_the_flag() -> None:
    from onnxfuzz.generate.build.generator import Generator

    with pytest.raises(ConfigError, match="--ops: no spec for Frobnicate"):
        Generator(Config(ops=frozenset({"Frobnicate"})))


def test_options_that_rule_out_every_op_say_why() -> None:
    from onnxfuzz import dtypes as dt
    from onnxfuzz.generate.build.generator import Generator

    with pytest.raises(ConfigError, match="no op can be generated"):
        Generator(Config(ops=frozenset({"Log"}), dtypes=frozenset({dt.INT8})))
