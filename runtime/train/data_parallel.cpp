#include "runtime/train/data_parallel.hpp"

#include "messages/error_codes.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h> // at::NoGradGuard: not pulled in by ATen.h in libtorch 2.x
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <thread>

namespace kbrl::train {

namespace {

int64_t length_of(const training_sample& s) {
  return static_cast<int64_t>(s.prompt_tokens.size() + s.completion_tokens.size());
}

/// The columns of the per-step summary table (one row per replica).
enum summary_column : int64_t {
  col_failed,
  col_error_code,
  col_loss,
  col_policy_loss,
  col_kl,
  col_clip_fraction,
  col_mean_ratio,
  col_max_ratio,
  col_sequences,
  col_completion_tokens,
  col_tokens,
  col_padded_tokens,
  col_micro_batches,
  col_checksum,
  summary_columns
};

/// An exact, order-independent fingerprint of the parameters: the sum of up to 2^16 of their
/// 32-bit words, evenly strided, as integers (< 2^47: exact in a double). Replicas that hold
/// bit-identical parameters have equal checksums on any device and thread count.
double parameter_checksum(const at::Tensor& values) {
  at::NoGradGuard no_grad;
  const auto words = values.detach().reshape({-1}).view(at::kInt);
  const int64_t n = words.numel();
  const int64_t stride = std::max<int64_t>(1, (n + 65535) / 65536);
  return static_cast<double>(words.slice(0, 0, n, stride).to(at::kLong).sum().item<int64_t>());
}

step_stats row_stats(const at::Tensor& row) {
  auto v = [&](summary_column c) { return row[c].item<double>(); };
  auto n = [&](summary_column c) { return static_cast<int64_t>(v(c)); };
  step_stats s;
  s.loss = v(col_loss);
  s.policy_loss = v(col_policy_loss);
  s.kl = v(col_kl);
  s.clip_fraction = v(col_clip_fraction);
  s.mean_ratio = v(col_mean_ratio);
  s.max_ratio = v(col_max_ratio);
  s.sequences = n(col_sequences);
  s.completion_tokens = n(col_completion_tokens);
  s.tokens = n(col_tokens);
  s.padded_tokens = n(col_padded_tokens);
  s.micro_batches = n(col_micro_batches);
  return s;
}

} // namespace

std::vector<std::vector<std::size_t>> shard_by_tokens(const std::vector<training_sample>& samples,
                                                      int ranks) {
  const auto r = static_cast<std::size_t>(std::max(ranks, 1));
  std::vector<std::size_t> order(samples.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return length_of(samples[a]) > length_of(samples[b]);
  });
  std::vector<std::vector<std::size_t>> shards(r);
  std::vector<int64_t> load(r, 0);
  for (auto i : order) {
    const auto least = static_cast<std::size_t>(
      std::min_element(load.begin(), load.end()) - load.begin()); // first minimum: lowest rank
    shards[least].push_back(i);
    load[least] += length_of(samples[i]);
  }
  for (auto& s : shards)
    std::sort(s.begin(), s.end());
  return shards;
}

step_stats merge_shard_stats(const std::vector<step_stats>& shards) {
  step_stats m;
  for (const auto& s : shards) {
    m.loss += s.loss;
    m.policy_loss += s.policy_loss;
    m.kl += s.kl;
    m.clip_fraction += s.clip_fraction;
    m.mean_ratio += s.mean_ratio;
    m.max_ratio = std::max(m.max_ratio, s.max_ratio);
    m.sequences += s.sequences;
    m.completion_tokens += s.completion_tokens;
    m.tokens += s.tokens;
    m.padded_tokens += s.padded_tokens;
    m.micro_batches += s.micro_batches;
  }
  return m;
}

caf::expected<std::unique_ptr<data_parallel_trainer>>
data_parallel_trainer::create(std::vector<std::unique_ptr<model::transformer>> models,
                              const trainer_options& options, const group_options& group,
                              const model::lora_adapter* initial) {
  if (models.empty())
    return make_error(errc::invalid_argument, "data-parallel trainer: no model replicas");
  for (const auto& m : models)
    if (!m)
      return make_error(errc::invalid_argument, "data-parallel trainer: a model replica is null");
  std::unique_ptr<data_parallel_trainer> dp(new data_parallel_trainer());
  dp->models_ = std::move(models);
  for (auto& m : dp->models_) {
    auto t = lora_trainer::create(*m, options, initial);
    if (!t)
      return t.error();
    dp->trainers_.push_back(std::move(*t));
  }
  const int size = dp->ranks();
  if (size == 1)
    return dp;
  // Every rank joins concurrently: the rendezvous waits for all of them.
  auto store = make_in_process_store();
  std::vector<std::optional<caf::expected<std::unique_ptr<collective_group>>>> joined(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      joined[r] = join_group(store, r, size, dp->models_[r]->options().device, group);
    });
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < size; ++r) {
    if (!*joined[r])
      return joined[r]->error();
    dp->groups_.push_back(std::move(**joined[r]));
  }
  return dp;
}

data_parallel_trainer::~data_parallel_trainer() {
  // The groups go first (their connections), then the trainers detach from the models.
  groups_.clear();
  trainers_.clear();
}

std::string data_parallel_trainer::backend() const {
  return groups_.empty() ? "" : groups_.front()->backend();
}

