#include "tools/evalcli/eval_scheduler.hpp"

#include "messages/errors.hpp"
#include "runtime/episode/answer_format.hpp"
#include "runtime/eval/answer_parsing.hpp"
#include "runtime/eval/eval_engine.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/report/generations_dir.hpp"
#include "runtime/report/results_json.hpp"
#include "tools/evalcli/cluster_dispatch.hpp"

#include <caf/all.hpp>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace kbrl::evalcli {

namespace {

namespace fs = std::filesystem;

/// The run's state and the steps of its work, shared by the response handlers. Owned by the
/// actor's behaviour and by the handlers still pending; all of it runs in the actor.
class scheduler : public std::enable_shared_from_this<scheduler> {
public:
  scheduler(caf::event_based_actor* self, std::shared_ptr<run_context> ctx,
            std::shared_ptr<lazy_evaluators> evaluators, sampler_actor sampler, caf::actor notify)
    : self_(self), ctx_(std::move(ctx)), evaluators_(std::move(evaluators)),
      sampler_(std::move(sampler)), notify_(std::move(notify)) {
    history_.resize(ctx_->items.size());
    if (!evaluators_->cluster.empty()) {
      // Far beyond what a node's own supervisor allows an evaluation (it answers a hung one
      // itself after timeout_s plus its margin): only a node that stopped answering hits it.
      auto timeout = std::chrono::milliseconds(
        static_cast<int64_t>((2 * ctx_->timing.timeout_s + 120) * 1000));
      cluster_ = std::make_shared<cluster_dispatch>(self_, evaluators_->cluster, timeout);
    }
  }

  /// A down message of the scheduler actor: an evaluator node's supervisor (cluster runs).
  void on_down(const caf::down_msg& msg) {
    if (cluster_)
      cluster_->on_down(msg);
  }

  /// The cluster dispatch's delayed tick.
  void on_tick() {
    if (cluster_)
      cluster_->on_tick();
  }

  void start() {
    if (cluster_)
      cluster_->start();
    for (size_t i = 0; i < ctx_->items.size(); ++i) {
      auto& item = ctx_->items[i];
      if (item.missing) {
        report::sample_record r;
        r.error = report::missing_error;
        r.source = "";
        r.extraction = "";
        file(i, item.turn, std::move(r));
      } else if (item.turns > 1) {
        start_episode(i);
      } else if (item.generate) {
        to_generate_.push_back(i);
      } else {
        auto text = io::read_text_file(item.file);
        report::sample_record base;
        if (!text) {
          base.error = report::missing_error;
          base.error_excerpt = describe(text.error());
          file(i, item.turn, std::move(base));
        } else {
          candidate(i, *text, std::move(base));
        }
      }
    }
    pump();
    if (ctx_->expected == 0)
      finish_if_done();
  }

private:
  // -- filing --------------------------------------------------------------------------------

  void identify(size_t i, int32_t turn, report::sample_record& r) const {
    auto& item = ctx_->items[i];
    auto& p = ctx_->problems[item.problem];
    r.problem = p.id;
    r.level = p.level;
    r.problem_number = p.number;
    r.sample = item.sample;
    r.turn = turn;
    if (r.source.empty() && item.turns <= 1)
      r.source = item.relative;
  }

  /// One record in: counted, printed, given to the ledger.
  void file(size_t i, int32_t turn, report::sample_record r, const char* note = "") {
    if (!ctx_->failure.empty())
      return finish_if_done();
    identify(i, turn, r);
    auto& item = ctx_->items[i];
    ++ctx_->recorded;
    auto turn_text = item.turns > 1 || turn > 0 ? " turn " + std::to_string(turn) : std::string();
    std::string where;
    if (cluster_ && !r.node.empty())
      where = " [" + r.node
              + (r.retries > 0 ? ", sent again " + std::to_string(r.retries) + "x" : "") + "]";
    std::printf("[%zu/%zu] %s sample %d%s: %s%s%s\n", ctx_->recorded, ctx_->expected,
                r.problem.c_str(), item.sample, turn_text.c_str(), verdict_line(r).c_str(),
                where.c_str(), note);
    auto id = r.problem;
    auto done = ctx_->ledger->add(std::move(r));
    if (!done)
      ctx_->failure = describe(done.error());
    else if (*done)
      std::printf("  %s finished\n", id.c_str());
    std::fflush(stdout);
    finish_if_done();
  }

