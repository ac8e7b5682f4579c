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
tensors of [left, right, count] buckets; the HParams and Text plugins' data). It prints every
scalar and histogram step and fails (exit 1) when there is no scalar or no histogram, when a step
appears twice for a tag (a resumed run's redone steps must have been purged by its SessionLog
START), when a learner scalar is missing, or when the run's config is not there as
hyperparameters (HParams dashboard) and as text (Text dashboard).
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

    wanted = ["learner/loss", "learner/kl", "learner/grad_norm", "learner/lr",
              "learner/clip_fraction", "learner/tokens_per_second", "policy/entropy",
              "multiturn/success_rate", "time/total", "progress/done_frac", "reward_terms/correct"]
    missing = [t for t in wanted if t not in scalars]
    if "hist/advantage" not in histograms:
        missing.append("hist/advantage")
    if missing:
        print(f"missing: {missing}", file=sys.stderr)
        ok = False

    from tensorboard.plugins.hparams import plugin_data_pb2
    hparams = pacc.PluginTagToContent("hparams")
    sessions = [plugin_data_pb2.HParamsPluginData.FromString(c).session_start_info
                for c in hparams.values()]
    values = {k: v for s in sessions for k, v in s.hparams.items()}
    print(f"hparams: {len(values)} (learner.lr = {values.get('learner.lr')}, "
          f"run.name = {values.get('run.name')}, group {[s.group_name for s in sessions]})",
          file=sys.stderr)
    if "learner.lr" not in values or "rl.steps" not in values:
        ok = False
    texts = pacc.PluginTagToContent("text")
    config = ""
    if "config" in texts:
        from tensorboard.util import tensor_util
        config = tensor_util.make_ndarray(pacc.Tensors("config")[0].tensor_proto).item().decode()
    print(f"config text: {len(config)} characters, [learner] in it: {'[learner]' in config}",
          file=sys.stderr)
    if "[learner]" not in config:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
