#!/usr/bin/env python3
"""Reads kbrl's TensorBoard event files with TensorBoard itself (where it is installed, e.g. the
GPU machine) and prints every scalar: the check that files written by
runtime/report/tfevents_writer.cpp are read by the real thing, not only by kbrl's test reader.

    build/kbrl-eval --generations test/data/evalcli/generations --kernelbench test/data/problems \
        --backend torch --output /tmp/ev --tensorboard /tmp/ev-tb --step 1200
    python3 test/data/evalcli/read_with_tensorboard.py /tmp/ev-tb

Exit status 0 when at least one scalar was read, 1 otherwise.
"""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(log_dir: str) -> int:
    acc = EventAccumulator(log_dir)
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    for tag in sorted(tags):
        for event in acc.Scalars(tag):
            print(f"{tag}\tstep {event.step}\t{event.value:.6g}")
    print(f"{len(tags)} scalar tags", file=sys.stderr)
    return 0 if tags else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