caf::expected<step_stats>
data_parallel_trainer::rank_step(int rank, const std::vector<training_sample>& samples,
                                 const std::vector<std::size_t>& shard, rank_failure& failure) {
  auto& trainer = *trainers_[rank];
  auto& group = *groups_[rank];
  const auto device = models_[rank]->options().device;
  // This thread's current device (NCCL and new tensors without a device follow it).
  std::optional<c10::DeviceGuard> on_device;
  if (device.is_cuda())
    on_device.emplace(device);
  const double checksum = parameter_checksum(trainer.parameters());
  auto share = trainer.compute_shard_gradients(samples, shard);

  auto table = at::zeros({ranks(), summary_columns}, at::TensorOptions().dtype(at::kDouble));
  auto row = table[rank];
  if (share) {
    const auto& s = *share;
    const std::pair<summary_column, double> cells[] = {
      {col_loss, s.loss},
      {col_policy_loss, s.policy_loss},
      {col_kl, s.kl},
      {col_clip_fraction, s.clip_fraction},
      {col_mean_ratio, s.mean_ratio},
      {col_max_ratio, s.max_ratio},
      {col_sequences, static_cast<double>(s.sequences)},
      {col_completion_tokens, static_cast<double>(s.completion_tokens)},
      {col_tokens, static_cast<double>(s.tokens)},
      {col_padded_tokens, static_cast<double>(s.padded_tokens)},
      {col_micro_batches, static_cast<double>(s.micro_batches)},
    };
    for (const auto& [c, x] : cells)
      row[c] = x;
  } else {
    row[col_failed] = 1.0;
    row[col_error_code] = static_cast<double>(share.error().code());
  }
  row[col_checksum] = checksum;
  table = table.to(device);
  if (auto ok = group.all_reduce_sum(table); !ok) {
    failure = rank_failure::group;
    return ok.error();
  }
  table = table.cpu();

  if (!share) {
    failure = rank_failure::own;
    return share.error();
  }
  for (int r = 0; r < ranks(); ++r)
    if (table[r][col_failed].item<double>() != 0)
      return make_error(static_cast<errc>(table[r][col_error_code].item<double>()),
                        "replica " + std::to_string(r) + " failed its share of the step");
  std::vector<step_stats> rows;
  for (int r = 0; r < ranks(); ++r) {
    if (table[r][col_checksum].item<double>() != checksum) {
      failure = rank_failure::group;
      return make_error(errc::internal,
                        "the replicas' parameters diverged before this step (the checksum of "
                        "replica " + std::to_string(r) + " differs from replica "
                          + std::to_string(rank) + "'s)");
    }
    rows.push_back(row_stats(table[r]));
  }
  auto merged = merge_shard_stats(rows);

  at::Tensor bucket = trainer.gradients(); // a handle on the bucket's storage
  if (auto ok = group.all_reduce_sum(bucket); !ok) {
    failure = rank_failure::group;
    return ok.error();
  }
  // The same summed gradient everywhere: a failure here (a non-finite norm) happens on every
  // replica alike and leaves them all unchanged.
  auto done = trainer.apply_gradients(merged);
  if (!done)
    failure = rank_failure::own;
  return done;
}

caf::expected<step_stats> data_parallel_trainer::step(const std::vector<training_sample>& samples) {
  if (ranks() == 1)
    return primary().step(samples);
  if (broken_)
    return make_error(errc::internal,
                      "data-parallel step refused: the replica group failed earlier ("
                        + error_text(broken_) + "); restart the learner");
  if (samples.empty())
    return make_error(errc::invalid_argument, "trainer: empty batch");
  const auto start = std::chrono::steady_clock::now();
  const auto shards = shard_by_tokens(samples, ranks());
  struct outcome {
    std::optional<caf::expected<step_stats>> result;
    rank_failure failure = rank_failure::none;
  };
  std::vector<outcome> outcomes(ranks());
  auto run_rank = [&](int r) {
    auto& o = outcomes[r];
    try {
      o.result = rank_step(r, samples, shards[r], o.failure);
    } catch (const std::exception& e) {
      o.failure = rank_failure::group;
      o.result = make_error(errc::internal, e.what());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks(); ++r)
    threads.emplace_back(run_rank, r);
  run_rank(0);
  for (auto& t : threads)
    t.join();

  // The error to answer: the group's if it failed (it is then unusable), else the first
  // replica's own; the others only relay that it failed.
  auto answer = [&](int r) {
    const auto& e = outcomes[r].result->error();
    return make_error(static_cast<errc>(e.code()),
                      "data-parallel step: replica " + std::to_string(r) + " ("
                        + models_[r]->options().device.str() + "): " + error_text(e));
  };
  for (auto kind : {rank_failure::group, rank_failure::own})
    for (int r = 0; r < ranks(); ++r)
      if (outcomes[r].failure == kind) {
        auto e = answer(r);
        if (kind == rank_failure::group)
          broken_ = e;
        return e;
      }
  for (int r = 0; r < ranks(); ++r)
    if (!*outcomes[r].result)
      return answer(r);
  auto stats = std::move(**outcomes[0].result);
  stats.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

caf::expected<void> data_parallel_trainer::sync_replicas() {
  const auto state = primary().state();
  for (int r = 1; r < ranks(); ++r)
    if (auto ok = trainers_[r]->restore(state); !ok)
      return ok.error();
  return {};
}

} // namespace kbrl::train
