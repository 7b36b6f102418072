// braid's exception types. Every message names the thing that is wrong
// (the op, buffer, field or file), so a user can act on it without a debugger.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace braid {

// Base of every error braid throws.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A graph that cannot be built: unknown buffers, duplicate names, cycles.
class GraphError : public Error {
public:
    using Error::Error;
};

// A device description or kernel shape that the model cannot use.
class ModelError : public Error {
public:
    using Error::Error;
};

// A document (JSON file or value) that does not match its schema. `path` is
// the JSON path of the offending field, e.g. "$.steps[3].stream".
class FormatError : public Error {
public:
    FormatError(std::string path, const std::string& what)
        : Error(path + ": " + what), path_(std::move(path)) {}
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

// A plan that does not fit its graph, or breaks a plan invariant.
class PlanError : public Error {
public:
    using Error::Error;
};

// A schedule the simulator cannot run (deadlock, impossible kernel).
class SimError : public Error {
public:
    using Error::Error;
};

// An op body that failed during an iteration; names the op.
class ExecutionError : public Error {
public:
    ExecutionError(std::string op, const std::string& what)
        : Error("op '" + op + "': " + what), op_(std::move(op)) {}
    const std::string& op() const noexcept { return op_; }

private:
    std::string op_;
};

}  // namespace braid
