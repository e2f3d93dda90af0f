"""Counters, histograms and gauges kept as plain numbers, exposed through prometheus_client's
custom-collector interface when scraped.

prometheus_client's own Counter and Histogram take a lock and run several Python calls per update
(`_raise_if_not_observable`, `MutexValue.inc` per bucket and sum): about 70k instructions per chat
request for the eight updates a request makes (bench/README.md). Here an update is a dict lookup
and an addition; the families are built only when `/metrics` is read. The exposition is the same
as the library's: `_total` and `_created` for a counter, cumulative `_bucket`s with `+Inf`, `_count`,
`_sum` and `_created` for a histogram, a gauge's value, and an unlabelled metric is shown before
its first update.

prometheus_client itself (1.4 MiB of a gateway's idle memory, with the wsgiref and http.server
modules its exposition imports) is imported only when a registry is first built or a family
collected: at the first scrape, never on a gateway nobody scrapes.

Updated from the event loop's thread only (the front door, the agent's observer): no lock.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

Labels = tuple[str, ...]


class LoopCounter:
    """A counter by label values: `inc(labels, amount)`, labels a tuple in `labelnames`' order."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.values: dict[Labels, float] = {}
        self._created: dict[Labels, float] = {}
        if not self.labelnames:  # shown at 0 from the start, as the library's unlabelled counter
            self.values[()] = 0.0
            self._created[()] = time.time()

    def inc(self, labels: Labels = (), amount: float = 1) -> None:
        values = self.values
        value = values.get(labels)
        if value is None:
            self._created[labels] = time.time()
            value = 0.0
        values[labels] = value + amount

    def describe(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily

        yield CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value, created=self._created[labels])
        yield family


class LoopHistogram:
    """A histogram by label values: `observe(labels, value)`; a value lands in the first bucket
    whose bound is >= it (the library's `le`), the last being +Inf."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float],
                 labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = tuple(float(bound) for bound in buckets)
        # per label values: [count in each bucket (not cumulative) ..., +Inf bucket, sum]
        self.counts: dict[Labels, list[float]] = {}
        self._created: dict[Labels, float] = {}
        if not self.labelnames:
            self._child(())

    def _child(self, labels: Labels) -> list[float]:
        counts = self.counts[labels] = [0.0] * (len(self.bounds) + 2)
        self._created[labels] = time.time()
        return counts

    def observe(self, labels: Labels, value: float) -> None:
        counts = self.counts.get(labels)
        if counts is None:
            counts = self._child(labels)
        counts[bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def describe(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import HistogramMetricFamily

        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        bucket_names = [floatToGoString(bound) for bound in self.bounds] + ["+Inf"]
        for labels, counts in list(self.counts.items()):
            cumulative = 0.0
            buckets = []
            for le, count in zip(bucket_names, counts, strict=False):  # counts ends with the sum
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(labels, buckets, counts[-1])
            family.add_sample(self.name + "_created", dict(zip(self.labelnames, labels, strict=True)),
                              self._created[labels])
        yield family


class LoopGauge:
    """A gauge: read from `read()` when scraped (a count something else already keeps), or, with
    label names, the values `set(labels, value)` left (`clear()` forgets them all)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 read: Callable[[], float] | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.read = read
        self.values: dict[Labels, float] = {}

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = value

    def clear(self) -> None:
        self.values.clear()

    def describe(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import GaugeMetricFamily

        yield GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import GaugeMetricFamily

        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        if self.read is not None:
            family.add_metric((), self.read())
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        yield family
