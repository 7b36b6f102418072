// The discrete-event model of one GPU running a Program: host issue, stream
// FIFOs and events, the resident-kernel limit, a block scheduler over SMs and
// shared DRAM bandwidth. Deterministic: the same inputs give the same bits.
// docs/simulator.md describes the model and the source of every constant.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/lower_bound.hpp"
#include "braid/sim/event_queue.hpp"
#include "braid/sim/host_issue.hpp"
#include "braid/sim/program.hpp"
#include "braid/sim/program_check.hpp"
#include "braid/sim/sm_array.hpp"

namespace braid::sim {

namespace detail {

class Engine {
public:
    Engine(const DeviceSpec& dev, const Program& program, const Params& params)
        : dev_(dev),
          p_(program),
          params_(params),
          checked_(check_program(dev, program, params)),
          issue_(issue_times_ns(program, params)),
          sms_(dev),
          bandwidth_bytes_per_ns_(dev.dram_bytes_per_ns()),
          dispatch_ns_(params.dispatch_latency_ns +
                       (program.mode == LaunchMode::eager ? params.eager_dispatch_extra_ns : 0.0)) {}

    Result run() {
        run_until(std::numeric_limits<double>::infinity());
        return finish();
    }

    // Runs until the iteration ends (true) or is sure to end after
    // `limit_ns` (false): a kernel is still running past that time.
    bool run_until(double limit_ns) {
        setup();
        for (std::uint32_t q = 0; q < queues_; ++q) worklist_.push_back(q);
        drain_worklist();
        sample_utilisation();
        while (step())
            if (now_ > limit_ns && done_ < kernels_.size()) return false;
        return true;
    }

    std::uint64_t block_events() const noexcept { return block_events_; }

    // The timeline of a run that ended (run_until returned true).
    Result finish() {
        for (std::uint32_t k = 0; k < kernels_.size(); ++k)
            if (kernels_[k].phase != Phase::done) throw SimError(describe_stall(k));
        Result r;
        for (std::uint32_t k = 0; k < kernels_.size(); ++k) {
            std::uint32_t used = 0;
            for (std::size_t w = 0; w < sm_words_; ++w) used += static_cast<std::uint32_t>(std::popcount(sm_bits_[k * sm_words_ + w]));
            records_[k].sms_used = used;
            r.makespan_ns = std::max(r.makespan_ns, records_[k].end_ns);
        }
        r.kernels = std::move(records_);

        std::vector<std::pair<std::uint32_t, std::uint32_t>> by_op;  // (op, kernel)
        for (std::uint32_t k = 0; k < p_.kernels.size(); ++k)
            if (p_.kernels[k].op != no_op) by_op.emplace_back(p_.kernels[k].op, k);
        std::sort(by_op.begin(), by_op.end());
        for (const auto& [op, k] : by_op) {
            const KernelRecord& kr = r.kernels[k];
            if (r.ops.empty() || r.ops.back().op != op) {
                r.ops.push_back(OpRecord{op, kr.start_ns, kr.end_ns, kr.stream, kr.sms_used});
                continue;
            }
            OpRecord& o = r.ops.back();
            o.start_ns = std::min(o.start_ns, kr.start_ns);
            o.end_ns = std::max(o.end_ns, kr.end_ns);
            o.sms_used = std::max(o.sms_used, kr.sms_used);
        }

        double busy_time = 0.0;
        for (std::size_t i = 0; i < utilisation_.size(); ++i) {
            const double until = i + 1 < utilisation_.size() ? utilisation_[i + 1].time_ns : r.makespan_ns;
            busy_time += utilisation_[i].busy_sms * std::max(0.0, until - utilisation_[i].time_ns);
        }
        r.mean_busy_sm_fraction = r.makespan_ns > 0.0 ? busy_time / (r.makespan_ns * sms_.sm_count()) : 0.0;
        r.utilisation = std::move(utilisation_);
        r.block_events = block_events_;
        return r;
    }

private:
    enum EventKind : std::uint8_t { wake_stream, kernel_dispatched, batch_done, record_seen };
    enum class Phase : std::uint8_t { waiting, dispatching, queued, resident, done };

