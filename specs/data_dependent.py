"""Ops whose output shape depends on data, made static by constant inputs.

Compress, NonZero, Unique and NonMaxSuppression size their outputs by values. When the
values that decide the shape are constants (an initializer condition for Compress, constant
inputs for the others), the output shape is known when the model is built: a static-shape
generator can express them, and compilers meet them as they appear after constant folding
or in exported models with fixed masks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder

NOT_GENERATED = {
    "test_nonmaxsuppression_identical_boxes": "equal scores within a class: the order in "
    "which tied boxes are selected is left open (backends may legitimately differ)",
    "test_nonmaxsuppression_iou_threshold_boundary": "an IoU equal to iou_threshold: kept or "
    "suppressed by float rounding; generated thresholds keep 0.02 away from every IoU",
    "test_unique_length_1": "an input of zeros only: the small-tensor domain Unique shares "
    "with NonZero keeps one value nonzero",
}


class Mask:
    """A 1-D boolean condition of length 1..``n`` with at least one true (Compress keeps the
    selected slices; a condition shorter than the axis drops the rest)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Mask(<= {self.n}, some true)"

    def empty(self) -> bool:
        return self.n < 1

    def draw(self, s: ChoiceStream) -> list[bool]:
        length = s.integer(1, self.n)
        bits = [not s.chance(0.5) for _ in range(length)]
        bits[s.index(length)] = True  # at least one slice kept: no zero-size output
        return bits

    def contains(self, value: Any) -> bool:
        v = list(np.asarray(value).reshape(-1))
        return 1 <= len(v) <= self.n and any(bool(x) for x in v)


class SmallTensor:
    """A constant tensor of rank 1..``max_rank`` with dims 1..``max_dim`` and small integer
    values (exact in every type) of which at least one is nonzero; ``repeats`` favours
    repeated values (Unique)."""

    __slots__ = ("max_rank", "max_dim", "repeats")

    def __init__(self, max_rank: int, max_dim: int, repeats: bool = False) -> None:
        self.max_rank, self.max_dim, self.repeats = max(1, max_rank), max(1, max_dim), repeats

    def __repr__(self) -> str:
        return f"SmallTensor(rank <= {self.max_rank}, dims <= {self.max_dim})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> np.ndarray:
        rank = s.integer(1, min(self.max_rank, 3))
        shape = [s.integer(1, min(self.max_dim, 5)) for _ in range(rank)]
        top = 3 if self.repeats else 4
        vals = [s.integer(0, top) for _ in range(math.prod(shape))]
        vals[s.index(len(vals))] = s.integer(1, top)  # at least one nonzero
        return np.asarray(vals, dtype=np.int64).reshape(shape)

    def contains(self, value: Any) -> bool:
        a = np.asarray(value)
        return 1 <= a.ndim <= self.max_rank and a.size > 0 and bool(np.any(a != 0))


@op("Compress")
def compress(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=Ints(1, 8))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), None)
    n = math.prod(x.shape) if axis is None else x.shape[axis % x.rank]
    cond = b.draw("condition", Mask(n))
    b.const("condition", np.asarray(cond, dtype=bool))
    kept = int(np.count_nonzero(cond))
    if axis is None:  # the flattened input
        shape = [kept]
    else:
        shape = list(x.shape)
        shape[axis % x.rank] = kept
    b.output(shape, interval=x.interval)


def _constant(b: SpecBuilder, name: str, repeats: bool = False) -> np.ndarray:
    dtype = b.const_type(name)
    values = b.draw(name, SmallTensor(b.max_rank, b.max_dim, repeats))
    arr = np.asarray(values).astype(dt.np_dtype(dtype))
    b.const(name, arr, dtype=dtype)
    return arr


@op("NonZero")
def nonzero(b: SpecBuilder, p: None) -> None:
    x = _constant(b, "X")
    nnz = int(np.count_nonzero(x))
    b.output([x.ndim, nnz], interval=Interval(0, max(x.shape) - 1))


