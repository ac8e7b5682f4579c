"""The reference's work, shared by the candidates of one problem.

A group of G candidates for one problem is judged against the same reference, seed and device:
the reference model, the inputs each trial draws and the outputs the reference gives for them
are the same for every candidate. The store keeps them in the trusted process between
evaluations, so the reference is loaded and run once per (program, seed, precision, input
placement) on this worker instead of once per candidate.

What the candidate's process sees does not change: it still gets its own copy of the inputs in
buffers allocated for it alone (harness._share copies), and the kept inputs, expected outputs
and model stay in this process's memory, out of its reach. Kept inputs are pristine: the
reference runs on a clone, the candidate on a copy.

The store holds at most `budget_bytes` of tensors (inputs and expected outputs); past it the
entries used least recently go first. A budget of 0 turns it off."""

import hashlib

import torch


def _tensor_bytes(values):
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += _tensor_bytes(v)
    return total


def reference_key(source, seed, precision, inputs_on, init_on="host"):
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return "%s|seed=%d|%s|%s|init=%s" % (digest, seed, precision, inputs_on, init_on)


class ReferenceEntry:
    """One reference program under one seed: its module, model, init inputs, and each trial
    seed's (pristine inputs, expected outputs, is_seq)."""

    def __init__(self, key, mod, model, init_inputs, inputs_on_device):
        self.key = key
        self.mod = mod
        self.model = model
        self.init_inputs = init_inputs
        self.inputs_on_device = inputs_on_device
        self.results = {}
        # the model's weights count too: one kept per problem would add up over a run
        state = model.state_dict().values() if hasattr(model, "state_dict") else []
        self.bytes = _tensor_bytes(list(state)) + _tensor_bytes(list(init_inputs or []))

    def result(self, seed):
        return self.results.get(seed)


class ReferenceStore:
    def __init__(self):
        self.budget_bytes = 0
        self._entries = {}   # key -> ReferenceEntry, least recently used first
        self.hits = 0        # trial results served from the store

    def configure(self, budget_bytes):
        self.budget_bytes = max(0, int(budget_bytes))
        self._evict(keep=None)

    def enabled(self):
        return self.budget_bytes > 0

    def get(self, key):
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._entries[key] = entry  # most recently used
        return entry

    def put(self, entry):
        """Keeps the entry when its model fits the budget (after evicting older entries)."""
        self._entries.pop(entry.key, None)
        if entry.bytes > self.budget_bytes:
            return False
        self._entries[entry.key] = entry
        self._evict(keep=entry.key)
        return entry.key in self._entries

    def add_result(self, entry, seed, result):
        """Keeps a trial's result when it fits the budget (after evicting older entries)."""
        if entry.key not in self._entries:
            return
        size = _tensor_bytes(result[0]) + _tensor_bytes(result[1])
        if size > self.budget_bytes:
            return
        entry.results[seed] = result
        entry.bytes += size
        self._evict(keep=entry.key)

    def drop(self, key):
        self._entries.pop(key, None)

    def module_names(self):
        return {e.mod.__name__ for e in self._entries.values()}

    def total_bytes(self):
        return sum(e.bytes for e in self._entries.values())

    def _evict(self, keep):
        while self._entries and self.total_bytes() > self.budget_bytes:
            oldest = next(iter(self._entries))
            if oldest == keep:
                entry = self._entries[oldest]
                # the entry being filled is the only one left: drop its oldest results
                if not entry.results:
                    del self._entries[oldest]
                    break
                seed = next(iter(entry.results))
                dropped = entry.results.pop(seed)
                entry.bytes -= _tensor_bytes(dropped[0]) + _tensor_bytes(dropped[1])
                continue
            del self._entries[oldest]
        if self.budget_bytes == 0:
            self._entries.clear()
