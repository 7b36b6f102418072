// A Google Benchmark console reporter that also remembers each run's mean
// time, so a benchmark program can end with "key: value" lines measured in
// the same run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace braid::bench {

class KeyReporter : public benchmark::ConsoleReporter {
public:
    // Plain tabular output: the key lines that follow must start their line.
    KeyReporter() : benchmark::ConsoleReporter(benchmark::ConsoleReporter::OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs)
            if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
                seconds_[r.benchmark_name()] = r.GetAdjustedRealTime() / unit_per_second(r.time_unit);
                counters_[r.benchmark_name()] = r.counters;
            }
        ConsoleReporter::ReportRuns(runs);
    }
    // Mean wall time per iteration of the named benchmark, in seconds (-1 if it did not run).
    double seconds(const std::string& name) const {
        auto it = seconds_.find(name);
        return it == seconds_.end() ? -1.0 : it->second;
    }
    double counter(const std::string& name, const std::string& key) const {
        auto it = counters_.find(name);
        if (it == counters_.end()) return -1.0;
        auto c = it->second.find(key);
        return c == it->second.end() ? -1.0 : static_cast<double>(c->second);
    }

private:
    static double unit_per_second(benchmark::TimeUnit u) {
        switch (u) {
            case benchmark::kNanosecond: return 1e9;
            case benchmark::kMicrosecond: return 1e6;
            case benchmark::kMillisecond: return 1e3;
            default: return 1.0;
        }
    }
    std::map<std::string, double> seconds_;
    std::map<std::string, benchmark::UserCounters> counters_;
};

}  // namespace braid::bench
