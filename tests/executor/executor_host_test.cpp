// Executor on the host backend: random graphs and plans give exactly the
// serial bits; errors end an iteration cleanly and the next one is right; the
// executor calls a backend in the documented order. Also run under
// ThreadSanitizer in CI (a missing wait is a data race on the arena).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "braid/exec/executor.hpp"
#include "braid/exec/host.hpp"
#include "braid/model/device_table.hpp"
#include "braid/plan/validate.hpp"
#include "braid/planner/make_plan.hpp"
#include "random_case.hpp"

using namespace braid;
using braid::testing::make_random_case;
using braid::testing::PlanSource;
using braid::testing::random_plan;
using braid::testing::RandomCase;
using braid::testing::serial_reference;

namespace {

using HostExecutor = Executor<HostBackend>;

// Bodies that run each op (its batch part) on `arena`.
std::vector<HostExecutor::Body> hash_bodies(const RandomCase& c, std::vector<std::uint8_t>& arena) {
    std::vector<HostExecutor::Body> bodies;
    for (std::size_t i = 0; i < c.ops.size(); ++i)
        bodies.emplace_back([&c, &arena](HostLane&, const OpContext& ctx) {
            hashop::run_images(c.ops[ctx.op], ctx.batch_begin, ctx.batch_end, arena.data());
        });
    return bodies;
}

// Costs for the planners: one or two kernels per op, shapes and times drawn
// at random (the executor test only needs plans, not good ones).
OpCosts random_costs(const OpGraph& g, std::mt19937_64& rng) {
    OpCosts costs(g.op_count());
    for (OpId op = 0; op < g.op_count(); ++op) {
        const int kernels = static_cast<int>(rng() % 2) + 1;
        for (int k = 0; k < kernels; ++k) {
            KernelCost kc;
            kc.shape.name = g.op(op).name + ".k" + std::to_string(k);
            kc.shape.grid = Dim3{static_cast<std::uint32_t>(rng() % 256) + 1, 1, 1};
            kc.shape.block = Dim3{rng() % 2 ? 128u : 256u, 1, 1};
            kc.shape.regs_per_thread = 32;
            kc.duration_ns = 1000.0 + static_cast<double>(rng() % 20000);
            costs[op].kernels.push_back(kc);
        }
    }
    return costs;
}

// Every plan source the bits are checked against: our random plans and the
// planner's strategies.
std::vector<PlanSource> plan_sources() {
    std::vector<PlanSource> sources;
    sources.push_back({"random", [](const OpGraph& g, std::mt19937_64& rng, std::uint32_t max_streams) {
                           return random_plan(g, rng, static_cast<std::uint32_t>(rng() % max_streams) + 1);
                       }});
    for (const std::string& name : strategy_names())
        sources.push_back({name, [name](const OpGraph& g, std::mt19937_64& rng, std::uint32_t max_streams) {
                               const OpCosts costs = random_costs(g, rng);
                               PlanOptions o;
                               o.strategy = name;
                               o.max_streams = max_streams;
                               return make_plan(g, find_device("h100"), costs, o);
                           }});
    return sources;
}

// a writes x; b and c read x (b on stream 1, c on stream 2); d reads what
// b and c write.
struct Diamond {
    OpGraph graph;
    Plan plan;
};
Diamond diamond() {
    OpGraphBuilder b;
    const BufferId x = b.add_buffer("x", 64), y = b.add_buffer("y", 64), z = b.add_buffer("z", 64),
                   w = b.add_buffer("w", 64);
    b.add_op({.name = "a", .writes = {x}});
    b.add_op({.name = "b", .reads = {x}, .writes = {y}});
    b.add_op({.name = "c", .reads = {x}, .writes = {z}});
    b.add_op({.name = "d", .reads = {y, z}, .writes = {w}});
    Diamond d{b.finalize(), {}};
    d.plan.strategy = "diamond";
    d.plan.graph_fingerprint = d.graph.fingerprint();
    d.plan.stream_priorities = {0, -1, 0};
    d.plan.steps = {{0, 0, 1, 0}, {1, 0, 1, 1}, {2, 0, 1, 2}, {3, 0, 1, 0}};
    assign_minimal_waits(d.plan, d.graph);
    return d;
}

}  // namespace