@op("Unique")
def unique(b: SpecBuilder, p: None) -> None:
    x = _constant(b, "X", repeats=True)
    sorted_ = b.attr("sorted", OneOf([1, 0]), 1)
    axis = b.attr("axis", Ints(-x.ndim, x.ndim - 1), None)
    if axis is None:
        uniq = np.unique(x.reshape(-1))
        k, n = len(uniq), x.size
        y_shape = [k]
    else:
        ax = axis % x.ndim
        moved = np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)
        k = len(np.unique(moved, axis=0))
        n = x.shape[ax]
        y_shape = list(x.shape)
        y_shape[ax] = k
    del sorted_  # the order of Y changes with it, not the shapes
    lo, hi = float(x.min()), float(x.max())
    b.output(y_shape, interval=Interval(lo, hi))
    b.output([k], interval=Interval(0, n - 1))  # indices of first occurrences
    b.output([n], interval=Interval(0, k - 1))  # inverse_indices
    b.output([k], interval=Interval(1, n))  # counts


# --- NonMaxSuppression ------------------------------------------------------------------------
# Boxes and scores are constants: which boxes survive (the output's first dim) is computed here
# when the model is built. Ties are kept out so that every backend must select the same boxes in
# the same order: scores are distinct within a class (equal scores leave the order open),
# score_threshold lies halfway between score grid points, and iou_threshold keeps IOU_MARGIN
# away from every positive IoU of two boxes of a batch (an IoU equal to the threshold within
# float error keeps or suppresses a box by rounding). Box corners are whole numbers (centers
# half-integers): areas, overlaps and the "do they overlap at all" test are exact everywhere.
MAX_BATCHES = 2
MAX_CLASSES = 3
MAX_BOXES = 6
COORD = 12  # box corners are whole numbers in [0, COORD]
SCORE_STEP = 1 / 16  # scores are multiples of it in [-1, 1]
IOU_MARGIN = 0.02
IOU_CANDIDATES = [0.0] + [k / 20 for k in range(1, 20)]  # iou_threshold's grid in [0, 0.95]


def _corners(boxes: Any, center: int) -> np.ndarray:
    """(batch, n, 4) boxes as [x_min, y_min, x_max, y_max]: corner boxes are [y1, x1, y2, x2]
    with any diagonal pair of corners, center boxes [x_center, y_center, width, height]."""
    a = np.asarray(boxes, dtype=np.float64)
    if center:
        xc, yc, w, h = np.moveaxis(a, -1, 0)
        return np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(a, -1, 0)
    return np.stack(
        [np.minimum(x1, x2), np.minimum(y1, y2), np.maximum(x1, x2), np.maximum(y1, y2)], axis=-1
    )


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two [x_min, y_min, x_max, y_max] boxes (0 when they only
    touch or are apart: both runtimes test the overlap before dividing)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union)


def _positive_ious(corners: np.ndarray) -> list[float]:
    """The IoUs > 0 of every two boxes of the same batch (classes share the boxes)."""
    out = []
    for batch in corners:
        for i in range(len(batch)):
            out.extend(v for j in range(i) if (v := _iou(batch[i], batch[j])) > 0)
    return out


class Boxes:
    """(batches, n, 4) boxes of positive area, whole-number corners in [0, COORD], in the
    format of ``center`` (corner boxes take either diagonal, either order)."""

    __slots__ = ("center", "max_batches", "max_boxes")

    def __init__(self, center: int, max_dim: int) -> None:
        self.center = center
        self.max_batches, self.max_boxes = min(MAX_BATCHES, max_dim), min(MAX_BOXES, max_dim)

    def __repr__(self) -> str:
        return f"Boxes(center={self.center}, <= {self.max_batches} x {self.max_boxes})"

    def empty(self) -> bool:
        return self.max_boxes < 1

    def draw(self, s: ChoiceStream) -> list:
        batches, n = s.integer(1, self.max_batches), s.integer(1, self.max_boxes)
        out = []
        for _ in range(batches * n):
            x1, y1 = s.integer(0, COORD - 1), s.integer(0, COORD - 1)
            x2, y2 = s.integer(x1 + 1, COORD), s.integer(y1 + 1, COORD)
            if self.center:
                out.append([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1])
                continue
            if s.chance(0.3):  # the other diagonal or order: backends must normalize
                x1, x2 = x2, x1
            if s.chance(0.3):
                y1, y2 = y2, y1
            out.append([y1, x1, y2, x2])
        return np.asarray(out, dtype=np.float64).reshape(batches, n, 4).tolist()

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        if a.ndim != 3 or a.shape[2] != 4 or 0 in a.shape or not np.all(np.isfinite(a)):
            return False
        if np.abs(a).max() > dt.value_range(dt.FLOAT)[1]:
            return False
        c = _corners(a, self.center)
        return bool(np.all(c[..., 2] > c[..., 0]) and np.all(c[..., 3] > c[..., 1]))


