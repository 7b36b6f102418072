// When each action reaches the device. The host never waits for the device
// in one iteration (launch queues are deep), so issue times depend only on
// the program and the launch mode, and are computed up front.
#pragma once

#include <vector>

#include "braid/sim/program.hpp"

namespace braid::sim {

// Eager: the host makes one API call per action, in order, starting at 0; an
//   action reaches its stream when its call returns. A launch costs its
//   measured host time where the kernel carries one (Kernel::host_ns),
//   else the per-launch and per-op-body constants.
// Graph: one cudaGraphLaunch (graph_launch_ns) issues everything; kernel node
//   i (in capture order, from 0) becomes available at graph_launch_ns +
//   i x graph_node_ns, as the device-side executor walks the nodes. Records
//   and waits are graph edges, not nodes: they cost nothing and are issued
//   with the kernel node before them (or at graph_launch_ns).
inline std::vector<double> issue_times_ns(const Program& p, const Params& params) {
    std::vector<double> issue(p.actions.size(), 0.0);
    if (p.mode == LaunchMode::graph) {
        double node_ns = params.graph_launch_ns;
        double nodes = 0.0;
        for (std::size_t a = 0; a < p.actions.size(); ++a) {
            if (p.actions[a].kind == ActionKind::launch) {
                node_ns = params.graph_launch_ns + nodes * params.graph_node_ns;
                nodes += 1.0;
            }
            issue[a] = node_ns;
        }
        return issue;
    }
    double host_ns = 0.0;
    std::uint32_t last_op = no_op;
    for (std::size_t a = 0; a < p.actions.size(); ++a) {
        switch (p.actions[a].kind) {
            case ActionKind::launch: {
                const Kernel& k = p.kernels[p.actions[a].index];
                if (k.host_ns >= 0.0) {
                    host_ns += k.host_ns * params.host_time_scale;  // measured: the body's own cost
                } else {
                    if (k.op != last_op || k.op == no_op) host_ns += params.op_host_ns;
                    host_ns += params.launch_latency_ns;
                }
                last_op = k.op;
                break;
            }
            case ActionKind::record: host_ns += params.record_latency_ns; break;
            case ActionKind::wait: host_ns += params.wait_latency_ns; break;
        }
        issue[a] = host_ns;
    }
    return issue;
}

}  // namespace braid::sim