TEST_CASE("random graphs on the host backend give exactly the serial bits, for every plan source") {
    const std::vector<PlanSource> sources = plan_sources();
    std::map<std::string, int> plans_run;
    std::uint32_t max_streams_seen = 0, splits_seen = 0, waits_seen = 0;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        const RandomCase c = make_random_case(seed);
        const std::vector<std::uint8_t> once = serial_reference(c, 1), twice = serial_reference(c, 2);
        std::mt19937_64 rng(seed * 7919);
        HostBackend backend;  // shared by every plan of this graph: lanes and events are reused
        std::vector<std::uint8_t> arena;
        for (const PlanSource& source : sources) {
            // Random plans three times per graph (stream counts 1..8), each
            // strategy once with 1..8 streams allowed.
            const int repeats = source.name == "random" ? 3 : 1;
            for (int r = 0; r < repeats; ++r) {
                const std::uint32_t max_streams = static_cast<std::uint32_t>((seed + static_cast<std::uint64_t>(r)) % 8) + 1;
                const Plan plan = source.make(c.graph, rng, max_streams);
                INFO("seed " << seed << ", plan " << source.name << " with " << plan.stream_count() << " streams");
                // (opara opens as many streams as its chain walk needs, beyond any cap)
                if (source.name != "opara") max_streams_seen = std::max(max_streams_seen, plan.stream_count());
                waits_seen += static_cast<std::uint32_t>(plan.waits.size());
                for (const PlanStep& s : plan.steps) splits_seen += s.parts > 1 && s.part == 0;
                HostExecutor ex(c.graph, plan, backend, hash_bodies(c, arena));
                arena = c.initial;
                ex.run();
                REQUIRE(arena == once);
                ex.run();  // the second iteration reuses every event: generations keep them apart
                REQUIRE(arena == twice);
                ++plans_run[source.name];
            }
        }
    }
    for (const PlanSource& s : sources) CHECK(plans_run[s.name] >= 200);
    CHECK(max_streams_seen == 8);
    CHECK(splits_seen > 100);
    CHECK(waits_seen > 1000);
}

TEST_CASE("removing a needed wait from a valid plan is caught by validate, naming the edge") {
    SUBCASE("hand-made: the exact edge") {
        Diamond d = diamond();
        REQUIRE(d.plan.waits.size() == 4);  // b and c wait for a; d waits for b and c
        Plan broken = d.plan;
        // Drop "b waits for a".
        std::erase_if(broken.waits, [](const PlanWait& w) { return w.step == 1 && w.after == 0; });
        REQUIRE(broken.waits.size() == 3);
        const std::string why = first_violation(broken, d.graph);
        CHECK(why.find("edge 'a' -> 'b' (read-after-write) is not respected") != std::string::npos);
        CHECK_THROWS_AS(validate(broken, d.graph), PlanError);
        CHECK_THROWS_AS(HostExecutor(d.graph, broken, *std::make_unique<HostBackend>(),
                                     std::vector<HostExecutor::Body>(4, [](HostLane&, const OpContext&) {})),
                        PlanError);
    }
    SUBCASE("random plans: every single wait is needed") {
        int checked = 0;
        for (std::uint64_t seed = 1; seed <= 60; ++seed) {
            const RandomCase c = make_random_case(seed);
            std::mt19937_64 rng(seed);
            const Plan plan = random_plan(c.graph, rng, 4);
            REQUIRE(first_violation(plan, c.graph).empty());
            for (std::size_t i = 0; i < plan.waits.size(); ++i) {
                Plan broken = plan;
                broken.waits.erase(broken.waits.begin() + static_cast<std::ptrdiff_t>(i));
                const std::string why = first_violation(broken, c.graph);
                INFO("seed " << seed << " without wait " << i);
                CHECK(why.find("edge '") != std::string::npos);
                CHECK(why.find("is not respected") != std::string::npos);
                ++checked;
            }
        }
        CHECK(checked > 100);
    }
}

