#pragma once
// The typed interface of every kbrl role, in one place (one comment per handler).
//
// Every actor answers `status` with an actor_status, and may accept control verbs (listed in its
// status' `commands`) through `control`; kbrl-shell needs no special case per role because of it.
// Handlers that can fail answer with a kbrl::errc error (messages/errors.hpp).

#include "messages/data.hpp"

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace kbrl {

// -- atoms (text at most 10 characters) ---------------------------------------------------------
using status_atom = caf::atom_constant<caf::atom("status")>;
using control_atom = caf::atom_constant<caf::atom("control")>;
using node_atom = caf::atom_constant<caf::atom("node")>;
using actors_atom = caf::atom_constant<caf::atom("actors")>;
using config_atom = caf::atom_constant<caf::atom("config")>;
using membership_atom = caf::atom_constant<caf::atom("membership")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;
using nodes_atom = caf::atom_constant<caf::atom("nodes")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using generate_atom = caf::atom_constant<caf::atom("generate")>;
using evaluate_atom = caf::atom_constant<caf::atom("evaluate")>;
using train_atom = caf::atom_constant<caf::atom("train")>;
using policy_atom = caf::atom_constant<caf::atom("policy")>;
using trajectory_atom = caf::atom_constant<caf::atom("trajectory")>;
using retrieve_atom = caf::atom_constant<caf::atom("retrieve")>;
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
using pause_atom = caf::atom_constant<caf::atom("pause")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using build_atom = caf::atom_constant<caf::atom("build")>;
/// kbrl-eval's scheduler (tools/evalcli) tells the session it has every verdict.
using done_atom = caf::atom_constant<caf::atom("done")>;

// -- shared handler shapes -----------------------------------------------------------------------

/// Answers this actor's status (name, role, state, mailbox, counters, role details).
using status_handler = caf::replies_to<status_atom>::with<actor_status>;

/// Runs a control verb from the actor's `commands` list with its arguments and answers a line
/// for a person ("restarted gpu1/evaluator.0"). Fails with errc::not_supported for other verbs.
using control_handler =
  caf::replies_to<control_atom, std::string, std::vector<std::string>>::with<std::string>;

/// The least every actor understands: status and control. Role actors without work of their
/// own yet are spawned with just this interface; every role's interface extends it.
using status_actor = caf::typed_actor<status_handler, control_handler>;

// -- listeners and hosts: the handles that subscribe and register carry -------------------------

/// What the membership needs of a node it relays to: status and control of the actors the node
/// hosts, by full name (every node_actor is one).
using actor_host_actor = caf::typed_actor<
  caf::replies_to<status_atom, std::string>::with<actor_status>,
  caf::replies_to<control_atom, std::string, std::string, std::vector<std::string>>::with<
    std::string>>;

/// Receives the membership view after every change (the RL run is one).
using membership_listener_actor = caf::typed_actor<caf::reacts_to<membership_view>>;

/// Receives every new policy version (samplers and the coordinator are).
using policy_listener_actor = caf::typed_actor<caf::reacts_to<policy_atom, policy_update>>;

// -- membership (coordinator node) ---------------------------------------------------------------

/// Keeps the live list of nodes and their actors; monitors every node actor and expects a
/// heartbeat from each. The hub through which shells and other nodes reach any actor by name.
using membership_actor = status_actor::extend<
  /// Registers (or re-registers after a restart) the node described by node_info, whose node
  /// actor is the handle; answers the view after the change. A rejoin bumps the incarnation.
  caf::replies_to<register_atom, node_info, actor_host_actor>::with<membership_view>,
  /// Heartbeat from the named node; answers false when the node is not registered as up
  /// (it was declared down, or the coordinator restarted): the node must register again.
  caf::replies_to<heartbeat_atom, std::string>::with<bool>,
  /// A node stopping cleanly says goodbye; it is shown as stopped, not down. Answers true when
  /// the node was up (the node waits for the answer so the goodbye is not lost on exit).
  caf::replies_to<leave_atom, std::string>::with<bool>,
  /// The current view.
  caf::replies_to<membership_atom>::with<membership_view>,
  /// Status of any actor in the cluster by its full name ("node/role.i"); fails with
  /// errc::unknown_actor or errc::node_unreachable.
  caf::replies_to<status_atom, std::string>::with<actor_status>,
  /// Control verb for any actor in the cluster by full name.
  caf::replies_to<control_atom, std::string, std::string, std::vector<std::string>>::with<
    std::string>,
  /// Sends the listener a membership_view now and after every change, until it goes down.
  caf::reacts_to<subscribe_atom, membership_listener_actor>>;

// -- node -----------------------------------------------------------------------------------------

/// One per process: owns the role actors, joins the coordinator, answers for its actors.
/// Published on the node's port from the manifest; kbrl-shell and other nodes talk to it.
using node_actor = status_actor::extend<
  /// This node's description and every local actor's status.
  caf::replies_to<status_atom, node_atom>::with<node_status>,
  /// Status of any actor by full name: answered here for local actors, relayed through the
  /// membership for others (so a shell needs a connection to one node only). Fails with
  /// errc::unknown_actor or errc::node_unreachable.
  caf::replies_to<status_atom, std::string>::with<actor_status>,
  /// Control verb for any actor by full name, routed like status.
  caf::replies_to<control_atom, std::string, std::string, std::vector<std::string>>::with<
    std::string>,
  /// The cluster's membership view, fetched from the coordinator.
  caf::replies_to<nodes_atom>::with<membership_view>,
  /// The membership actor this node reports to (the local one on the coordinator node); fails
  /// with errc::node_unreachable while the node has not joined.
  caf::replies_to<membership_atom>::with<membership_actor>,
  /// The merged run config this node runs with, as TOML.
  caf::replies_to<config_atom>::with<std::string>,
  /// Stops every local actor, says goodbye to the coordinator and quits.
  caf::reacts_to<stop_atom>>;

// -- roles of the RL loop -------------------------------------------------------------------------

/// One GPU (or one remote inference endpoint) drawing completions.
using sampler_actor = status_actor::extend<
  /// Draws one completion; fails with errc::busy when its queue is full.
  caf::replies_to<generate_atom, generation_request>::with<generation_result>,
  /// Installs new weights; later requests use them.
  caf::reacts_to<policy_atom, policy_update>>;

/// One GPU evaluating candidates in its isolated worker process.
using evaluator_actor = status_actor::extend<
  /// Compiles, checks and times a candidate; always answers a verdict (a crash is a verdict).
  caf::replies_to<evaluate_atom, eval_request>::with<eval_result>>;

/// Builds candidates' extensions on the CPU ahead of their evaluation (no GPU touched).
using builder_actor = status_actor::extend<
  /// Static checks, then the build; answers a verdict whose `compiled` says whether it built
  /// (error static_check or compile, with the excerpt, when it did not).
  caf::replies_to<build_atom, eval_request>::with<eval_result>>;

/// A builder node's build service (kbrl-node --role builder): builds each source once for the
/// whole cluster on its CPU builders and answers the verdict with the built library's files.
using build_service_actor = status_actor::extend<
  /// As builder_actor, plus the files of a successful build (none when it did not build).
  caf::replies_to<build_atom, eval_request>::with<build_output>>;

/// Owns one evaluator per GPU of its node, restarts them within a budget, spreads requests.
using evaluator_supervisor_actor = status_actor::extend<
  /// As evaluator_actor; fails with errc::busy when the bounded queue is full.
  caf::replies_to<evaluate_atom, eval_request>::with<eval_result>,
  /// The status of each evaluator it owns (restarts, last errors).
  caf::replies_to<status_atom, actors_atom>::with<std::vector<actor_status>>,
  /// The status of one evaluator it owns, by full name (evaluators are restarted under the same
  /// name, so the node routes their names here); fails with errc::unknown_actor.
  caf::replies_to<status_atom, std::string>::with<actor_status>,
  /// A control verb for one evaluator it owns ("restart"), by full name.
  caf::replies_to<control_atom, std::string, std::string, std::vector<std::string>>::with<
    std::string>,
  /// The cluster's membership (the node subscribes it): where the builder nodes' build
  /// services are.
  caf::reacts_to<membership_view>>;

/// Trains the policy from scored trajectories and publishes new versions.
using learner_actor = status_actor::extend<
  /// Trains one step on the batch; answers the policy version it produced (the current one
  /// again when every group of the batch was dropped for lack of signal) and sends it to every
  /// subscriber. Fails with errc::invalid_argument for data older than the allowed staleness or
  /// malformed (the batch is not trained on), errc::internal when the step itself failed, and
  /// errc::not_supported while the learner has no model (its status says why).
  caf::replies_to<train_atom, trajectory_batch>::with<policy_update>,
  /// The latest published policy.
  caf::replies_to<policy_atom>::with<policy_update>,
  /// Sends the listener every new policy as `policy` messages, starting with the current one,
  /// until it goes down.
  caf::reacts_to<subscribe_atom, policy_listener_actor>>;

/// Runs the training loop: hands out problems, collects trajectories, drives the learner.
using coordinator_actor = status_actor::extend<
  /// A finished episode.
  caf::reacts_to<trajectory_atom, trajectory>,
  /// The learner published a new version.
  caf::reacts_to<policy_atom, policy_update>,
  /// Pause / resume handing out new episodes.
  caf::reacts_to<pause_atom>, caf::reacts_to<resume_atom>>;

/// One trajectory on one problem, single- or multi-turn.
using episode_actor = status_actor::extend<
  /// Starts the episode; the trajectory goes to the coordinator when it ends.
  caf::reacts_to<start_atom, problem, uint64_t /*group id*/>>;

/// Finds example kernels for a problem (RA-ICL).
using retriever_actor = status_actor::extend<
  /// The k nearest examples of the problem's backend, never the problem itself.
  caf::replies_to<retrieve_atom, problem, int32_t>::with<std::vector<retrieved_example>>>;

/// Writes metric records to metrics.jsonl and TensorBoard event files.
using metrics_actor = status_actor::extend<
  /// Appends the records.
  caf::reacts_to<metrics_atom, std::vector<metric_record>>>;

/// An RL run on the coordinator node, registered as "<node>/coordinator": waits until the
/// cluster has what a run needs, runs the coordinator, and stops the node when the run is done.
/// Once the coordinator runs, status and control verbs are the coordinator's.
using rl_run_actor = status_actor::extend<
  /// The coordinator's metrics pass through here (progress line) to the metrics sink.
  caf::reacts_to<metrics_atom, std::vector<metric_record>>,
  /// The membership's view after each change (subscribed).
  caf::reacts_to<membership_view>>;

} // namespace kbrl
