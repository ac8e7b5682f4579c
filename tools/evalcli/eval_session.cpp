#include "tools/evalcli/eval_session.hpp"
#include "messages/status_details.hpp"

#include "actors/actor_stats.hpp"
#include "actors/sampler.hpp"
#include "messages/errors.hpp"
#include "messages/type_ids.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace kbrl::evalcli {

namespace {

std::atomic<int> received_signal{0};

/// The first SIGINT/SIGTERM asks the session to stop at its next poll, a second one ends the
/// process at once.
extern "C" void kbrl_eval_on_signal(int sig) {
  if (received_signal.exchange(sig) != 0)
    std::_Exit(130);
}

/// Asks the sampler for its status; an error when it has no backend or did not take the adapter.
caf::error check_sampler(caf::actor_system& sys, const sampler_actor& sampler, bool adapter) {
  caf::scoped_actor self{sys};
  caf::error out;
  self->request(sampler, std::chrono::minutes(10), status_atom::value)
    .receive(
      [&](actor_status& st) {
        if (st.health == actor_health::failed) {
          out = make_error(errc::invalid_config, "the sampler could not start: " + st.last_error);
          return;
        }
        if (adapter) {
          auto version = detail_of(st, "policy version");
          if (version != "1")
            out = make_error(errc::invalid_argument,
                             "the adapter was not applied: "
                               + (st.last_error.empty() ? std::string("unknown reason")
                                                        : st.last_error));
        }
      },
      [&](caf::error& err) { out = err; });
  return out;
}

} // namespace

caf::error run_session(std::shared_ptr<run_context> ctx, const evaluator_setup& ev,
                       const session_options& o) {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  if (o.cluster) {
    // A client of the cluster, as kbrl-shell: it connects to nodes, it publishes nothing.
    cfg.load<caf::io::middleman>();
    auto& sec = o.cluster->security;
    if (sec.tls()) {
      if (sec.shell_certificate.empty() || sec.shell_key.empty())
        return make_error(errc::invalid_config,
                          o.cluster->path + ": the cluster uses TLS; kbrl-eval presents the "
                                            "[shell] certificate and key, which it does not set");
      cfg.load<caf::openssl::manager>();
      cfg.openssl_cafile = sec.ca_file;
      cfg.openssl_certificate = sec.shell_certificate;
      cfg.openssl_key = sec.shell_key;
    }
  }
  caf::actor_system sys{cfg};
  std::vector<remote_evaluator_node> evaluators_cluster; // handles go before the system
  if (o.cluster) {
    auto found = find_cluster_evaluators(sys, *o.cluster, o.cluster_settings,
                                         std::chrono::seconds(10));
    if (!found)
      return found.error();
    for (auto& w : found->warnings)
      std::fprintf(stderr, "kbrl-eval: warning: %s; going on without it\n", w.c_str());
    ctx->evaluated_on = describe_cluster(o.cluster->name, *found);
    size_t slots = 0;
    for (auto& n : found->nodes)
      slots += n.evaluators.size();
    std::printf("kbrl-eval: evaluating on %s - %zu at once\n", ctx->evaluated_on.c_str(), slots);
    std::fflush(nullptr);
    evaluators_cluster = std::move(found->nodes);
  }
  actor_stats sup_stats;
  sup_stats.name = "kbrl-eval/evaluator-supervisor";
  sup_stats.node = "kbrl-eval";
  sup_stats.role = "evaluator-supervisor";
  auto evaluators = std::make_shared<lazy_evaluators>();
  evaluators->cluster = std::move(evaluators_cluster);
  evaluators->spawn = [&sys, sup_stats, &ev] {
    return sys.spawn(evaluator_supervisor, sup_stats, ev.supervision, ev.slots,
                     ev.builder_engine);
  };
  caf::error failure;
  sampler_actor sampler;
  if (o.sampler && o.draws) {
    actor_stats st;
    st.name = "kbrl-eval/sampler";
    st.node = "kbrl-eval";
    st.role = "sampler";
    std::printf("kbrl-eval: loading %s (%s sampler)\n", o.model.c_str(),
                o.sampler->backend.c_str());
    std::fflush(stdout);
    sampler = sys.spawn<caf::detached>(kbrl::sampler, st, *o.sampler);
    if (!o.adapter_dir.empty()) {
      policy_update up;
      up.version = 1;
      up.base_model = o.model;
      up.adapter_dir = o.adapter_dir;
      caf::anon_send(sampler, policy_atom::value, up);
    }
    if (auto err = check_sampler(sys, sampler, !o.adapter_dir.empty())) {
      failure = std::move(err);
      caf::anon_send_exit(sampler, caf::exit_reason::user_shutdown);
    }
  }
  if (!failure) {
    caf::scoped_actor self{sys};
    auto scheduler = sys.spawn(eval_scheduler, ctx, evaluators, sampler,
                               caf::actor_cast<caf::actor>(self));
    std::signal(SIGINT, kbrl_eval_on_signal);
    std::signal(SIGTERM, kbrl_eval_on_signal);
    bool finished = false;
    while (!finished) {
      self->receive([&](done_atom) { finished = true; },
                    caf::after(std::chrono::milliseconds(200)) >> [&] {
                      if (received_signal.load() == 0)
                        return;
                      // Leave now rather than wait for evaluations in flight: the workers see
                      // their pipes close and end after their current candidate.
                      std::error_code ec;
                      std::filesystem::remove_all(ev.scratch, ec);
                      std::fprintf(stderr,
                                   "\nkbrl-eval: interrupted; finished problems are in %s - "
                                   "run the same command again to continue\n",
                                   o.output_dir.c_str());
                      std::fflush(nullptr);
                      std::_Exit(130);
                    });
    }
    (void)scheduler;
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (sampler)
      caf::anon_send_exit(sampler, caf::exit_reason::user_shutdown);
  }
  // The handles go before the actor system, which waits for its detached actors to be gone.
  sampler = nullptr;
  if (evaluators->handle)
    caf::anon_send_exit(evaluators->handle, caf::exit_reason::user_shutdown);
  evaluators->handle = nullptr;
  evaluators->spawn = nullptr;
  evaluators->cluster.clear();
  return failure;
}

} // namespace kbrl::evalcli
