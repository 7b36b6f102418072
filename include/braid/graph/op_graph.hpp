// OpGraph: the ops of one training iteration and the dependencies between
// them, derived from what each op reads and writes. Built once with
// OpGraphBuilder, then immutable; every planner and executor reads it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <queue>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "braid/detail/bit_matrix.hpp"
#include "braid/error.hpp"
#include "braid/graph/fingerprint.hpp"
#include "braid/graph/op.hpp"

namespace braid {

class OpGraphBuilder;

// The longest path through the graph when every op costs what it is given.
struct CriticalPath {
    double length_ns = 0.0;
    std::vector<OpId> ops;  // in execution order
};

class OpGraph {
public:
    std::size_t op_count() const noexcept { return ops_.size(); }
    std::size_t buffer_count() const noexcept { return buffers_.size(); }
    std::size_t edge_count() const noexcept { return boost::num_edges(graph_); }

    const Op& op(OpId id) const { return ops_.at(id); }
    std::span<const Op> ops() const noexcept { return ops_; }
    const Buffer& buffer(BufferId id) const { return buffers_.at(id); }
    std::span<const Buffer> buffers() const noexcept { return buffers_; }

    // Throws GraphError naming `name` when there is no such op.
    OpId op_id(std::string_view name) const {
        auto it = op_by_name_.find(std::string(name));
        if (it == op_by_name_.end()) throw GraphError("no op named '" + std::string(name) + "'");
        return it->second;
    }
    bool has_op(std::string_view name) const { return op_by_name_.count(std::string(name)) != 0; }

    // Both sorted by op id.
    std::span<const OpId> predecessors(OpId id) const {
        check_id(id);
        // Boost's CSR graph has no contiguous in-neighbour range in its API;
        // its in-edge rows keep the sources in m_backward, laid out like
        // the targets adjacent_vertices() returns.
        const auto& in = graph_.m_backward;
        return {in.m_column.data() + in.m_rowstart[id], in.m_column.data() + in.m_rowstart[id + 1]};
    }
    std::span<const OpId> successors(OpId id) const {
        check_id(id);
        auto [first, last] = boost::adjacent_vertices(id, graph_);
        return {first, last};
    }

    // Every edge once, sorted by (from, to): the store's own order.
    std::vector<Edge> edges() const {
        std::vector<Edge> out;
        out.reserve(edge_count());
        for (auto [it, end] = boost::edges(graph_); it != end; ++it)
            out.push_back(Edge{boost::source(*it, graph_), boost::target(*it, graph_), graph_[*it].hazards});
        return out;
    }
    bool has_edge(OpId from, OpId to) const { return boost::edge(from, to, graph_).second; }
    // Which hazards caused the edge from -> to (0 when there is none).
    std::uint8_t edge_hazards(OpId from, OpId to) const {
        auto [e, found] = boost::edge(from, to, graph_);
        return found ? graph_[e].hazards : std::uint8_t{0};
    }
    // "a -> b (read-after-write)" for messages.
    std::string describe_edge(OpId from, OpId to) const {
        return "'" + ops_.at(from).name + "' -> '" + ops_.at(to).name + "' (" +
               hazard_names(edge_hazards(from, to)) + ")";
    }

    // A topological order; among ready ops the one added first comes first,
    // so without explicit edges this is program order.
    std::span<const OpId> topological_order() const noexcept { return topo_; }
    // Position of each op in topological_order().
    std::span<const std::uint32_t> topological_position() const noexcept { return topo_pos_; }

    // descendants().test(u, v): v is reachable from u (u itself excluded).
    detail::BitMatrix descendants() const {
        const std::size_t n = op_count();
        detail::BitMatrix reach(n, n);
        for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
            for (OpId s : successors(*it)) {
                reach.set(*it, s);
                reach.or_row(*it, s);
            }
        }
        return reach;
    }

