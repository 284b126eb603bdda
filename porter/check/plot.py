"""The |dlogit| histogram `porter verify` draws beside its report."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from porter.fsutil import write_atomic


def write_plot(path: Path, runs: list) -> None:
    """Histogram of |dlogit| per golden on log-spaced bins; exact zeros are counted in the legend
    (a log axis has no place for them, and for a bit-exact port they are the whole story).

    Each run (an encoder's or a decoder's) has .name, .gated and .abs_diffs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    nonzero = [run.abs_diffs[run.abs_diffs > 0] for run in runs]
    finite = np.concatenate([d[np.isfinite(d)] for d in nonzero])
    if finite.size:
        low, high = np.floor(np.log10(finite.min())), np.ceil(np.log10(finite.max()))
        bins = np.logspace(low, max(high, low + 1), 61)
        for run, diffs in zip(runs, nonzero):
            label = (f"{run.name}{'' if run.gated else ' (informative)'}: "
                     f"{run.abs_diffs.size - diffs.size} of {run.abs_diffs.size} exactly 0")
            ax.hist(np.clip(diffs, bins[0], bins[-1]), bins=bins, histtype="step", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize="small", loc="upper left")
    else:
        ax.text(0.5, 0.5, "every compared logit is identical: |dlogit| = 0",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("|dlogit| over live tokens, all labels")
    ax.set_ylabel("logits")
    ax.set_title("porter verify: eval module vs golden logits")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, png.getvalue())