    struct KernelState {
        std::uint64_t unplaced = 0;  // blocks not yet put on an SM
        std::uint64_t running = 0;   // blocks on SMs now
        double dram_per_block = 0.0;  // bytes/ns per running block; 0: never slowed
        double pressure_per_block = 0.0;  // 1 / (first-wave blocks per SM x SMs): alone, it presses at most 1
        int priority = 0;
        std::uint32_t order = 0;  // launch action: earlier launches first
        std::uint32_t stream = 0;
        Phase phase = Phase::waiting;
        bool fresh = false;  // resident since the last placement pass: scan every SM
        bool started = false;
    };

    // The blocks of one kernel placed in one pass: they all end together.
    struct Batch {
        std::uint32_t kernel = 0;
        std::uint64_t blocks = 0;
        std::vector<Placement> placements;
    };

    void setup() {
        const std::size_t n = p_.kernels.size();
        const std::uint32_t streams = p_.stream_count();
        kernels_.resize(n);
        records_.resize(n);
        for (std::uint32_t k = 0; k < n; ++k) {
            const KernelWork& w = checked_.work[k];
            KernelState& ks = kernels_[k];
            const std::uint32_t a = checked_.launch_action[k];
            ks.unplaced = w.blocks;
            ks.dram_per_block = params_.share_bandwidth ? w.dram_bytes_per_block_ns : 0.0;
            {
                // Blocks per SM in its isolated first wave (breadth-first placement).
                const std::uint64_t sms = sms_.sm_count();
                const std::uint64_t per_sm = std::min<std::uint64_t>(w.occupancy.blocks_per_sm, (w.blocks + sms - 1) / sms);
                ks.pressure_per_block = 1.0 / (static_cast<double>(std::max<std::uint64_t>(per_sm, 1)) * static_cast<double>(sms));
            }
            ks.order = a;
            ks.stream = p_.actions[a].stream;
            ks.priority = p_.stream_priorities[ks.stream];
            records_[k].issue_ns = issue_[a];
            records_[k].stream = ks.stream;
        }
        sm_words_ = (sms_.sm_count() + 63) / 64;
        sm_bits_.assign(n * sm_words_, 0);

        // Hardware queue FIFOs (one per stream unless streams outnumber the
        // queues) and, per record, the queues whose waits it releases.
        const int hw = p_.mode == LaunchMode::graph ? params_.graph_hardware_queues : params_.eager_hardware_queues;
        queues_ = hw > 0 ? std::min<std::uint32_t>(streams, static_cast<std::uint32_t>(hw)) : streams;
        stream_begin_.assign(queues_ + 1, 0);
        for (const Action& a : p_.actions) ++stream_begin_[queue_of(a.stream) + 1];
        for (std::uint32_t q = 0; q < queues_; ++q) stream_begin_[q + 1] += stream_begin_[q];
        stream_items_.resize(p_.actions.size());
        std::vector<std::uint32_t> fill(stream_begin_.begin(), stream_begin_.end() - 1);
        for (std::uint32_t a = 0; a < p_.actions.size(); ++a) stream_items_[fill[queue_of(p_.actions[a].stream)]++] = a;
        head_.assign(stream_begin_.begin(), stream_begin_.end() - 1);
        wake_pending_.assign(queues_, 0);

        waiter_begin_.assign(p_.actions.size() + 1, 0);
        for (std::uint32_t a = 0; a < p_.actions.size(); ++a)
            if (checked_.waited_record[a] != no_action) ++waiter_begin_[checked_.waited_record[a] + 1];
        for (std::size_t a = 0; a < p_.actions.size(); ++a) waiter_begin_[a + 1] += waiter_begin_[a];
        waiter_streams_.resize(waiter_begin_.back());
        fill.assign(waiter_begin_.begin(), waiter_begin_.end() - 1);
        for (std::uint32_t a = 0; a < p_.actions.size(); ++a)
            if (checked_.waited_record[a] != no_action)
                waiter_streams_[fill[checked_.waited_record[a]]++] = queue_of(p_.actions[a].stream);
        record_done_.assign(p_.actions.size(), 0);

        wall_.reserve(256);
        mem_.reserve(256);
    }