class Scores:
    """(batches, classes, n) scores, multiples of SCORE_STEP in [-1, 1] (in (0, 1] when
    ``positive``), distinct within each class of a batch (equal scores leave the selection
    order open)."""

    __slots__ = ("batches", "n", "max_classes", "positive")

    def __init__(self, batches: int, n: int, max_dim: int, positive: bool) -> None:
        self.batches, self.n, self.max_classes = batches, n, min(MAX_CLASSES, max_dim)
        self.positive = positive

    def __repr__(self) -> str:
        sign = ", positive" if self.positive else ""
        return f"Scores({self.batches}, <= {self.max_classes}, {self.n}; distinct per class{sign})"

    def _grid(self) -> list[int]:
        steps = int(round(1 / SCORE_STEP))
        return list(range(1 if self.positive else -steps, steps + 1))

    def empty(self) -> bool:
        return self.max_classes < 1 or self.n > len(self._grid())

    def draw(self, s: ChoiceStream) -> list:
        classes = s.integer(1, self.max_classes)
        rows = []
        for _ in range(self.batches * classes):
            grid = self._grid()
            rows.append([grid.pop(s.index(len(grid))) * SCORE_STEP for _ in range(self.n)])
        return np.asarray(rows).reshape(self.batches, classes, self.n).tolist()

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        if a.ndim != 3 or a.shape[0] != self.batches or a.shape[2] != self.n or a.shape[1] < 1:
            return False
        rows = a.reshape(-1, self.n)
        if self.positive and not np.all(a > 0):
            return False
        return bool(np.all(np.isfinite(a))) and all(len(set(r)) == self.n for r in rows.tolist())


class ScoreThreshold:
    """A threshold halfway between two score grid points, below the highest score (so at
    least one box is selected: no empty output)."""

    __slots__ = ("scores",)

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores

    def __repr__(self) -> str:
        return f"ScoreThreshold(below {self.scores.max()}, off the scores)"

    def _options(self) -> list[float]:
        steps = int(round(1 / SCORE_STEP))
        top = float(self.scores.max())
        return [
            (k + 0.5) * SCORE_STEP for k in range(-steps - 1, steps) if (k + 0.5) * SCORE_STEP < top
        ]

    def empty(self) -> bool:
        return not self._options()

    def draw(self, s: ChoiceStream) -> float:
        opts = self._options()
        return opts[s.index(len(opts))]

    def contains(self, value: Any) -> bool:
        v = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        return v < float(self.scores.max()) and bool(
            np.all(np.abs(self.scores - v) >= SCORE_STEP / 4)
        )


class IouThreshold:
    """A threshold in [0, 0.95] at least IOU_MARGIN away from every positive IoU (0 is always
    allowed: a positive IoU exceeds it whatever the rounding, and boxes apart give exactly 0)."""

    __slots__ = ("ious",)

    def __init__(self, ious: list[float]) -> None:
        self.ious = ious

    def __repr__(self) -> str:
        return f"IouThreshold(off {len(self.ious)} IoUs)"

    def _far(self, t: float) -> bool:
        return t == 0.0 or all(abs(t - v) >= IOU_MARGIN for v in self.ious)

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> float:
        opts = [t for t in IOU_CANDIDATES if self._far(t)]
        return opts[s.index(len(opts))]

    def contains(self, value: Any) -> bool:
        v = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        return 0.0 <= v <= 1.0 and self._far(v)