TEST_CASE("a throwing body gives an ExecutionError naming the op; nothing hangs; the next iteration is right") {
    for (std::uint64_t seed = 300; seed < 340; ++seed) {
        const RandomCase c = make_random_case(seed, {.min_ops = 8, .max_ops = 30});
        const std::vector<std::uint8_t> once = serial_reference(c, 1);
        std::mt19937_64 rng(seed);
        const Plan plan = random_plan(c.graph, rng, 4);
        std::vector<std::uint8_t> arena = c.initial;
        std::vector<HostExecutor::Body> bodies = hash_bodies(c, arena);
        // Two ops throw in the first iteration; the earlier one by issue order
        // is reported. Every body of the failing iteration after it is skipped.
        const std::uint32_t first_step = static_cast<std::uint32_t>(rng() % plan.steps.size());
        const OpId bad = plan.steps[first_step].op;
        std::uint32_t other_step = static_cast<std::uint32_t>(rng() % plan.steps.size());
        while (plan.steps[other_step].op == bad && plan.steps.size() > 1)
            other_step = static_cast<std::uint32_t>(rng() % plan.steps.size());
        const OpId other = plan.steps[other_step].op;
        std::atomic<bool> fail{true};
        auto throwing = [&fail](HostExecutor::Body inner, std::string what) {
            return [inner = std::move(inner), what = std::move(what), &fail](HostLane& l, const OpContext& ctx) {
                if (fail.load()) throw std::runtime_error(what);
                inner(l, ctx);
            };
        };
        bodies[bad] = throwing(bodies[bad], "boom in " + c.graph.op(bad).name);
        if (other != bad) bodies[other] = throwing(bodies[other], "bang in " + c.graph.op(other).name);
        // The first step of each op decides which is reported.
        std::uint32_t first_bad = no_step, first_other = no_step;
        for (std::uint32_t s = 0; s < plan.steps.size(); ++s) {
            if (plan.steps[s].op == bad) first_bad = std::min(first_bad, s);
            if (plan.steps[s].op == other) first_other = std::min(first_other, s);
        }
        const OpId expected = first_bad <= first_other ? bad : other;

        HostBackend backend;
        HostExecutor ex(c.graph, plan, backend, std::move(bodies));
        INFO("seed " << seed << ", expected failure in " << c.graph.op(expected).name);
        bool caught = false;
        try {
            ex.run();
        } catch (const ExecutionError& e) {
            caught = true;
            CHECK(e.op() == c.graph.op(expected).name);
            const std::string what = e.what();
            CHECK(what.find("op '" + c.graph.op(expected).name + "'") == 0);
            CHECK(what.find(c.graph.op(expected).name) != std::string::npos);
            CHECK(what.find("lane ") != std::string::npos);
            // The original exception is nested.
            try {
                std::rethrow_if_nested(e);
                FAIL("no nested exception");
            } catch (const std::runtime_error& inner) {
                CHECK(std::string(inner.what()).find(c.graph.op(expected).name) != std::string::npos);
            }
        }
        CHECK(caught);
        fail = false;
        arena = c.initial;
        ex.run();
        CHECK(arena == once);
    }
}

TEST_CASE("an error thrown while issuing (not in a body) releases every lane and the next run works") {
    // A backend wrapper whose record() throws once, after some work is queued
    // on workers that wait for events that will now never be recorded.
    struct FlakyHost : HostBackend {
        int records_left = -1;
        void record(HostLane& lane, std::uint32_t event) {
            if (records_left == 0) {
                records_left = -1;
                throw std::runtime_error("issuing failed");
            }
            if (records_left > 0) --records_left;
            HostBackend::record(lane, event);
        }
    };
    const RandomCase c = make_random_case(77, {.min_ops = 30, .max_ops = 40});
    std::mt19937_64 rng(5);
    const Plan plan = random_plan(c.graph, rng, 6);
    REQUIRE(plan.waits.size() > 4);
    std::vector<std::uint8_t> arena = c.initial;
    FlakyHost backend;
    Executor<FlakyHost> ex(c.graph, plan, backend, [&] {
        std::vector<Executor<FlakyHost>::Body> b;
        for (std::size_t i = 0; i < c.ops.size(); ++i)
            b.emplace_back([&c, &arena](HostLane&, const OpContext& ctx) {
                hashop::run_images(c.ops[ctx.op], ctx.batch_begin, ctx.batch_end, arena.data());
            });
        return b;
    }());
    backend.records_left = 1;
    CHECK_THROWS_WITH_AS(ex.run(), "issuing failed", std::runtime_error);
    arena = c.initial;
    ex.run();
    CHECK(arena == serial_reference(c, 1));
}

