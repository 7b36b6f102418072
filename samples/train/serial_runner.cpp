#include "train/serial_runner.hpp"

#include <algorithm>
#include <exception>

#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"

namespace braid::samples {

void run_serial(const braid::OpGraph& graph, std::span<const HostBody> bodies, const SerialRunOptions& options) {
    if (bodies.size() != graph.op_count())
        throw braid::ExecutionError("<serial runner>", "got " + std::to_string(bodies.size()) + " bodies for " +
                                                           std::to_string(graph.op_count()) + " ops");
    const std::span<const OpId> order = graph.topological_order();
    for (std::size_t step = 0; step < order.size(); ++step) {
        const OpId id = order[step];
        const braid::Op& op = graph.op(id);
        if (!bodies[id]) throw braid::ExecutionError(op.name, "has no body");
        const std::uint32_t parts = op.splittable() ? std::clamp<std::uint32_t>(options.parts, 1, op.split_batch) : 1;
        for (std::uint32_t part = 0; part < parts; ++part) {
            braid::OpContext ctx;
            ctx.op = id;
            ctx.info = &op;
            ctx.step = static_cast<std::uint32_t>(step);
            ctx.lane = 0;
            ctx.part = part;
            ctx.parts = parts;
            if (op.splittable()) {
                const braid::BatchRange r = braid::split_range(op.split_batch, parts, part);
                ctx.batch_begin = r.begin;
                ctx.batch_end = r.end;
            }
            try {
                bodies[id](ctx);
            } catch (const braid::ExecutionError&) {
                throw;
            } catch (const std::exception& e) {
                throw braid::ExecutionError(op.name, e.what());
            }
        }
        if (options.progress) options.progress(step + 1, order.size());
    }
}

}  // namespace braid::samples