  /// The run cannot go on: nothing more is filed; what is on disk stays for a re-run.
  void stop(const std::string& why) {
    if (ctx_->failure.empty())
      ctx_->failure = why + "\nthe problems finished so far are kept in " + ctx_->output_dir
                      + ": run the same command again to continue";
    finish_if_done();
  }

  void finish_if_done() {
    if (finished_ || (ctx_->recorded < ctx_->expected && ctx_->failure.empty()))
      return;
    finished_ = true;
    self_->send(notify_, done_atom::value);
    sampler_ = nullptr;
    self_->quit();
  }

  // -- evaluating ----------------------------------------------------------------------------

  using verdict_handler = std::function<void(report::sample_record, const eval_result*)>;

  /// Sends `code` to the evaluators; `then` gets the record with the verdict taken in (and the
  /// verdict), or an infrastructure record (and null) when the evaluators failed.
  void evaluate(size_t i, std::string code, report::sample_record base, verdict_handler then) {
    auto& item = ctx_->items[i];
    auto& p = ctx_->problems[item.problem];
    base.candidate_hash = eval::source_hash(code);
    eval_request req;
    req.id = i;
    req.candidate_source = std::move(code);
    req.task = p;
    req.timing = ctx_->timing;
    req.trace = p.id + " sample " + std::to_string(item.sample);
    if (cluster_) {
      auto me = shared_from_this();
      cluster_->submit(std::move(req), [me, then, base](caf::expected<dispatched_verdict> d) mutable {
        if (!d)
          return me->stop(describe(d.error()));
        report::take_verdict(base, d->verdict);
        base.node = d->node;
        if (base.evaluator.empty())
          base.evaluator = d->node;
        base.retries = d->retries;
        then(std::move(base), &d->verdict);
      });
      return;
    }
    self_->request(evaluators_->get(), caf::infinite, evaluate_atom::value, std::move(req))
      .then(
        [then, base](eval_result& v) mutable {
          report::take_verdict(base, v);
          then(std::move(base), &v);
        },
        [then, base, self = self_](caf::error& err) mutable {
          base.error = to_string(eval_error::infrastructure);
          base.error_excerpt = self->system().render(err);
          then(std::move(base), nullptr);
        });
  }

  /// A single-turn candidate's text: take the program out of it and have it evaluated.
  void candidate(size_t i, const std::string& text, report::sample_record base) {
    auto& item = ctx_->items[i];
    std::string code = text;
    base.extraction = "file";
    if (item.is_completion) {
      auto found = eval::extract_kernel_code(text);
      if (!found) {
        base.error = to_string(eval_error::format);
        base.error_excerpt = describe(found.error());
        return file(i, item.turn, std::move(base));
      }
      code = std::move(found->code);
      base.extraction = found->how;
    }
    auto me = shared_from_this();
    evaluate(i, std::move(code), std::move(base),
             [me, i, turn = item.turn](report::sample_record r, const eval_result*) {
               me->file(i, turn, std::move(r));
             });
  }

  // -- drawing -------------------------------------------------------------------------------

