"""matplotlib for the commands' figures: the Agg backend, a colour per series, labels that never overlap.

The one place that picks the backend (the commands run on servers and in CI); every module that
draws imports ``plt`` from here.

    >>> from fastcore_ops.training.figures import plt
    >>> plt.get_backend().lower()
    'agg'
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

__all__ = ["plt", "save_figure", "series_colors", "label_points", "overlapping_labels"]

# Offsets (in points) tried for a label, nearest first: right, left, above, below, then the diagonals,
# at growing distances; past the first ring a thin line ties the label to its point.
_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))
_OFFSETS = tuple((dx * distance, dy * distance) for distance in (5, 14, 26, 40, 56, 74) for dx, dy in _DIRECTIONS)
_MARKER_HALF_WIDTH_PX = 4.0


def series_colors(count: int) -> list[tuple[float, float, float]]:
    """``count`` distinct colours, all dark enough for text on white: tab10, then Dark2 and Set1, then a colour wheel.

    Example:
        >>> len(set(series_colors(18)))
        18
    """
    palette = list(dict.fromkeys(tuple(color[:3]) for name in ("tab10", "Dark2", "Set1")
                                 for color in plt.get_cmap(name).colors if _dark_and_not_grey(color[:3])))
    if count <= len(palette):
        return palette[:count]
    wheel = plt.get_cmap("hsv")
    return [tuple(0.8 * channel for channel in wheel(index / count)[:3]) for index in range(count)]


def save_figure(figure, path, *, dpi: int = 120, tight: bool = False) -> None:
    """Write ``figure`` to the PNG file ``path`` and close it; ``tight`` takes in what sits outside the axes.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> figure, _ = plt.subplots()
        >>> save_figure(figure, Path(tempfile.mkdtemp()) / "empty.png")
        >>> plt.fignum_exists(figure.number)
        False
    """
    try:
        figure.savefig(path, dpi=dpi, bbox_inches="tight" if tight else None)
    finally:
        plt.close(figure)


def _dark_and_not_grey(rgb) -> bool:
    """Whether a palette colour reads as text on white (not pale) and is no second grey after tab10's."""
    return sum(rgb) < 2.4 and (max(rgb) - min(rgb) > 0.1 or rgb == plt.get_cmap("tab10").colors[7])


def label_points(axes, points: Sequence[tuple[float, float]], labels: Sequence[str], *, fontsize: float = 8,
                 colors: Sequence | None = None) -> list[Text]:
    """Write each label beside its point (data coordinates), where it covers no other label, point, error bar or
    legend (or, where no place is free, the least); a label set farther off is tied to its point by a thin line.

    Call it last, once the axes' limits and the figure's layout are final: labels are placed in
    display space. matplotlib has no placement of its own, and the adjustText package moves labels
    by iterating forces; a greedy pass over a few candidate offsets is enough for tens of points.

    Example:
        >>> figure, axes = plt.subplots()
        >>> _ = axes.plot([0, 1], [0, 0], "o")
        >>> [text.get_text() for text in label_points(axes, [(0, 0), (1, 0)], ["a", "b"])]
        ['a', 'b']
        >>> overlapping_labels(figure)
        []
        >>> plt.close(figure)
    """
    figure = axes.figure
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    taken = [_marker_box(x, y) for x, y in (axes.transData.transform(points) if len(points) else [])]
    taken += [_text_box(text, renderer) for text in _drawn_texts(figure)] + _segment_boxes(axes)
    if axes.get_legend() is not None:
        taken.append(axes.get_legend().get_window_extent(renderer))
    area = axes.get_window_extent(renderer)
    placed = []
    for index, (point, label) in enumerate(zip(points, labels)):
        style = {"fontsize": fontsize, "color": "black" if colors is None else colors[index]}
        best = None  # (what the place covers, offset): the first free place, else the least covered one
        for offset in _OFFSETS:
            text = _annotate(axes, label, point, offset, style)
            box = _text_box(text, renderer)
            text.remove()
            covered = sum(box.overlaps(other) for other in taken) + (0 if _inside(box, area) else len(taken) + 1)
            if best is None or covered < best[0]:
                best = (covered, offset)
            if covered == 0:
                break
        text = _annotate(axes, label, point, best[1], style)
        box = _text_box(text, renderer)
        taken.append(box)
        placed.append(text)
    return placed


def _annotate(axes, label: str, point, offset: tuple[float, float], style: dict) -> Text:
    dx, dy = offset
    leader = {"arrowstyle": "-", "linewidth": 0.5, "color": style["color"], "shrinkA": 0, "shrinkB": 3}
    return axes.annotate(label, point, xytext=offset, textcoords="offset points",
                         ha="left" if dx > 0 else "right" if dx < 0 else "center",
                         va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                         arrowprops=leader if max(abs(dx), abs(dy)) > _OFFSETS[0][0] else None, **style)


def _marker_box(x: float, y: float) -> Bbox:
    half = _MARKER_HALF_WIDTH_PX
    return Bbox.from_bounds(x - half, y - half, 2 * half, 2 * half)


def _segment_boxes(axes) -> list[Bbox]:
    """Boxes around every drawn segment of the axes' data lines and line collections (curves, error bars), in
    display space; lines across the whole axes (grids, axhline) are left out, as labels may cross them."""
    segments = []
    for collection in axes.collections:
        segments += [axes.transData.transform(segment) for segment in getattr(collection, "get_segments", list)()]
    for line in axes.lines:
        if line.get_transform() == axes.transData and line.get_linestyle() not in ("None", "none", ""):
            segments.append(line.get_transform().transform(line.get_path().vertices))
    boxes = []
    for points in segments:
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:]):
            boxes.append(Bbox.from_extents(min(x0, x1) - 1, min(y0, y1) - 1, max(x0, x1) + 1, max(y0, y1) + 1))
    return boxes


def overlapping_labels(figure) -> list[tuple[str, str]]:
    """Every pair of texts drawn on ``figure`` (labels, tick labels, titles, legend entries) whose boxes overlap.

    Example:
        >>> figure, axes = plt.subplots()
        >>> _ = axes.text(0.5, 0.5, "one"), axes.text(0.5, 0.5, "two")
        >>> overlapping_labels(figure)
        [('one', 'two')]
        >>> plt.close(figure)
    """
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [(text.get_text(), _shrunk(_text_box(text, renderer))) for text in _drawn_texts(figure)]
    return [(first, second) for index, (first, box) in enumerate(boxes) for second, other in boxes[index + 1:]
            if box.overlaps(other)]


def _drawn_texts(figure) -> list[Text]:
    """The texts a draw of ``figure`` shows: tick labels only of the ticks inside each axis's view."""
    tick_labels, drawn = set(), []
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_labels.update((tick.label1, tick.label2))
            # Axis._update_ticks is the one place matplotlib decides which ticks it draws.
            for tick in axis._update_ticks():
                drawn += [label for label in (tick.label1, tick.label2) if label.get_visible()]
    drawn += [text for text in figure.findobj(Text) if text not in tick_labels and text.get_visible()]
    return [text for text in drawn if text.get_text().strip()]


def _text_box(text: Text, renderer) -> Bbox:
    """The box of the text itself: an annotation's own extent also takes in its leader line."""
    if isinstance(text, Annotation):
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def _inside(box: Bbox, area: Bbox) -> bool:
    return area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1


def _shrunk(box: Bbox, pixels: float = 1.0) -> Bbox:
    """``box`` less a pixel on each side: texts that merely touch do not count as overlapping."""
    return Bbox.from_extents(box.x0 + pixels, box.y0 + pixels, box.x1 - pixels, box.y1 - pixels)
