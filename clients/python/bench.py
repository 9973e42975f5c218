"""Applies the recorded level2 events (clients/testdata) through the
client's state machine to a book, decoded beforehand, and prints events/s.
`/usr/bin/python3 bench.py [passes]`; pin to one core with taskset."""

import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from fanoutd.tracker import Tracker  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
with gzip.open(os.path.join(here, "..", "testdata", "coinbase-level2.jsonl.gz"), "rt") as f:
    lines = f.read().strip().split("\n")
events = [json.loads(line) for line in lines]
passes = int(sys.argv[1]) if len(sys.argv) > 1 else 5
stream = events[0]["stream"]


def run(decode):
    tr = Tracker()
    tr.add(stream)
    for x in (lines if decode else events):
        tr.data(json.loads(x) if decode else x)
        tr.outbox.clear()
    return tr.streams[stream].book


run(False)
t = time.perf_counter()
for _ in range(passes):
    b = run(False)
s = time.perf_counter() - t
assert b.state == "valid" or b.reason == "link_down", (b.state, b.reason)
print(f"{len(events) * passes / s:.0f} events/s ({len(events) * passes} events in {s:.3f} s; decode excluded)")
t = time.perf_counter()
for _ in range(passes):
    run(True)
s = time.perf_counter() - t
print(f"{len(events) * passes / s:.0f} events/s with json.loads of each event")
