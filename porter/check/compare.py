"""Agreement between two sets of logits over live tokens: what verify and run report."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Agreement:
    tokens: int
    labels_agree: int
    max_abs: float
    mean_abs: float

    @property
    def label_rate(self) -> float:
        return self.labels_agree / self.tokens if self.tokens else 1.0

    def merge(self, other: "Agreement") -> "Agreement":
        tokens = self.tokens + other.tokens
        mean = ((self.mean_abs * self.tokens + other.mean_abs * other.tokens) / tokens
                if tokens else 0.0)
        return Agreement(tokens, self.labels_agree + other.labels_agree,
                         max(self.max_abs, other.max_abs), mean)

    def as_dict(self) -> dict:
        return {**asdict(self), "label_rate": self.label_rate}

    def line(self) -> str:
        return (f"labels {self.labels_agree}/{self.tokens} ({100 * self.label_rate:.2f}%), "
                f"max |dlogit| {self.max_abs:.3g}, mean |dlogit| {self.mean_abs:.3g}")


def agreement(ours: np.ndarray, ref: np.ndarray, live: int) -> Agreement:
    """Compare [seq, labels] logits on the first `live` rows (the window's real tokens)."""
    a, b = ours[:live].astype(np.float64), ref[:live].astype(np.float64)
    diff = np.abs(a - b)
    return Agreement(live, int((a.argmax(-1) == b.argmax(-1)).sum()),
                     float(diff.max()) if live else 0.0,
                     float(diff.mean(axis=-1).mean()) if live else 0.0)