    // One distinct instant: everything due now, then placement. Three
    // clocks: wall time, the progress of compute-bound blocks (slowed by
    // co-running kernels) and of memory-bound blocks (slowed by co-running
    // kernels and by oversubscribed DRAM). Each queue's next event is turned
    // into wall time; the earliest defines the instant.
    bool step() {
        constexpr double never = std::numeric_limits<double>::infinity();
        const double next_wall = wall_.empty() ? never : wall_.top().key;
        const double next_cmp = cmp_.empty() ? never : now_ + (cmp_.top().key - cmp_clock_) / cmp_rate_;
        const double next_mem = mem_.empty() ? never : now_ + (mem_.top().key - mem_clock_) / rate_;
        const double next = std::min({next_wall, next_cmp, next_mem});
        if (next == never) return false;
        const double dt = std::max(0.0, next - now_);
        // The queue that defined this instant gets its key exactly, so the
        // batch that is due is seen as due despite rounding.
        if (next == next_wall) {
            mem_clock_ += rate_ * dt;
            cmp_clock_ += cmp_rate_ * dt;
            now_ = next_wall;
        } else if (next == next_mem) {
            cmp_clock_ += cmp_rate_ * dt;
            now_ = std::max(now_, next_mem);
            mem_clock_ = mem_.top().key;
        } else {
            mem_clock_ += rate_ * dt;
            now_ = std::max(now_, next_cmp);
            cmp_clock_ = cmp_.top().key;
        }
        for (bool any = true; any;) {
            any = false;
            while (!wall_.empty() && wall_.top().key <= now_) {
                handle(wall_.pop());
                any = true;
            }
            while (!cmp_.empty() && cmp_.top().key <= cmp_clock_) {
                handle(cmp_.pop());
                any = true;
            }
            while (!mem_.empty() && mem_.top().key <= mem_clock_) {
                handle(mem_.pop());
                any = true;
            }
            drain_worklist();  // may dispatch kernels at this very instant
        }
        admit();
        place_blocks();
        update_rate();
        sample_utilisation();
        return true;
    }

    void handle(const TimedEvent& e) {
        switch (e.kind) {
            case wake_stream:
                wake_pending_[e.what] = 0;
                worklist_.push_back(e.what);
                break;
            case kernel_dispatched: {
                kernels_[e.what].phase = Phase::queued;
                auto at = std::lower_bound(admit_queue_.begin(), admit_queue_.end(), e.what,
                                           [&](std::uint32_t a, std::uint32_t b) { return kernels_[a].order < kernels_[b].order; });
                admit_queue_.insert(at, e.what);
                break;
            }
            case batch_done: finish_batch(e.what); break;
            case record_seen: release_waiters(e.what); break;
        }
    }

    void finish_batch(std::uint32_t b) {
        Batch& batch = batches_[b];
        const std::uint32_t k = batch.kernel;
        KernelState& ks = kernels_[k];
        const BlockDemand& demand = checked_.work[k].demand;
        for (const Placement& pl : batch.placements) sms_.release(demand, pl);
        ks.running -= batch.blocks;
        block_events_ += batch.blocks;
        running_blocks_ -= batch.blocks;
        pressure_ = running_blocks_ == 0 ? 0.0 : pressure_ - static_cast<double>(batch.blocks) * ks.pressure_per_block;
        if (ks.dram_per_block > 0.0) {
            mem_blocks_ -= batch.blocks;
            mem_demand_ = mem_blocks_ == 0 ? 0.0 : mem_demand_ - static_cast<double>(batch.blocks) * ks.dram_per_block;
        }
        batch.placements.clear();
        free_batches_.push_back(b);
        if (ks.unplaced == 0 && ks.running == 0) {
            ks.phase = Phase::done;
            ++done_;
            records_[k].end_ns = now_;
            --resident_;
            worklist_.push_back(queue_of(ks.stream));
        }
    }

