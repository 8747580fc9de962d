"""ICC(3,1) and ICC(3,k) from a two-way ANOVA, written independently of jury/agreement.py to check it."""

from __future__ import annotations

import numpy as np


def anova_icc3(x: np.ndarray) -> tuple[float, float]:
    """ICC(3,1), ICC(3,k) from a two-way ANOVA fitted as a linear model (target and rater dummies) by least
    squares: written independently of the package's formula-based implementation."""
    n, k = x.shape
    y = x.reshape(-1)
    targets = np.repeat(np.eye(n), k, axis=0)
    raters = np.tile(np.eye(k), (n, 1))
    full = np.hstack([targets, raters[:, 1:]])
    fitted_full = full @ np.linalg.lstsq(full, y, rcond=None)[0]
    sse = float(((y - fitted_full) ** 2).sum())
    # SS between targets: reduction in residual from a raters-only model to the full one
    raters_only = np.hstack([np.ones((n * k, 1)), raters[:, 1:]])
    fitted_r = raters_only @ np.linalg.lstsq(raters_only, y, rcond=None)[0]
    ss_targets = float(((y - fitted_r) ** 2).sum()) - sse
    msr = ss_targets / (n - 1)
    mse = sse / ((n - 1) * (k - 1))
    return (msr - mse) / (msr + (k - 1) * mse), (msr - mse) / msr
