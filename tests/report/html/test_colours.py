"""The HTML report's colours (pytest_medhelm.report.html.colours)."""

from __future__ import annotations

from pytest_medhelm.report.html.colours import viridis


def test_viridis_runs_dark_to_light():
    assert viridis(0) == "#440154" and viridis(1) == "#fde725" and viridis(2) == "#fde725"

    def luminance(colour: str) -> float:
        r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    values = [luminance(viridis(t / 20)) for t in range(21)]
    assert values == sorted(values)  # monotonic: reads in greyscale too