    // Moves queue `s` (a stream, unless streams share hardware queues) past
    // everything at its head that is done or can be done now: issued records
    // complete, satisfied waits pass, a kernel becomes runnable (and blocks
    // the queue until it ends).
    void advance(std::uint32_t s) {
        const std::uint32_t end = stream_begin_[s + 1];
        while (head_[s] < end) {
            const std::uint32_t a = stream_items_[head_[s]];
            if (issue_[a] > now_) {
                if (!wake_pending_[s]) {
                    wake_pending_[s] = 1;
                    wall_.push(issue_[a], wake_stream, s);
                }
                return;
            }
            const Action& act = p_.actions[a];
            switch (act.kind) {
                case ActionKind::launch: {
                    KernelState& ks = kernels_[act.index];
                    if (ks.phase == Phase::done) break;
                    if (ks.phase == Phase::waiting) {
                        ks.phase = Phase::dispatching;
                        records_[act.index].runnable_ns = now_;
                        wall_.push(now_ + dispatch_ns_, kernel_dispatched, act.index);
                    }
                    return;
                }
                case ActionKind::record:
                    // Waiting streams see the record event_latency_ns later.
                    if (params_.event_latency_ns > 0.0 && waiter_begin_[a] < waiter_begin_[a + 1])
                        wall_.push(now_ + params_.event_latency_ns, record_seen, a);
                    else
                        release_waiters(a);
                    break;
                case ActionKind::wait:
                    if (!record_done_[checked_.waited_record[a]]) return;
                    break;
            }
            ++head_[s];
        }
    }

    void release_waiters(std::uint32_t record) {
        record_done_[record] = 1;
        for (std::uint32_t i = waiter_begin_[record]; i < waiter_begin_[record + 1]; ++i)
            worklist_.push_back(waiter_streams_[i]);
    }

    void drain_worklist() {
        while (!worklist_.empty()) {
            const std::uint32_t s = worklist_.back();
            worklist_.pop_back();
            advance(s);
        }
    }

    // Dispatched kernels take free resident slots in launch order.
    void admit() {
        std::size_t taken = 0;
        while (resident_ < checked_.resident_limit && taken < admit_queue_.size()) {
            const std::uint32_t k = admit_queue_[taken++];
            KernelState& ks = kernels_[k];
            ks.phase = Phase::resident;
            ks.fresh = true;
            records_[k].resident_ns = now_;
            ++resident_;
            auto at = std::upper_bound(pending_.begin(), pending_.end(), k, [&](std::uint32_t a, std::uint32_t b) {
                const KernelState &x = kernels_[a], &y = kernels_[b];
                return x.priority != y.priority ? x.priority < y.priority : x.order < y.order;
            });
            pending_.insert(at, k);
        }
        admit_queue_.erase(admit_queue_.begin(), admit_queue_.begin() + static_cast<std::ptrdiff_t>(taken));
    }

