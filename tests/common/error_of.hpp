// The message of the braid::Error a call throws, or "<no error>": tests
// compare error messages word for word.
#pragma once

#include <string>

#include "braid/error.hpp"

namespace braid::testing {

inline std::string error_of(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

}  // namespace braid::testing