    // The fewest edges with the same reachability, sorted by (from, to).
    std::vector<Edge> transitive_reduction() const {
        const std::size_t n = op_count();
        detail::BitMatrix reach = descendants();
        std::vector<Edge> kept;
        std::vector<std::uint64_t> covered(reach.words_per_row());
        std::vector<OpId> by_topo;
        for (OpId u = 0; u < n; ++u) {
            const std::span<const OpId> succs = successors(u);
            by_topo.assign(succs.begin(), succs.end());
            std::sort(by_topo.begin(), by_topo.end(),
                      [&](OpId a, OpId b) { return topo_pos_[a] < topo_pos_[b]; });
            std::fill(covered.begin(), covered.end(), 0);
            for (OpId v : by_topo) {
                if ((covered[v / 64] >> (v % 64)) & 1u) continue;  // reachable through an earlier successor
                kept.push_back(Edge{u, v, edge_hazards(u, v)});
                const std::uint64_t* row = reach.row(v);
                for (std::size_t w = 0; w < covered.size(); ++w) covered[w] |= row[w];
            }
        }
        std::sort(kept.begin(), kept.end(),
                  [](const Edge& a, const Edge& b) { return std::pair(a.from, a.to) < std::pair(b.from, b.to); });
        return kept;
    }

    // Level of an op: 0 for ops without predecessors, else 1 + the highest
    // level among its predecessors. Ops of one level are mutually independent.
    std::vector<std::uint32_t> levels() const {
        std::vector<std::uint32_t> level(op_count(), 0);
        for (OpId v : topo_)
            for (OpId p : predecessors(v)) level[v] = std::max(level[v], level[p] + 1);
        return level;
    }
    // How many ops sit on each level.
    std::vector<std::uint32_t> level_widths() const {
        std::vector<std::uint32_t> width;
        for (std::uint32_t l : levels()) {
            if (l >= width.size()) width.resize(l + 1, 0);
            ++width[l];
        }
        return width;
    }

    // Longest path when op i costs cost_ns[i]. Every op needs a finite,
    // non-negative cost; the error names the first op without one.
    CriticalPath critical_path(std::span<const double> cost_ns) const {
        check_costs(cost_ns);
        const std::size_t n = op_count();
        std::vector<double> finish(n, 0.0);
        std::vector<OpId> best_pred(n, invalid_op);
        for (OpId v : topo_) {
            double start = 0.0;
            for (OpId p : predecessors(v))
                if (finish[p] > start || (finish[p] == start && best_pred[v] == invalid_op)) {
                    start = finish[p];
                    best_pred[v] = p;
                }
            finish[v] = start + cost_ns[v];
        }
        CriticalPath cp;
        OpId last = topo_.front();
        for (OpId v : topo_)
            if (finish[v] > finish[last]) last = v;
        cp.length_ns = finish[last];
        for (OpId v = last; v != invalid_op; v = best_pred[v]) cp.ops.push_back(v);
        std::reverse(cp.ops.begin(), cp.ops.end());
        return cp;
    }

    // Upward rank: the cost of the longest path from an op (itself included)
    // to the end of the iteration.
    std::vector<double> upward_ranks(std::span<const double> cost_ns) const {
        check_costs(cost_ns);
        std::vector<double> rank(op_count(), 0.0);
        for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
            double tail = 0.0;
            for (OpId s : successors(*it)) tail = std::max(tail, rank[s]);
            rank[*it] = cost_ns[*it] + tail;
        }
        return rank;
    }

    void check_costs(std::span<const double> cost_ns) const {
        if (cost_ns.size() < op_count())
            throw GraphError("costs are missing for " + std::to_string(op_count() - cost_ns.size()) +
                             " op(s), the first being '" + ops_[cost_ns.size()].name + "'");
        if (cost_ns.size() > op_count())
            throw GraphError("got " + std::to_string(cost_ns.size()) + " costs for a graph of " +
                             std::to_string(op_count()) + " ops");
        for (OpId i = 0; i < op_count(); ++i)
            if (!std::isfinite(cost_ns[i]) || cost_ns[i] < 0.0)
                throw GraphError("op '" + ops_[i].name + "' has cost " + std::to_string(cost_ns[i]) +
                                 " ns; costs must be finite and >= 0");
    }

    // A stable hash of op names, kinds, split markers and edges: plans carry
    // it so a plan is never run on a graph it was not made for.
    const std::string& fingerprint() const noexcept { return fingerprint_; }

    static constexpr OpId invalid_op = ~OpId{0};

    // Same ops, buffers and edges with their hazards: the fingerprint covers
    // neither buffer sizes nor why an edge exists.
    friend bool operator==(const OpGraph& a, const OpGraph& b) {
        return a.ops_ == b.ops_ && a.buffers_ == b.buffers_ && a.edges() == b.edges();
    }

