// OpGraph <-> JSON ("braid.graph", version 1): buffers, views, ops with
// their access sets and explicit edges — everything finalize() needs to
// derive the same graph again. Profiles embed it, so a graph profiled in any
// trainer can be planned later by braid-plan without the trainer.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "braid/detail/json_reader.hpp"
#include "braid/error.hpp"
#include "braid/graph/op_graph.hpp"

namespace braid {

inline nlohmann::json to_json(const OpGraph& graph) {
    nlohmann::json buffers = nlohmann::json::array();
    for (const Buffer& b : graph.buffers()) {
        nlohmann::json j{{"name", b.name}, {"bytes", b.bytes}};
        if (b.parent) {
            j["parent"] = graph.buffer(*b.parent).name;
            j["offset_bytes"] = b.offset_bytes;
            if (b.chunks > 1) {
                j["chunks"] = b.chunks;
                j["stride_bytes"] = b.stride_bytes;
            }
        }
        buffers.push_back(std::move(j));
    }
    auto names = [&](const std::vector<BufferId>& ids) {
        nlohmann::json out = nlohmann::json::array();
        for (BufferId id : ids) out.push_back(graph.buffer(id).name);
        return out;
    };
    nlohmann::json ops = nlohmann::json::array();
    for (const Op& op : graph.ops()) {
        nlohmann::json j{{"name", op.name}, {"kind", std::string(to_string(op.kind))}, {"reads", names(op.reads)},
                         {"writes", names(op.writes)}};
        if (!op.layer.empty()) j["layer"] = op.layer;
        if (op.split_batch > 1) j["split_batch"] = op.split_batch;
        ops.push_back(std::move(j));
    }
    nlohmann::json edges = nlohmann::json::array();
    for (const Edge& e : graph.edges())
        if (e.hazards & hazard_explicit) edges.push_back({graph.op(e.from).name, graph.op(e.to).name});
    return nlohmann::json{{"format", "braid.graph"}, {"version", 1},         {"fingerprint", graph.fingerprint()},
                          {"buffers", std::move(buffers)}, {"ops", std::move(ops)}, {"explicit_edges", std::move(edges)}};
}

// Rebuilds and finalizes the graph `r` points at, inside a larger document
// too (a profile's "$.graph"); errors carry r's path. When the document has a
// fingerprint, the rebuilt graph must match it.
inline OpGraph graph_from_json(const detail::JsonReader& r) {
    r.expect_format("braid.graph");
    r.allow_only({"format", "version", "fingerprint", "buffers", "ops", "explicit_edges"});
    if (r.get<int>("version") != 1) r.at("version").fail("this braid reads graph version 1");
    OpGraphBuilder b;
    auto buffers = r.at("buffers");
    for (std::size_t i = 0; i < buffers.size(); ++i) {
        auto bj = buffers[i];
        if (bj.has("parent"))
            bj.allow_only({"name", "bytes", "parent", "offset_bytes", "chunks", "stride_bytes"});
        else
            bj.allow_only({"name", "bytes"});
        try {
            const std::string name = bj.get<std::string>("name");
            const auto bytes = bj.get<std::uint64_t>("bytes");
            if (auto parent = bj.find("parent")) {
                const std::string parent_name = parent->get<std::string>();
                BufferId p = 0;
                try {
                    p = b.buffer_id(parent_name);
                } catch (const GraphError&) {
                    parent->fail("no earlier buffer named '" + parent_name + "'");
                }
                const auto offset = bj.get_or<std::uint64_t>("offset_bytes", 0);
                const auto chunks = bj.get_or<std::uint64_t>("chunks", 1);
                if (chunks > 1)
                    b.add_strided_view(name, p, offset, bytes, bj.get<std::uint64_t>("stride_bytes"), chunks);
                else
                    b.add_view(name, p, offset, bytes);
            } else {
                b.add_buffer(name, bytes);
            }
        } catch (const GraphError& e) {
            bj.fail(e.what());
        }
    }
    auto ops = r.at("ops");
    for (std::size_t i = 0; i < ops.size(); ++i) {
        auto oj = ops[i];
        oj.allow_only({"name", "kind", "layer", "reads", "writes", "split_batch"});
        OpSpec spec;
        spec.name = oj.get<std::string>("name");
        const std::string kind = oj.get<std::string>("kind");
        auto k = op_kind_from_string(kind);
        if (!k) oj.at("kind").fail("unknown op kind '" + kind + "'");
        spec.kind = *k;
        spec.layer = oj.get_or<std::string>("layer", "");
        spec.split_batch = oj.get_or<std::uint32_t>("split_batch", 0);
        auto resolve = [&](const char* field, std::vector<BufferId>& out) {
            auto list = oj.at(field);
            for (std::size_t j = 0; j < list.size(); ++j) {
                const std::string name = list[j].get<std::string>();
                try {
                    out.push_back(b.buffer_id(name));
                } catch (const GraphError&) {
                    list[j].fail("op '" + spec.name + "' names unknown buffer '" + name + "'");
                }
            }
        };
        resolve("reads", spec.reads);
        resolve("writes", spec.writes);
        try {
            b.add_op(std::move(spec));
        } catch (const GraphError& e) {
            oj.fail(e.what());
        }
    }
    std::unordered_map<std::string, OpId> op_ids;
    for (std::size_t i = 0; i < ops.size(); ++i) op_ids.emplace(ops[i].get<std::string>("name"), static_cast<OpId>(i));
    if (auto edges = r.find("explicit_edges")) {
        for (std::size_t i = 0; i < edges->size(); ++i) {
            auto e = (*edges)[i];
            if (e.size() != 2) e.fail("an edge is [\"from op\", \"to op\"]");
            OpId ends[2];
            for (std::size_t j = 0; j < 2; ++j) {
                const std::string name = e[j].get<std::string>();
                auto it = op_ids.find(name);
                if (it == op_ids.end()) e[j].fail("no op named '" + name + "'");
                ends[j] = it->second;
            }
            try {
                b.add_edge(ends[0], ends[1]);
            } catch (const GraphError& ge) {
                e.fail(ge.what());
            }
        }
    }
    OpGraph g = [&] {
        try {
            return b.finalize();
        } catch (const GraphError& e) {
            r.fail(e.what());
        }
    }();
    if (auto fp = r.find("fingerprint"); fp && fp->get<std::string>() != g.fingerprint())
        fp->fail("the rebuilt graph is " + g.fingerprint() + ", the document says " + fp->get<std::string>());
    return g;
}

// Errors carry the JSON path after the document's name when given
// ("g.json: $.ops[3]").
inline OpGraph graph_from_json(const nlohmann::json& json, const std::string& source = "") {
    return graph_from_json(detail::JsonReader(json, source.empty() ? "$" : source + ": $"));
}

}  // namespace braid
