// The simulator backend: runs a compiled plan on the discrete-event GPU
// model. A lane is a simulated stream; a body says which kernels its op
// launches (SimLane::launch), waits and records become program actions, and
// end of iteration hands the sim::Program to the simulator.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/exec/backend.hpp"
#include "braid/exec/op_context.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/batch_split.hpp"
#include "braid/model/cost.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/plan/compiled_plan.hpp"
#include "braid/sim/launch_mode.hpp"
#include "braid/sim/program.hpp"
#include "braid/sim/simulator.hpp"

namespace braid {

class SimBackend;

// A simulated stream, as an op body sees it.
class SimLane {
public:
    std::uint32_t index = 0;

    // Appends a launch of `kernel` on this lane, tagged with the running op;
    // `host_ns`: what it costs the host when measured (sim::Kernel::host_ns).
    void launch(const KernelCost& kernel, double host_ns = -1.0);
    // Every kernel of `cost`, in order, each costing the host `host_ns`.
    void launch(const OpCost& cost, double host_ns = -1.0) {
        for (const KernelCost& k : cost.kernels) launch(k, host_ns);
    }

private:
    friend class SimBackend;
    SimBackend* owner_ = nullptr;
    const OpContext* running_ = nullptr;  // the op whose body is running, else null
};

struct SimBackendOptions {
    sim::Params params;
    LaunchMode mode = LaunchMode::eager;
    bool simulate = true;  // false: only build the Program
};

class SimBackend {
public:
    using Lane = SimLane;

    explicit SimBackend(DeviceSpec device, SimBackendOptions options = {})
        : device_(std::move(device)), options_(std::move(options)) {}
    SimBackend(const SimBackend&) = delete;
    SimBackend& operator=(const SimBackend&) = delete;

    const DeviceSpec& device() const noexcept { return device_; }
    SimBackendOptions& options() noexcept { return options_; }
    const SimBackendOptions& options() const noexcept { return options_; }

    // What the last successful iteration issued, and what the simulator made
    // of it (has_result() is false when simulation is off or the iteration
    // failed).
    const sim::Program& last_program() const noexcept { return program_; }
    bool has_result() const noexcept { return result_.has_value(); }
    const sim::Result& last_result() const {
        if (!result_) throw SimError("SimBackend: no simulated iteration yet (or simulation is off)");
        return *result_;
    }

    // ---------------------------------------------------- ExecutionBackend
    bool begin_iteration(const CompiledPlan& plan, IterationKey /*key*/) {
        while (lanes_.size() < plan.stream_count()) {
            auto lane = std::make_unique<SimLane>();
            lane->index = static_cast<std::uint32_t>(lanes_.size());
            lane->owner_ = this;
            lanes_.push_back(std::move(lane));
        }
        building_ = sim::Program{};
        building_.mode = options_.mode;
        building_.stream_priorities = plan.stream_priorities;
        building_.event_count = plan.event_count;
        building_.actions.reserve(plan.steps.size() * 2);
        failure_.reset();
        result_.reset();
        return true;
    }

    SimLane& lane(std::uint32_t index) { return *lanes_[index]; }

    void wait(SimLane& lane, std::uint32_t event) {
        if (!failure_) building_.actions.push_back({sim::ActionKind::wait, lane.index, event});
    }

    void run(SimLane& lane, const OpContext& ctx, StepRunner<SimLane> runner) {
        if (failure_) return;
        lane.running_ = &ctx;
        try {
            runner(lane, ctx);
        } catch (...) {
            failure_ = StepFailure{ctx.step, std::current_exception()};
        }
        lane.running_ = nullptr;
    }

    void record(SimLane& lane, std::uint32_t event) {
        if (!failure_) building_.actions.push_back({sim::ActionKind::record, lane.index, event});
    }

    std::optional<StepFailure> end_iteration() {
        if (failure_) {
            building_ = sim::Program{};
            return std::exchange(failure_, std::nullopt);
        }
        program_ = std::move(building_);
        building_ = sim::Program{};
        if (options_.simulate) result_ = sim::simulate(device_, program_, options_.params);
        return std::nullopt;
    }

    void abort_iteration() noexcept {
        building_ = sim::Program{};
        failure_.reset();
        for (auto& l : lanes_) l->running_ = nullptr;
    }

private:
    friend class SimLane;

    void add_launch(const SimLane& lane, const KernelCost& kernel, double host_ns) {
        if (lane.running_ == nullptr)
            throw Error("SimLane::launch called on lane " + std::to_string(lane.index) + " outside an op body");
        const OpContext& ctx = *lane.running_;
        building_.actions.push_back(
            {sim::ActionKind::launch, lane.index, static_cast<std::uint32_t>(building_.kernels.size())});
        building_.kernels.push_back(
            sim::Kernel{kernel, ctx.op, ctx.info != nullptr ? ctx.info->name : std::string(), host_ns});
    }

    DeviceSpec device_;
    SimBackendOptions options_;
    std::vector<std::unique_ptr<SimLane>> lanes_;
    sim::Program building_;
    sim::Program program_;
    std::optional<sim::Result> result_;
    std::optional<StepFailure> failure_;
};

inline void SimLane::launch(const KernelCost& kernel, double host_ns) {
    if (owner_ == nullptr) throw Error("SimLane::launch on a lane that belongs to no SimBackend");
    owner_->add_launch(*this, kernel, host_ns);
}

// Bodies that launch each op's kernels — its batch part's when the plan
// splits it (split_part) — for an Executor<SimBackend>. costs is indexed by
// OpId and copied.
inline std::vector<std::function<void(SimLane&, const OpContext&)>> sim_bodies(const OpGraph& graph,
                                                                                 const DeviceSpec& device,
                                                                                 std::span<const OpCost> costs) {
    require_costs_for<Error>(graph.op_count(), costs.size(), "sim_bodies");
    auto shared = std::make_shared<const std::vector<OpCost>>(costs.begin(), costs.end());
    auto dev = std::make_shared<const DeviceSpec>(device);
    std::vector<std::function<void(SimLane&, const OpContext&)>> bodies;
    bodies.reserve(graph.op_count());
    for (OpId op = 0; op < graph.op_count(); ++op)
        bodies.emplace_back([shared, dev, op](SimLane& lane, const OpContext& ctx) {
            const OpCost& whole = (*shared)[op];
            if (ctx.parts > 1)
                lane.launch(split_part(*dev, whole, ctx.info->split_batch, ctx.parts, ctx.part), whole.host_share_ns());
            else
                lane.launch(whole, whole.host_share_ns());
        });
    return bodies;
}

}  // namespace braid