private:
    friend class OpGraphBuilder;

    struct EdgeInfo {
        std::uint8_t hazards = 0;
    };
    // The one edge store: Boost.Graph's CSR graph is immutable like OpGraph
    // and keeps each op's neighbours as contiguous, sorted OpIds (spans).
    using Graph = boost::compressed_sparse_row_graph<boost::bidirectionalS, boost::no_property, EdgeInfo,
                                                     boost::no_property, OpId, std::size_t>;

    OpGraph() = default;

    void check_id(OpId id) const {
        if (id >= op_count()) throw std::out_of_range("op id " + std::to_string(id) + " is out of range");
    }

    std::vector<Op> ops_;
    std::vector<Buffer> buffers_;
    std::unordered_map<std::string, OpId> op_by_name_;
    Graph graph_;
    std::vector<OpId> topo_;
    std::vector<std::uint32_t> topo_pos_;
    std::string fingerprint_;
};

// Collects buffers, ops and explicit edges in program order, then derives the
// hazard edges and checks the result in finalize().
class OpGraphBuilder {
public:
    BufferId add_buffer(std::string name, std::uint64_t bytes) {
        check_new_buffer_name(name);
        if (bytes == 0) throw GraphError("buffer '" + name + "' has 0 bytes");
        Buffer b;
        b.id = static_cast<BufferId>(buffers_.size());
        b.name = std::move(name);
        b.bytes = bytes;
        b.root = b.id;
        buffer_by_name_.emplace(b.name, b.id);
        buffers_.push_back(std::move(b));
        return buffers_.back().id;
    }

    // A byte range of `parent` (itself possibly a view).
    BufferId add_view(std::string name, BufferId parent, std::uint64_t offset_bytes, std::uint64_t bytes) {
        check_new_buffer_name(name);
        const Buffer& p = view_parent(name, parent);
        if (bytes == 0) throw GraphError("view '" + name + "' has 0 bytes");
        if (offset_bytes > p.bytes || bytes > p.bytes - offset_bytes)
            throw GraphError("view '" + name + "' covers bytes [" + std::to_string(offset_bytes) + ", " +
                             std::to_string(offset_bytes + bytes) + ") but its parent '" + p.name + "' has only " +
                             std::to_string(p.bytes) + " bytes");
        Buffer b;
        b.id = static_cast<BufferId>(buffers_.size());
        b.name = std::move(name);
        b.bytes = bytes;
        b.parent = parent;
        b.offset_bytes = offset_bytes;
        b.root = p.root;
        b.root_offset_bytes = p.root_offset_bytes + offset_bytes;
        buffer_by_name_.emplace(b.name, b.id);
        buffers_.push_back(std::move(b));
        return buffers_.back().id;
    }

    // `chunks` ranges of `chunk_bytes`, `stride_bytes` apart, the first at
    // `offset_bytes` of a contiguous parent: a channel slice of an NCHW
    // tensor (one chunk per image), for example.
    BufferId add_strided_view(std::string name, BufferId parent, std::uint64_t offset_bytes, std::uint64_t chunk_bytes,
                              std::uint64_t stride_bytes, std::uint64_t chunks) {
        check_new_buffer_name(name);
        const Buffer& p = view_parent(name, parent);
        if (chunk_bytes == 0 || chunks == 0) throw GraphError("view '" + name + "' has 0 bytes");
        if (chunks > 1 && stride_bytes < chunk_bytes)
            throw GraphError("view '" + name + "' has chunks of " + std::to_string(chunk_bytes) +
                             " bytes that overlap (stride " + std::to_string(stride_bytes) + ")");
        // end = offset + (chunks - 1) * stride + chunk, computed without overflow.
        const bool fits = offset_bytes <= p.bytes && chunk_bytes <= p.bytes - offset_bytes &&
                          (chunks == 1 || (chunks - 1) <= (p.bytes - offset_bytes - chunk_bytes) / stride_bytes);
        const long double end = static_cast<long double>(offset_bytes) +
                                static_cast<long double>(chunks - 1) * static_cast<long double>(stride_bytes) +
                                static_cast<long double>(chunk_bytes);
        if (!fits)
            throw GraphError("view '" + name + "' covers bytes [" + std::to_string(offset_bytes) + ", " +
                             std::to_string(static_cast<unsigned long long>(std::min<long double>(end, 1.8e19L))) +
                             ") but its parent '" + p.name + "' has only " +
                             std::to_string(p.bytes) + " bytes");
        Buffer b;
        b.id = static_cast<BufferId>(buffers_.size());
        b.name = std::move(name);
        b.bytes = chunk_bytes;
        b.parent = parent;
        b.offset_bytes = offset_bytes;
        b.chunks = chunks;
        b.stride_bytes = chunks > 1 ? stride_bytes : 0;
        b.root = p.root;
        b.root_offset_bytes = p.root_offset_bytes + offset_bytes;
        buffer_by_name_.emplace(b.name, b.id);
        buffers_.push_back(std::move(b));
        return buffers_.back().id;
    }