  /// Keeps up to generation_limit completions in flight.
  void pump() {
    while (generating_ < ctx_->generation_limit && !to_generate_.empty()) {
      auto i = to_generate_.front();
      to_generate_.pop_front();
      auto& item = ctx_->items[i];
      auto& p = ctx_->problems[item.problem];
      generation_request req;
      if (item.turns > 1) {
        auto made = ctx_->prompts.make_turn(p, item.sample, history_[i], i);
        if (!made) {
          end_episode(i, turn_of(i), report::generation_error, describe(made.error()));
          continue;
        }
        req = std::move(*made);
      } else {
        req = ctx_->prompts.make(p, item.sample, i);
      }
      ++generating_;
      auto me = shared_from_this();
      self_->request(sampler_, caf::infinite, generate_atom::value, std::move(req))
        .then([me, i](generation_result& res) { me->drawn(i, res); },
              [me, i](caf::error& err) {
                generation_result res;
                res.finish = finish_reason::error;
                res.error = describe(err);
                me->drawn(i, res);
              });
    }
  }

  void drawn(size_t i, generation_result& res) {
    --generating_;
    auto& item = ctx_->items[i];
    report::sample_record base;
    base.completion_tokens = static_cast<int32_t>(res.completion_tokens.size());
    base.finish = to_string(res.finish);
    bool episode = item.turns > 1;
    int32_t turn = episode ? turn_of(i) : item.turn;
    std::string path = item.file;
    if (episode) {
      base.source = turn_relative(i, turn);
      path = (fs::path(ctx_->generations_root) / base.source).string();
    }
    if (res.finish == finish_reason::error || res.finish == finish_reason::cancelled) {
      base.error = report::generation_error;
      base.error_excerpt = res.error;
      if (episode)
        end_episode(i, turn, report::generation_error, res.error, std::move(base));
      else
        file(i, turn, std::move(base));
    } else if (auto ok = report::write_file_atomically(path, res.completion_text); !ok) {
      ctx_->failure = describe(ok.error());
      file(i, turn, std::move(base));
    } else if (episode) {
      turn_answer(i, res.completion_text, std::move(base));
    } else {
      candidate(i, res.completion_text, std::move(base));
    }
    pump();
  }

  // -- episodes ------------------------------------------------------------------------------

  int32_t turn_of(size_t i) const { return static_cast<int32_t>(history_[i].size()); }

  std::string turn_relative(size_t i, int32_t turn) const {
    auto& item = ctx_->items[i];
    return report::completion_relative_path(ctx_->problems[item.problem], item.sample, turn,
                                            true);
  }

  /// The turns a continued run found logged go into the history as they were; then on.
  void start_episode(size_t i) {
    auto& item = ctx_->items[i];
    if (i < ctx_->logged.size())
      for (auto& lt : ctx_->logged[i]) {
        if (turn_of(i) >= item.turns)
          break;
        episode::previous_turn prev;
        prev.answer = episode::parse_answer(lt.completion, ctx_->prompts.episode.format);
        prev.completion_text = lt.completion;
        prev.evaluated = lt.evaluated;
        prev.verdict = lt.verdict;
        history_[i].push_back(std::move(prev));
        file(i, lt.turn, lt.record, " (from the turn log)");
      }
    next_turn(i);
  }

  /// The episode's next turn: its completion from disk (drawn by an interrupted run), or drawn.
  void next_turn(size_t i) {
    auto& item = ctx_->items[i];
    auto turn = turn_of(i);
    if (turn >= item.turns || !ctx_->failure.empty())
      return;
    auto relative = turn_relative(i, turn);
    auto path = (fs::path(ctx_->generations_root) / relative).string();
    std::error_code ec;
    if (fs::exists(path, ec)) {
      if (auto text = io::read_text_file(path)) {
        report::sample_record base;
        base.source = relative;
        return turn_answer(i, *text, std::move(base));
      }
    }
    to_generate_.push_back(i);
    pump();
  }