TEST_CASE("a wait blocks the lane's worker, not the issuing thread") {
    // a (lane 0) cannot finish until c (lane 2) has run; b (lane 1) waits for
    // a. If issuing b's wait blocked the issuing thread, c would never be
    // issued and a would time out.
    OpGraphBuilder gb;
    const BufferId x = gb.add_buffer("x", 8), y = gb.add_buffer("y", 8), z = gb.add_buffer("z", 8);
    gb.add_op({.name = "a", .writes = {x}});
    gb.add_op({.name = "b", .reads = {x}, .writes = {y}});
    gb.add_op({.name = "c", .writes = {z}});
    const OpGraph g = gb.finalize();
    Plan plan;
    plan.strategy = "test";
    plan.graph_fingerprint = g.fingerprint();
    plan.stream_priorities = {0, 0, 0};
    plan.steps = {{0, 0, 1, 0}, {1, 0, 1, 1}, {2, 0, 1, 2}};
    assign_minimal_waits(plan, g);
    REQUIRE(plan.waits == std::vector<PlanWait>{{1, 0}});

    std::mutex m;
    std::condition_variable cv;
    bool c_ran = false, a_saw_c = false, b_ran = false;
    std::vector<Executor<HostBackend>::Body> bodies{
        [&](HostLane&, const OpContext&) {
            std::unique_lock lock(m);
            // Generous: only a deadlock-free executor gets here in time.
            a_saw_c = cv.wait_for(lock, std::chrono::seconds(20), [&] { return c_ran; });
        },
        [&](HostLane&, const OpContext&) {
            std::lock_guard lock(m);
            b_ran = a_saw_c;
        },
        [&](HostLane&, const OpContext&) {
            {
                std::lock_guard lock(m);
                c_ran = true;
            }
            cv.notify_all();
        },
    };
    HostBackend backend;
    HostExecutor ex(g, plan, backend, std::move(bodies));
    ex.run();
    CHECK(a_saw_c);
    CHECK(b_ran);
}

TEST_CASE("the profiling hook brackets every body on the thread that runs it") {
    struct Hook : ProfilingHook {
        std::mutex m;
        std::vector<std::string> events;
        std::map<std::uint32_t, std::thread::id> lane_thread;
        int open = 0;
        bool thread_mismatch = false;
        void op_begin(const OpContext& op) override {
            std::lock_guard lock(m);
            events.push_back("begin " + op.info->name);
            auto [it, fresh] = lane_thread.emplace(op.lane, std::this_thread::get_id());
            if (!fresh && it->second != std::this_thread::get_id()) thread_mismatch = true;
            ++open;
        }
        void op_end(const OpContext& op) override {
            std::lock_guard lock(m);
            events.push_back("end " + op.info->name);
            --open;
        }
    } hook;
    const RandomCase c = make_random_case(11, {.min_ops = 20, .max_ops = 30});
    std::mt19937_64 rng(3);
    const Plan plan = random_plan(c.graph, rng, 4);
    std::vector<std::uint8_t> arena = c.initial;
    HostBackend backend;
    HostExecutor ex(c.graph, plan, backend, hash_bodies(c, arena));
    ex.set_profiling_hook(&hook);
    ex.run();
    CHECK(hook.events.size() == 2 * plan.steps.size());
    CHECK(hook.open == 0);
    CHECK_FALSE(hook.thread_mismatch);
    for (auto [lane, id] : hook.lane_thread) {
        CHECK(id != std::this_thread::get_id());
        CHECK(id == backend.lane_thread(lane));
    }
    ex.set_profiling_hook(nullptr);
    hook.events.clear();
    arena = c.initial;
    ex.run();
    CHECK(hook.events.empty());
    CHECK(arena == serial_reference(c, 1));
}

