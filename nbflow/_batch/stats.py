"""The statistics behind ``nf.summarize`` and ``nf.compare``, in pure Python (numpy only for resampling).

No scipy at run time: the few distributions needed (binomial tails, the regularized incomplete beta for
Clopper–Pearson and Student's t, the exact null distribution of Wilcoxon's signed-rank statistic) are a
page of textbook code, and keeping them here keeps the core install lean. The tests check every function
against scipy (the reference implementation) and against published worked examples.

* Rates: Wilson's score interval (default) or Clopper–Pearson's exact interval; both stay in [0, 1] and
  contain the observed rate, also at 0 % and 100 %.
* Means: a percentile bootstrap (seeded) for n <= 500, the normal interval above.
* Paired differences: the *expanded* percentile bootstrap (Hesterberg 2015: the percentile interval is
  too narrow for small n; widening its levels by ``sqrt(n / (n - 1)) * t / z`` restores the coverage).
* Tests: McNemar's exact test (binomial on the discordant pairs), the sign test, Wilcoxon's signed-rank
  test (exact for n <= 50 without ties or zeros and for n <= 13, else the normal approximation with the
  tie correction: scipy's choices);
  Holm's step-down correction for several comparisons against one baseline.
* ``pass_at_k``: the unbiased estimator of Chen et al. (2021).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

__all__ = [
    "binom_two_sided",
    "clopper_pearson",
    "holm",
    "mcnemar_exact",
    "mean_interval",
    "paired_bootstrap",
    "pass_at_k",
    "sign_test",
    "standard_error",
    "t_ppf",
    "wilcoxon",
    "wilson",
]

_BOOTSTRAP_MAX_N = 500  # above this the mean is normal enough (CLT), and resampling costs O(2,000 x n)


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


# --- rates -------------------------------------------------------------------------------------
def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of ``k`` successes in ``n``: in [0, 1], containing k/n (exact ends at 0 and n)."""
    if n <= 0:
        return math.nan, math.nan
    z = _z(level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # (at k = 0 the lower end is 0 exactly; computed, it can land a rounding error above the rate)
    low = 0.0 if k == 0 else min(p, max(0.0, centre - half))
    high = 1.0 if k == n else max(p, min(1.0, centre + half))
    return low, high


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson's exact interval: the beta quantiles of k/n (conservative: covers at least ``level``)."""
    if n <= 0:
        return math.nan, math.nan
    alpha = 1 - level
    low = 0.0 if k == 0 else _beta_ppf(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else _beta_ppf(1 - alpha / 2, k + 1, n - k)
    return min(low, k / n), max(high, k / n)


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def _beta_ppf(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b), by bisection (60 halvings: below 1e-17)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_ppf(q: float, df: float) -> float:
    """The q-quantile of Student's t with ``df`` degrees of freedom."""
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1 - q, df)
    # P(T > t) = I_{df/(df+t^2)}(df/2, 1/2) / 2: bisect on t
    lo, hi = 0.0, 1.0
    while betainc(df / 2, 0.5, df / (df + hi * hi)) / 2 > 1 - q:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if betainc(df / 2, 0.5, df / (df + mid * mid)) / 2 > 1 - q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- means -------------------------------------------------------------------------------------
def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean: the sample deviation (n - 1) over sqrt(n); NaN below two values."""
    n = len(values)
    if n < 2:
        return math.nan
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1) / n)


def mean_interval(values: Sequence[float], level: float = 0.95, resamples: int = 2000) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean (seed 0: reproducible); the normal interval above 500 values."""
    n = len(values)
    if not n:
        return math.nan, math.nan
    if n == 1:
        return values[0], values[0]
    import numpy as np

    data = np.asarray(values, dtype="float64")
    mean = float(data.mean())
    if n > _BOOTSTRAP_MAX_N:
        from statistics import fmean

        # (numpy's deviation: statistics.stdev computes it exactly with fractions, ~0.6 µs a value)
        sd = float(np.std(data, ddof=1))
        mean, half = fmean(values), _z(level) * sd / math.sqrt(n)
        return mean - half, mean + half
    rng = np.random.default_rng(0)
    means = data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return min(float(low), mean), max(float(high), mean)


def paired_bootstrap(
    diffs: Sequence[float], level: float = 0.95, *, resamples: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """An interval of the mean of paired differences: cases resampled with replacement (``seed``: reproducible).

    The expanded percentile interval (Hesterberg 2015, "What teachers should know about the bootstrap",
    §6.4): the plain percentile interval is as narrow as a z-interval with the n-divisor deviation, so it
    under-covers for small n; its tail levels are taken at ``Φ(sqrt(n / (n - 1)) * t_{n-1})`` instead.
    """
    n = len(diffs)
    if not n:
        return math.nan, math.nan
    mean = math.fsum(diffs) / n
    if n == 1:
        return mean, mean
    import numpy as np

    data = np.asarray(diffs, dtype="float64")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, 2_000_000 // n)  # resample in blocks: memory stays bounded for large n
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        means[start:stop] = data[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = NormalDist().cdf(-math.sqrt(n / (n - 1)) * t_ppf(0.5 + level / 2, n - 1))
    low, high = np.quantile(means, [tail, 1 - tail])
    return min(float(low), mean), max(float(high), mean)


# --- tests -------------------------------------------------------------------------------------
def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exact in integers."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2**n


def binom_two_sided(k: int, n: int) -> float:
    """The two-sided exact binomial p-value of ``k`` successes in ``n`` trials under p = 1/2."""
    if n == 0:
        return 1.0
    return min(1.0, 2 * _binom_cdf(min(k, n - k), n))


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact test of a paired 2×2 table with discordant counts ``b`` and ``c``: two-sided p-value."""
    return binom_two_sided(b, b + c)


def sign_test(positive: int, negative: int) -> float:
    """The sign test of paired differences (zeros dropped): two-sided p-value."""
    return binom_two_sided(positive, positive + negative)


def wilcoxon(diffs: Sequence[float]) -> tuple[float, float]:
    """Wilcoxon's signed-rank test of paired differences: (statistic, two-sided p-value).

    As ``scipy.stats.wilcoxon(d)`` does by default: zero differences dropped; the statistic is the smaller
    of the positive and negative rank sums; the p-value from the exact distribution of the rank sum over
    the 2^n sign patterns when n <= 50 without ties or zeros, or n <= 13, else the normal approximation with
    the tie correction (no continuity correction).
    """
    nonzero = [d for d in diffs if d != 0]
    n = len(nonzero)
    if n == 0:
        return 0.0, 1.0
    ranks = _ranks([abs(d) for d in nonzero])
    r_plus = math.fsum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    r_minus = math.fsum(r for r, d in zip(ranks, nonzero, strict=True) if d < 0)
    stat = min(r_plus, r_minus)
    ties = len(set(ranks)) < n
    if (len(diffs) <= 50 and not ties and n == len(diffs)) or len(diffs) <= 13:
        counts = _rank_sum_counts([round(2 * r) for r in ranks])  # (ranks are halves at most: doubled, integers)
        total = 2**n
        observed = round(2 * r_plus)
        below = sum(counts[: observed + 1]) / total
        above = sum(counts[observed:]) / total
        return stat, min(1.0, 2 * min(below, above))
    mean = n * (n + 1) / 4
    seen: dict[float, int] = {}
    for r in ranks:
        seen[r] = seen.get(r, 0) + 1
    tie_term = sum(t**3 - t for t in seen.values())
    var = n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48
    if var <= 0:
        return stat, 1.0
    z = (stat - mean) / math.sqrt(var)
    return stat, min(1.0, 2 * NormalDist().cdf(-abs(z)))


def _ranks(values: list[float]) -> list[float]:
    """Ranks 1..n, ties given their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for m in range(i, j + 1):
            ranks[order[m]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _rank_sum_counts(weights: list[int]) -> list[int]:
    """How many of the 2^n sign patterns give each sum 0..sum(weights) of the positive ``weights``."""
    counts = [1] + [0] * sum(weights)
    top = 0
    for w in weights:
        top += w
        for s in range(top, w - 1, -1):
            counts[s] += counts[s - w]
    return counts


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control for several comparisons)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` passed: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    # (the product form of Chen et al. 2021: no huge binomials)
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1 - k / i
    return 1.0 - product


# --- repeats: one value per case ------------------------------------------------------------------
REDUCERS = ("mean", "majority", "max", "pass@k")


def reduce_repeats(values: Sequence[float], how: str) -> float:
    """One value for a case's repeated samples: ``mean``, ``majority`` (the most common value; a tie goes to the
    lowest: a split vote does not pass), ``max``, or ``pass@<k>`` (values 0/1: the unbiased pass@k estimate)."""
    if not values:
        return math.nan
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "max":
        return max(values)
    if how == "majority":
        counts: dict[float, int] = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        top = max(counts.values())
        return min(v for v, c in counts.items() if c == top)
    k = int(how.removeprefix("pass@"))
    return pass_at_k(len(values), sum(1 for v in values if v == 1), k)