class ScalarForm:
    """A value of ``domain`` as a 0-D tensor or a 1-element 1-D one: NonMaxSuppression's
    schema calls its limits scalars, exporters write [v]; backends must take both."""

    __slots__ = ("domain",)

    def __init__(self, domain: Any) -> None:
        self.domain = domain

    def __repr__(self) -> str:
        return f"ScalarForm({self.domain!r})"

    def empty(self) -> bool:
        return bool(self.domain.empty())

    def draw(self, s: ChoiceStream) -> Any:
        v = self.domain.draw(s)
        # 0-D one time in five: the reference evaluator fails on it (REFERENCE_LIMITS), so
        # most draws keep its vote
        return v if s.chance(0.2) else [v]

    def contains(self, value: Any) -> bool:
        a = np.asarray(value)
        return a.ndim <= 1 and a.size == 1 and bool(self.domain.contains(a.reshape(-1)[0].item()))


def _nms(
    corners: np.ndarray, scores: np.ndarray, keep: int, iou: float, score: float | None
) -> list[tuple[int, int, int]]:
    """The selected (batch, class, box) triples, in the op's order: batch, class, then
    descending score."""
    out = []
    for bi in range(scores.shape[0]):
        for ci in range(scores.shape[1]):
            row = scores[bi, ci]
            order = [int(i) for i in np.argsort(-row, kind="stable")]
            if score is not None:
                order = [i for i in order if row[i] > score]
            chosen: list[int] = []
            for i in order:
                if len(chosen) == keep:
                    break
                if all(_iou(corners[bi, i], corners[bi, j]) <= iou for j in chosen):
                    chosen.append(i)
            out.extend((bi, ci, i) for i in chosen)
    return out


@op("NonMaxSuppression")
def non_max_suppression(b: SpecBuilder, p: None) -> None:
    # selected_indices (num_selected, 3) holds [batch, class, box] of the boxes kept per batch
    # and class: candidates by descending score (above score_threshold, when given), each kept
    # unless its IoU with a box kept before exceeds iou_threshold (absent: 0), at most
    # max_output_boxes_per_class of them. max_output_boxes_per_class is always given: absent,
    # it is 0 and the output empty.
    has_iou = b.optional("iou_threshold", p=0.8)  # absent: the reference fails (as 0-D)
    has_score = b.optional("score_threshold")
    # The format comes first: the constant boxes are written in it.
    center = b.attr("center_point_box", OneOf([0, 1]), 0)
    boxes = np.asarray(b.draw("boxes", Boxes(center, b.max_dim)), dtype=np.float32)
    b.const("boxes", boxes, dtype=dt.FLOAT)
    batches, n = boxes.shape[:2]
    # ONNX states no default for an absent score_threshold: ONNX Runtime and the reference
    # filter nothing, TVM's importer and onnx2torch filter scores <= 0. Positive scores then
    # agree under both readings.
    domain = Scores(batches, n, b.max_dim, positive=not has_score)
    scores = np.asarray(b.draw("scores", domain), dtype=np.float32)
    b.const("scores", scores, dtype=dt.FLOAT)
    keep_v = b.draw("max_output_boxes_per_class", ScalarForm(Ints(1, n + 2)))
    b.const("max_output_boxes_per_class", keep_v)
    keep = int(np.asarray(keep_v).reshape(-1)[0])
    corners = _corners(boxes, center)
    iou = 0.0
    if has_iou:
        iou_v = b.draw("iou_threshold", ScalarForm(IouThreshold(_positive_ious(corners))))
        b.const("iou_threshold", np.asarray(iou_v, dtype=np.float32), dtype=dt.FLOAT)
        iou = float(np.asarray(iou_v).reshape(-1)[0])
    score = None
    if has_score:
        score_v = b.draw("score_threshold", ScalarForm(ScoreThreshold(scores.astype(np.float64))))
        b.const("score_threshold", np.asarray(score_v, dtype=np.float32), dtype=dt.FLOAT)
        score = float(np.asarray(score_v).reshape(-1)[0])
    selected = _nms(corners, scores.astype(np.float64), keep, iou, score)
    top = max(batches, scores.shape[1], n) - 1
    b.output([len(selected), 3], interval=Interval(0, top))
