#!/usr/bin/env python3
"""Reads an RL run's TensorBoard folder with TensorBoard itself (where it is installed, e.g. the
GPU machine): the check that the events written by actors/metrics.cpp through
runtime/report/tfevents_writer.cpp (scalars, histograms, the SessionLog START of a resumed run)
are what the real dashboards read, not only kbrl's test reader.

    KBRL_KEEP_RL_RUN=/tmp/rl-run build/kbrl-tests --run_test=rl_process
    python3 test/data/rl/read_with_tensorboard.py /tmp/rl-run/tensorboard

(the test's run: 2 steps, then resumed for a third; any RL run's tensorboard/ folder works).

It reads the folder twice: with the legacy EventAccumulator (scalars, histograms as
HistogramProto) and with the plugin accumulator the dashboards use (histograms migrated to
tensors of [left, right, count] buckets). It prints every scalar and histogram step and fails
(exit 1) when there is no scalar or no histogram, or when a step appears twice for a tag (a
resumed run's redone steps must have been purged by its SessionLog START).
"""
import sys

from tensorboard.backend.event_processing import event_accumulator as legacy
from tensorboard.backend.event_processing import plugin_event_accumulator as plugin


def main(log_dir: str) -> int:
    ok = True
    acc = legacy.EventAccumulator(log_dir, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    scalars, histograms = tags.get("scalars", []), tags.get("histograms", [])
    for tag in sorted(scalars):
        steps = [e.step for e in acc.Scalars(tag)]
        if len(steps) != len(set(steps)):
            print(f"{tag}: a step appears twice: {steps}", file=sys.stderr)
            ok = False
        for e in acc.Scalars(tag):
            print(f"{tag}\tstep {e.step}\t{e.value:.6g}")
    for tag in sorted(histograms):
        for e in acc.Histograms(tag):
            h = e.histogram_value
            print(f"{tag}\tstep {e.step}\tnum {h.num:g} min {h.min:g} max {h.max:g} "
                  f"buckets {len(h.bucket)}")
    print(f"{len(scalars)} scalar tags, {len(histograms)} histogram tags", file=sys.stderr)

    pacc = plugin.EventAccumulator(log_dir, size_guidance={"tensors": 0})
    pacc.Reload()
    migrated = 0
    for tag in pacc.Tags().get("tensors", []):
        for e in pacc.Tensors(tag):
            meta = pacc.SummaryMetadata(tag)
            if meta.plugin_data.plugin_name == "histograms":
                migrated += 1
                from tensorboard.util import tensor_util
                buckets = tensor_util.make_ndarray(e.tensor_proto)
                print(f"{tag}\tstep {e.step}\tdashboard buckets {buckets.tolist()}")
    print(f"{migrated} histogram steps as the dashboard reads them", file=sys.stderr)
    if not scalars or not histograms or migrated == 0:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