    BufferId buffer_id(std::string_view name) const {
        auto it = buffer_by_name_.find(std::string(name));
        if (it == buffer_by_name_.end()) throw GraphError("no buffer named '" + std::string(name) + "'");
        return it->second;
    }
    const Buffer& buffer(BufferId id) const { return buffers_.at(id); }

    OpId add_op(OpSpec spec) {
        if (spec.name.empty()) throw GraphError("an op needs a name (op #" + std::to_string(ops_.size()) + ")");
        if (op_by_name_.count(spec.name)) throw GraphError("duplicate op name '" + spec.name + "'");
        auto check = [&](const std::vector<BufferId>& ids, const char* verb) {
            for (BufferId b : ids)
                if (b >= buffers_.size())
                    throw GraphError("op '" + spec.name + "' " + verb + " unknown buffer id " + std::to_string(b));
        };
        check(spec.reads, "reads");
        check(spec.writes, "writes");
        if (spec.split_batch == 1) spec.split_batch = 0;  // one image cannot be split
        Op op;
        op.id = static_cast<OpId>(ops_.size());
        op.name = std::move(spec.name);
        op.kind = spec.kind;
        op.layer = std::move(spec.layer);
        op.reads = std::move(spec.reads);
        op.writes = std::move(spec.writes);
        op.split_batch = spec.split_batch;
        op_by_name_.emplace(op.name, op.id);
        ops_.push_back(std::move(op));
        return ops_.back().id;
    }

    // An ordering the access sets do not show (a side effect, say).
    void add_edge(OpId before, OpId after) {
        if (before >= ops_.size() || after >= ops_.size())
            throw GraphError("explicit edge names unknown op id " +
                             std::to_string(before >= ops_.size() ? before : after));
        if (before == after) throw GraphError("explicit edge from op '" + ops_[before].name + "' to itself");
        explicit_edges_.emplace_back(before, after);
    }

    std::size_t op_count() const noexcept { return ops_.size(); }

    OpGraph finalize() const {
        if (ops_.empty()) throw GraphError("cannot finalize an empty graph: add at least one op");
        OpGraph g;
        g.ops_ = ops_;
        g.buffers_ = buffers_;
        g.op_by_name_ = op_by_name_;

        std::unordered_map<std::uint64_t, std::uint8_t> edge_bits;  // from << 32 | to -> HazardBits
        auto add = [&](OpId from, OpId to, std::uint8_t bit) {
            if (from != to) edge_bits[(std::uint64_t{from} << 32) | to] |= bit;
        };
        derive_hazards(add);
        for (auto [a, b] : explicit_edges_) add(a, b, hazard_explicit);

        // Fed in (from, to) order, the CSR rows come out sorted both ways.
        std::vector<std::pair<std::uint64_t, std::uint8_t>> sorted(edge_bits.begin(), edge_bits.end());
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::pair<OpId, OpId>> ends;
        std::vector<OpGraph::EdgeInfo> hazards;
        ends.reserve(sorted.size());
        hazards.reserve(sorted.size());
        for (auto [key, bits] : sorted) {
            ends.emplace_back(static_cast<OpId>(key >> 32), static_cast<OpId>(key));
            hazards.push_back({bits});
        }
        g.graph_ = OpGraph::Graph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), hazards.begin(),
                                  static_cast<OpId>(ops_.size()));
        order_topologically(g);
        g.fingerprint_ = graph_fingerprint(g.ops_, g.edges());
        return g;
    }

