// Kernel names as people read them: CUPTI reports the mangled symbol
// ("_Z11gemm_tiledPKfS0_Pfiii"); profiles store "gemm_tiled(const float*, ...)".
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#if defined(__has_include)
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define BRAID_HAS_CXXABI 1
#endif
#endif

namespace braid::profiler {

// The demangled name, or `symbol` itself when it is not a mangled C++ name
// (extern "C" kernels) or no demangler is available.
inline std::string demangle(const char* symbol) {
    if (symbol == nullptr) return "<unnamed>";
#ifdef BRAID_HAS_CXXABI
    if (symbol[0] == '_' && symbol[1] == 'Z') {
        int status = 0;
        std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(symbol, nullptr, nullptr, &status), std::free);
        if (status == 0 && out) return out.get();
    }
#endif
    return symbol;
}

}  // namespace braid::profiler
