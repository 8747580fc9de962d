"""The report's palettes and the contrast arithmetic that picks a readable ink for every heatmap cell."""

from __future__ import annotations

#: matplotlib's viridis at 9 evenly spaced stops (interpolated linearly in between)
VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725")
#: Okabe & Ito's colour-blind safe qualitative palette
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000", "#999999")
#: the Okabe-Ito colours dark enough to take white pattern marks
DARK_OKABE_ITO = frozenset({"#000000", "#0072B2", "#D55E00", "#009E73"})
#: fill patterns, so that bars differ without colour too (print, greyscale)
PATTERNS = ("solid", "diag", "dots", "cross", "horiz", "anti", "vert", "grid")
WHITE, BLACK = "#ffffff", "#000000"


def viridis(t: float) -> str:
    """The viridis colour of ``t`` in [0, 1] (clamped), as ``#rrggbb``."""
    t = min(1.0, max(0.0, t))
    pos = t * (len(VIRIDIS) - 1)
    i = min(int(pos), len(VIRIDIS) - 2)
    frac = pos - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    rgb = [round(int(a[k:k + 2], 16) + (int(b[k:k + 2], 16) - int(a[k:k + 2], 16)) * frac) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(int(colour[k:k + 2], 16)) for k in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21; 4.5 is the minimum for normal text)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def ink_on(background: str) -> str:
    """Text colour on ``background``: white or black, whichever contrasts more (at least 4.58:1 on viridis)."""
    return max((WHITE, BLACK), key=lambda ink: contrast_ratio(ink, background))