private:
    struct Segment {
        OpId writer = OpGraph::invalid_op;
        std::vector<OpId> readers;  // since the last write
    };
    using SegmentMap = std::map<std::uint64_t, Segment>;  // start byte -> state up to the next start

    static void split_at(SegmentMap& m, std::uint64_t at) {
        auto it = m.upper_bound(at);
        --it;  // the segment containing `at` (the map always has key 0)
        if (it->first == at) return;
        m.emplace_hint(std::next(it), at, it->second);
    }

    // Walk ops in program order and turn every conflicting pair of accesses
    // to overlapping bytes into an edge; read-read pairs get none.
    template <class AddEdge>
    void derive_hazards(AddEdge& add) const {
        std::vector<SegmentMap> per_root(buffers_.size());
        auto segments = [&](BufferId b, auto&& visit) {
            const Buffer& buf = buffers_[b];
            SegmentMap& m = per_root[buf.root];
            if (m.empty()) m.emplace(0, Segment{});
            for (std::uint64_t c = 0; c < buf.chunks; ++c) {
                const std::uint64_t lo = buf.root_offset_bytes + c * buf.stride_bytes, hi = lo + buf.bytes;
                split_at(m, lo);
                if (hi < buffers_[buf.root].bytes) split_at(m, hi);
                for (auto it = m.find(lo); it != m.end() && it->first < hi; ++it) visit(it->second);
            }
        };
        for (const Op& op : ops_) {
            for (BufferId b : op.reads)
                segments(b, [&](Segment& s) {
                    if (s.writer != OpGraph::invalid_op) add(s.writer, op.id, hazard_raw);
                    if (s.readers.empty() || s.readers.back() != op.id) s.readers.push_back(op.id);
                });
            for (BufferId b : op.writes)
                segments(b, [&](Segment& s) {
                    if (s.writer != OpGraph::invalid_op) add(s.writer, op.id, hazard_waw);
                    for (OpId r : s.readers) add(r, op.id, hazard_war);
                    s.writer = op.id;
                    s.readers.clear();
                });
        }
    }

    // Kahn's algorithm, smallest op id first among ready ops; on a cycle, the
    // error names the ops of one cycle.
    static void order_topologically(OpGraph& g) {
        const std::size_t n = g.ops_.size();
        std::vector<std::uint32_t> pending(n);
        std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
        for (OpId v = 0; v < n; ++v) {
            pending[v] = static_cast<std::uint32_t>(g.predecessors(v).size());
            if (pending[v] == 0) ready.push(v);
        }
        g.topo_.reserve(n);
        while (!ready.empty()) {
            OpId v = ready.top();
            ready.pop();
            g.topo_.push_back(v);
            for (OpId s : g.successors(v))
                if (--pending[s] == 0) ready.push(s);
        }
        if (g.topo_.size() != n) throw GraphError(describe_cycle(g, pending));
        g.topo_pos_.assign(n, 0);
        for (std::uint32_t i = 0; i < n; ++i) g.topo_pos_[g.topo_[i]] = i;
    }

    static std::string describe_cycle(const OpGraph& g, const std::vector<std::uint32_t>& pending) {
        // Every op left over has a left-over predecessor: walk back until an
        // op repeats; the walk between the repeats is a cycle.
        OpId v = 0;
        while (pending[v] == 0) ++v;
        std::vector<std::int64_t> seen_at(g.ops_.size(), -1);
        std::vector<OpId> walk;
        while (seen_at[v] < 0) {
            seen_at[v] = static_cast<std::int64_t>(walk.size());
            walk.push_back(v);
            for (OpId p : g.predecessors(v))
                if (pending[p] != 0) {
                    v = p;
                    break;
                }
        }
        std::vector<OpId> cycle(walk.begin() + seen_at[v], walk.end());
        std::reverse(cycle.begin(), cycle.end());  // predecessors were walked: flip to edge direction
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // start at the earliest op
        std::string msg = "the graph has a cycle: ";
        for (OpId c : cycle) msg += "'" + g.ops_[c].name + "' -> ";
        msg += "'" + g.ops_[cycle.front()].name + "'";
        return msg;
    }

    const Buffer& view_parent(const std::string& name, BufferId parent) const {
        if (parent >= buffers_.size())
            throw GraphError("view '" + name + "' names unknown parent buffer id " + std::to_string(parent));
        const Buffer& p = buffers_[parent];
        if (p.chunks > 1)
            throw GraphError("view '" + name + "' has the strided view '" + p.name +
                             "' as parent; take views of a contiguous buffer");
        return p;
    }

    void check_new_buffer_name(const std::string& name) const {
        if (name.empty()) throw GraphError("a buffer needs a name (buffer #" + std::to_string(buffers_.size()) + ")");
        if (buffer_by_name_.count(name)) throw GraphError("duplicate buffer name '" + name + "'");
    }

    std::vector<Buffer> buffers_;
    std::unordered_map<std::string, BufferId> buffer_by_name_;
    std::vector<Op> ops_;
    std::unordered_map<std::string, OpId> op_by_name_;
    std::vector<std::pair<OpId, OpId>> explicit_edges_;
};

}  // namespace braid