  /// A turn's answer is here: parse it as the episodes do, evaluate the program if there is one.
  void turn_answer(size_t i, const std::string& text, report::sample_record base) {
    auto& format = ctx_->prompts.episode.format;
    episode::previous_turn prev;
    prev.answer = episode::parse_answer(text, format);
    prev.completion_text = text;
    if (!prev.answer.ok()) {
      base.error = to_string(eval_error::format);
      base.error_excerpt = std::string("no program could be read from the answer (")
                           + episode::to_string(prev.answer.failure) + ")";
      return turn_done(i, std::move(base), std::move(prev));
    }
    base.extraction = text.find(format.kernel_open) != std::string::npos ? "kernel_tag"
                                                                         : "python_block";
    auto code = prev.answer.code;
    auto me = shared_from_this();
    auto turn = turn_of(i);
    evaluate(i, std::move(code), std::move(base),
             [me, i, turn, prev](report::sample_record r, const eval_result* v) mutable {
               if (r.error == to_string(eval_error::infrastructure)) {
                 auto error = r.error, why = r.error_excerpt; // r itself is moved below
                 return me->end_episode(i, turn, error, why, std::move(r));
               }
               prev.evaluated = v != nullptr;
               if (v)
                 prev.verdict = *v;
               me->turn_done(i, std::move(r), std::move(prev));
             });
  }

  /// A turn is over: logged (a continued run starts after it), filed, and the next one begins.
  void turn_done(size_t i, report::sample_record r, episode::previous_turn prev) {
    auto turn = turn_of(i);
    identify(i, turn, r);
    logged_turn lt;
    lt.turn = turn;
    lt.completion = prev.completion_text;
    lt.evaluated = prev.evaluated;
    lt.verdict = prev.verdict;
    lt.record = r;
    auto& p = ctx_->problems[ctx_->items[i].problem];
    if (auto ok = append_turn(turn_log_path(ctx_->output_dir, p.id, ctx_->items[i].sample), lt);
        !ok)
      ctx_->failure = describe(ok.error());
    history_[i].push_back(std::move(prev));
    file(i, turn, std::move(r));
    next_turn(i);
  }

  /// A turn failed through kbrl: it and the turns after it are filed with that error (none is
  /// logged, so a continued run starts the episode again at `from`).
  void end_episode(size_t i, int32_t from, const std::string& error, const std::string& why,
                   std::optional<report::sample_record> first = std::nullopt) {
    auto& item = ctx_->items[i];
    for (int32_t t = from; t < item.turns; ++t) {
      report::sample_record r;
      if (t == from && first) {
        r = std::move(*first);
      } else {
        r.error = error;
        r.error_excerpt = t == from ? why
                                    : "not run: turn " + std::to_string(from) + " failed (" + error
                                        + ")";
        r.extraction = "";
      }
      file(i, t, std::move(r));
    }
  }

  caf::event_based_actor* self_;
  std::shared_ptr<run_context> ctx_;
  std::shared_ptr<lazy_evaluators> evaluators_;
  sampler_actor sampler_;
  caf::actor notify_;
  std::shared_ptr<cluster_dispatch> cluster_; ///< --manifest runs; null: the local supervisor
  std::deque<size_t> to_generate_;
  size_t generating_ = 0;
  std::vector<std::vector<episode::previous_turn>> history_; ///< per item (episodes only)
  bool finished_ = false;
};

} // namespace

std::string verdict_line(const report::sample_record& r) {
  char buf[64];
  if (r.correct) {
    if (r.speedup > 0)
      std::snprintf(buf, sizeof buf, "correct, %.2fx", r.speedup);
    else
      std::snprintf(buf, sizeof buf, "correct");
    return buf;
  }
  return r.error == "none" ? "incorrect (mismatch)" : r.error;
}

caf::behavior eval_scheduler(caf::event_based_actor* self, std::shared_ptr<run_context> ctx,
                             std::shared_ptr<lazy_evaluators> evaluators, sampler_actor sampler,
                             caf::actor notify) {
  auto s = std::make_shared<scheduler>(self, std::move(ctx), std::move(evaluators),
                                       std::move(sampler), std::move(notify));
  self->set_down_handler([s](caf::down_msg& msg) { s->on_down(msg); });
  s->start();
  // The behaviour owns the scheduler.
  return {[s](done_atom) {}, [s](tick_atom) { s->on_tick(); }};
}

} // namespace kbrl::evalcli
