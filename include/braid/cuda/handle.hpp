// UniqueHandle<Traits>: owns one handle of a C API (stream, event, graph,
// library handle). Move-only; release() hands ownership back; the
// destructor never throws (a failed destroy is reported on stderr). The raw
// handle, from get(), is the non-owning view.
#pragma once

#include <utility>

namespace braid::cuda {

// Traits: `using handle_type = ...;` (a pointer-like C handle whose
// value-initialised state means "none") and `static void destroy(handle_type) noexcept`.
template <class Traits>
class UniqueHandle {
public:
    using handle_type = typename Traits::handle_type;

    UniqueHandle() noexcept = default;
    explicit UniqueHandle(handle_type handle) noexcept : handle_(handle) {}
    UniqueHandle(const UniqueHandle&) = delete;
    UniqueHandle& operator=(const UniqueHandle&) = delete;
    UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, handle_type{})) {}
    UniqueHandle& operator=(UniqueHandle&& other) noexcept {
        if (this != &other) reset(std::exchange(other.handle_, handle_type{}));
        return *this;
    }
    ~UniqueHandle() { reset(); }

    handle_type get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != handle_type{}; }

    // Gives up ownership without destroying.
    [[nodiscard]] handle_type release() noexcept { return std::exchange(handle_, handle_type{}); }

    void reset(handle_type handle = handle_type{}) noexcept {
        handle_type old = std::exchange(handle_, handle);
        if (old != handle_type{}) Traits::destroy(old);
    }

private:
    handle_type handle_{};
};

}  // namespace braid::cuda