    // Resident kernels with blocks left, most urgent stream first, then the
    // earliest launch; a kernel that fits nowhere leaves the gaps to the next.
    // A kernel already scanned in an earlier pass filled every SM it could,
    // so only SMs that gave resources back since can take more of it.
    void place_blocks() {
        if (pending_.empty()) {
            sms_.clear_dirty();
            return;
        }
        for (const std::uint32_t k : pending_) {
            KernelState& ks = kernels_[k];
            const std::span<const std::uint32_t> candidates = ks.fresh ? sms_.all() : sms_.dirty();
            ks.fresh = false;
            if (candidates.empty()) continue;
            const std::uint32_t b = new_batch(k);
            const std::uint64_t placed = sms_.place(checked_.work[k].demand, ks.unplaced, candidates, batches_[b].placements);
            if (placed == 0) {
                free_batches_.push_back(b);
                continue;
            }
            Batch& batch = batches_[b];
            batch.blocks = placed;
            ks.unplaced -= placed;
            ks.running += placed;
            block_events_ += placed;
            running_blocks_ += placed;
            pressure_ += static_cast<double>(placed) * ks.pressure_per_block;
            if (!ks.started) {
                ks.started = true;
                records_[k].start_ns = now_;
            }
            std::uint64_t* bits = &sm_bits_[std::size_t{k} * sm_words_];
            for (const Placement& pl : batch.placements) bits[pl.sm / 64] |= std::uint64_t{1} << (pl.sm % 64);
            const double block_ns = checked_.work[k].block_ns;
            if (ks.dram_per_block > 0.0) {
                mem_blocks_ += placed;
                mem_demand_ += static_cast<double>(placed) * ks.dram_per_block;
                mem_.push(mem_clock_ + block_ns, batch_done, b);
            } else if (params_.corun_slowdown > 0.0) {
                cmp_.push(cmp_clock_ + block_ns, batch_done, b);
            } else {
                wall_.push(now_ + block_ns, batch_done, b);  // never slowed: exact wall times
            }
        }
        std::erase_if(pending_, [&](std::uint32_t k) { return kernels_[k].unplaced == 0; });
        sms_.clear_dirty();
    }

    std::uint32_t new_batch(std::uint32_t k) {
        std::uint32_t b;
        if (!free_batches_.empty()) {
            b = free_batches_.back();
            free_batches_.pop_back();
        } else {
            b = static_cast<std::uint32_t>(batches_.size());
            batches_.emplace_back();
        }
        batches_[b].kernel = k;
        batches_[b].blocks = 0;
        batches_[b].placements.clear();
        return b;
    }

    // Blocks of co-running kernels share the SMs' issue slots, caches and
    // memory system: while the running blocks press more than one full wave
    // (pressure_ > 1), every block slows by 1 / (1 + corun_slowdown x
    // (pressure - 1)). Memory-bound blocks also slow when their demand
    // oversubscribes DRAM; a slowed block asks for proportionally less.
    void update_rate() {
        const double excess = std::max(0.0, pressure_ - 1.0);
        cmp_rate_ = 1.0 / (1.0 + params_.corun_slowdown * excess);
        const double demand = mem_demand_ * cmp_rate_;
        rate_ = demand > bandwidth_bytes_per_ns_ ? bandwidth_bytes_per_ns_ / mem_demand_ : cmp_rate_;
    }

    void sample_utilisation() {
        const std::uint32_t busy = sms_.busy_sms();
        const std::uint64_t warps = sms_.used_warps();
        if (!utilisation_.empty() && utilisation_.back().busy_sms == busy && last_warps_ == warps) return;
        const double fraction = static_cast<double>(warps) / (static_cast<double>(sms_.sm_count()) * dev_.max_warps_per_sm());
        if (!utilisation_.empty() && utilisation_.back().time_ns == now_)
            utilisation_.back() = UtilisationSample{now_, busy, fraction};
        else
            utilisation_.push_back(UtilisationSample{now_, busy, fraction});
        last_warps_ = warps;
    }


    // Cannot happen for a checked program (every wait names an earlier
    // record); kept so a model bug reports instead of returning wrong times.
    std::string describe_stall(std::uint32_t k) const {
        const KernelState& ks = kernels_[k];
        const std::uint32_t q = queue_of(ks.stream);
        const std::uint32_t h = head_[q];
        std::string at = h < stream_begin_[q + 1] ? describe_action(p_, stream_items_[h]) : "its end";
        return "simulation stalled: " + describe_kernel(p_, k) + " on stream " + std::to_string(ks.stream) +
               " never finished; the stream is stuck at " + at;
    }

