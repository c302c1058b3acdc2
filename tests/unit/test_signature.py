"""Signatures keep one bug in one bundle whatever the incidental text around it."""

from onnxfuzz.judge.signature import normalize


def test_colors_timestamps_addresses_and_paths_do_not_split_a_bug() -> None:
    a = "\x1b[1;31m2026-11-22 23:14:13.123 [E:npu] /opt/npu/src/fuse.cc:120 null at 0x7f3a\x1b[0m"
    b = "2026-11-23 01:02:03.9 [E:npu] /home/u/npu/src/fuse.cc:98 null at 0x55aa12"
    assert normalize(a) == normalize(b)
    assert normalize(a) != normalize("2026-11-22 23:14:13 [E:npu] /x/fuse.cc:1 overflow at 0x1")
