#pragma once
// Starting and stopping one kbrl-node process from its plan (runtime/node/node_plan.hpp):
// prepare the run directory and logs, start the actor system (TLS when the manifest has
// certificates), spawn and publish the node actor, wait for SIGINT/SIGTERM, the configured stop
// time or the end of the RL run, and stop (actors first, then the actor system under an exit
// watchdog). The composition root of kbrl-node: the one place that wires runtime and actors.

#include "runtime/node/node_plan.hpp"

namespace kbrl {

/// Runs the node until it is told to stop (or, on the coordinator node of an RL run, until the
/// run is done, ending with a summary of it). Returns the process exit code (0 on a clean stop,
/// 1 when the run could not start or failed).
int run_node(const node_plan& plan);

} // namespace kbrl