    const DeviceSpec& dev_;
    const Program& p_;
    const Params& params_;
    CheckedProgram checked_;
    std::vector<double> issue_;
    SmArray sms_;
    double bandwidth_bytes_per_ns_ = 0.0;
    double dispatch_ns_ = 0.0;  // runnable to dispatched, in this program's launch mode

    double now_ = 0.0;
    double mem_clock_ = 0.0;  // ns of progress a memory-bound block has made since time 0
    double rate_ = 1.0;       // d(mem_clock)/d(now)
    double cmp_clock_ = 0.0;  // ns of progress a compute-bound block has made since time 0
    double cmp_rate_ = 1.0;   // d(cmp_clock)/d(now)
    double pressure_ = 0.0;   // running blocks' pressure: full waves' worth of the GPU they hold
    std::uint64_t running_blocks_ = 0;
    double mem_demand_ = 0.0;  // bytes/ns the running memory-bound blocks ask for
    std::uint64_t mem_blocks_ = 0;

    EventQueue wall_;  // keyed by wall time
    EventQueue mem_;   // memory-bound batches, keyed by the memory clock
    EventQueue cmp_;   // compute-bound batches, keyed by the compute clock (when co-running kernels slow)

    std::vector<KernelState> kernels_;
    std::vector<KernelRecord> records_;
    std::vector<std::uint64_t> sm_bits_;  // per kernel: SMs it ran on
    std::size_t sm_words_ = 0;

    std::uint32_t queue_of(std::uint32_t stream) const noexcept { return stream % queues_; }

    std::uint32_t queues_ = 1;                  // hardware queues the streams are multiplexed onto
    std::vector<std::uint32_t> stream_begin_;   // queue q's actions: stream_items_[stream_begin_[q] .. [q+1])
    std::vector<std::uint32_t> stream_items_;
    std::vector<std::uint32_t> head_;           // per stream: its first action not yet passed
    std::vector<std::uint8_t> wake_pending_;
    std::vector<std::uint32_t> waiter_begin_;   // per record action: streams whose waits it releases
    std::vector<std::uint32_t> waiter_streams_;
    std::vector<std::uint8_t> record_done_;
    std::vector<std::uint32_t> worklist_;       // streams to advance at this instant

    std::vector<std::uint32_t> admit_queue_;  // dispatched, waiting for a resident slot, by launch order
    std::vector<std::uint32_t> pending_;      // resident with blocks left, by (priority, launch order)
    std::uint32_t resident_ = 0;
    std::size_t done_ = 0;  // kernels finished

    std::vector<Batch> batches_;
    std::vector<std::uint32_t> free_batches_;

    std::vector<UtilisationSample> utilisation_;
    std::uint64_t last_warps_ = 0;
    std::uint64_t block_events_ = 0;
};

}  // namespace detail

// Simulates `program` on `dev`. Throws SimError for a program it cannot run
// (stream, kernel or event index out of range, a wait with no earlier record,
// a kernel launched twice or never) and ModelError for a kernel the model
// cannot use (duration, bytes, empty grid, a block that fits on no SM); each
// message names the kernel, stream or event.
inline Result simulate(const DeviceSpec& dev, const Program& program, const Params& params = {}) {
    return detail::Engine(dev, program, params).run();
}

// simulate() for a search that only wants plans faster than `limit_ns`:
// gives up (nullopt) as soon as a kernel is still running past that time, so
// a losing candidate costs part of a simulation. `block_events` gets the
// blocks started and finished either way.
inline std::optional<Result> simulate_within(const DeviceSpec& dev, const Program& program, const Params& params,
                                             double limit_ns, std::uint64_t& block_events) {
    detail::Engine engine(dev, program, params);
    const bool complete = engine.run_until(limit_ns);
    block_events = engine.block_events();
    if (!complete) return std::nullopt;
    return engine.finish();
}

}  // namespace braid::sim
