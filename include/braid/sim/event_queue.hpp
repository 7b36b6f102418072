// A min-queue of timed events. Ties on the key go to the event pushed first,
// so a simulation is bitwise reproducible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace braid::sim {

struct TimedEvent {
    double key = 0.0;        // ns on the wall clock, or on the memory-progress clock
    std::uint64_t seq = 0;   // push order, breaks ties
    std::uint32_t what = 0;  // index of the stream, kernel or block batch
    std::uint8_t kind = 0;
};

class EventQueue {
public:
    bool empty() const noexcept { return heap_.empty(); }
    const TimedEvent& top() const noexcept { return heap_.front(); }

    void push(double key, std::uint8_t kind, std::uint32_t what) {
        heap_.push_back(TimedEvent{key, next_seq_++, what, kind});
        std::push_heap(heap_.begin(), heap_.end(), later);
    }
    TimedEvent pop() {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        TimedEvent e = heap_.back();
        heap_.pop_back();
        return e;
    }
    void reserve(std::size_t n) { heap_.reserve(n); }

private:
    static bool later(const TimedEvent& a, const TimedEvent& b) noexcept {
        return a.key > b.key || (a.key == b.key && a.seq > b.seq);
    }

    std::vector<TimedEvent> heap_;
    std::uint64_t next_seq_ = 0;
};

}  // namespace braid::sim