TEST_CASE("executor construction names what is wrong") {
    Diamond d = diamond();
    HostBackend backend;
    auto noop = [](HostLane&, const OpContext&) {};
    SUBCASE("too few bodies") {
        CHECK_THROWS_WITH_AS(HostExecutor(d.graph, d.plan, backend, {noop, noop}),
                             "got 2 op bodies for a graph of 4 ops; the first op without one is 'c'", Error);
    }
    SUBCASE("an empty body") {
        CHECK_THROWS_WITH_AS(HostExecutor(d.graph, d.plan, backend, {noop, noop, nullptr, noop}),
                             "op 'c' (id 2) has no body", Error);
    }
    SUBCASE("a plan for another graph") {
        Plan other = d.plan;
        other.graph_fingerprint = "0000";
        CHECK_THROWS_AS(HostExecutor(d.graph, other, backend, {noop, noop, noop, noop}), PlanError);
    }
}

// Records every call the executor makes, to pin down the order.
struct LoggingBackend {
    struct Lane {
        std::uint32_t index = 0;
    };
    std::vector<Lane> lanes;
    std::vector<std::string> log;
    std::vector<std::uint64_t> forgotten;
    bool replay = false;
    bool begin_iteration(const CompiledPlan& plan, IterationKey key) {
        lanes.resize(plan.stream_count());
        for (std::uint32_t i = 0; i < lanes.size(); ++i) lanes[i].index = i;
        log.push_back("begin r" + std::to_string(key.revision));
        return !replay;
    }
    Lane& lane(std::uint32_t i) { return lanes[i]; }
    void wait(Lane& l, std::uint32_t e) { log.push_back("wait " + std::to_string(l.index) + " e" + std::to_string(e)); }
    void run(Lane& l, const OpContext& ctx, StepRunner<Lane> runner) {
        log.push_back("run " + std::to_string(l.index) + " " + ctx.info->name);
        runner(l, ctx);
    }
    void record(Lane& l, std::uint32_t e) { log.push_back("record " + std::to_string(l.index) + " e" + std::to_string(e)); }
    std::optional<StepFailure> end_iteration() {
        log.push_back("end");
        return std::nullopt;
    }
    void abort_iteration() noexcept { log.push_back("abort"); }
    void forget(std::uint64_t id) noexcept { forgotten.push_back(id); }
};
static_assert(ExecutionBackend<LoggingBackend>);
static_assert(ExecutionBackend<HostBackend>);

TEST_CASE("the executor calls its backend in issue order: waits, body, record; then joins") {
    Diamond d = diamond();
    LoggingBackend backend;
    std::vector<std::string> ran;
    std::vector<Executor<LoggingBackend>::Body> bodies(
        4, [&](LoggingBackend::Lane& l, const OpContext& ctx) {
            ran.push_back(ctx.info->name + "@" + std::to_string(l.index) + " step " + std::to_string(ctx.step));
        });
    {
        Executor<LoggingBackend> ex(d.graph, d.plan, backend, bodies);
        ex.run();
        CHECK(backend.log == std::vector<std::string>{"begin r0", "run 0 a", "record 0 e0", "wait 1 e0", "run 1 b",
                                                      "record 1 e1", "wait 2 e0", "run 2 c", "record 2 e2",
                                                      "wait 0 e1", "wait 0 e2", "run 0 d", "end"});
        CHECK(ran == std::vector<std::string>{"a@0 step 0", "b@1 step 1", "c@2 step 2", "d@0 step 3"});
        CHECK(ex.compiled().event_count == 3);

        SUBCASE("a replaying backend runs no body") {
            backend.log.clear();
            ran.clear();
            backend.replay = true;
            ex.run();
            CHECK(backend.log == std::vector<std::string>{"begin r0"});
            CHECK(ran.empty());
            CHECK(ex.iterations() == 2);
        }
        SUBCASE("changing a body bumps the revision") {
            backend.log.clear();
            ex.set_body(1, [](LoggingBackend::Lane&, const OpContext&) {});
            ex.run();
            CHECK(backend.log.front() == "begin r1");
            ex.invalidate();
            backend.log.clear();
            ex.run();
            CHECK(backend.log.front() == "begin r2");
            CHECK_THROWS_AS(ex.set_body(9, bodies[0]), Error);
        }
        SUBCASE("a moved executor still runs, and is forgotten once") {
            Executor<LoggingBackend> moved(std::move(ex));
            backend.log.clear();
            moved.run();
            CHECK(backend.log.size() == 13);
        }
    }
    CHECK(backend.forgotten.size() == 1);
}
