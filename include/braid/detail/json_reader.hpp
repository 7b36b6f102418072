// Reading JSON documents with errors that point at the field: every accessor
// knows its JSON path ("$.steps[3].stream") and says what it expected.
#pragma once

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"

namespace braid::detail {

inline const char* json_type_name(const nlohmann::json& j) {
    if (j.is_number_integer()) return "an integer";
    if (j.is_number_float()) return "a number";
    return j.type_name();
}

class JsonReader {
public:
    JsonReader(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {}

    const nlohmann::json& json() const noexcept { return *value_; }
    const std::string& path() const noexcept { return path_; }

    [[noreturn]] void fail(const std::string& what) const { throw FormatError(path_, what); }

    JsonReader at(std::string_view key) const {
        expect_object();
        auto it = value_->find(key);
        if (it == value_->end()) throw FormatError(path_ + "." + std::string(key), "required field is missing");
        return JsonReader(*it, path_ + "." + std::string(key));
    }
    std::optional<JsonReader> find(std::string_view key) const {
        expect_object();
        auto it = value_->find(key);
        if (it == value_->end() || it->is_null()) return std::nullopt;
        return JsonReader(*it, path_ + "." + std::string(key));
    }
    bool has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

    std::size_t size() const {
        if (!value_->is_array()) fail(std::string("expected an array, got ") + json_type_name(*value_));
        return value_->size();
    }
    JsonReader operator[](std::size_t i) const {
        size();
        return JsonReader((*value_)[i], path_ + "[" + std::to_string(i) + "]");
    }

    // Fields this object may have: any other is a mistake (a typo would
    // otherwise fall back to a default without a word).
    void allow_only(std::initializer_list<std::string_view> known) const {
        expect_object();
        for (auto it = value_->begin(); it != value_->end(); ++it) {
            bool ok = false;
            for (std::string_view k : known) ok = ok || k == it.key();
            if (ok) continue;
            std::string list;
            for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
            throw FormatError(path_ + "." + it.key(), "unknown field (expected one of: " + list + ")");
        }
    }

    void expect_object() const {
        if (!value_->is_object()) fail(std::string("expected an object, got ") + json_type_name(*value_));
    }

    template <class T>
    T get() const {
        const nlohmann::json& j = *value_;
        if constexpr (std::is_same_v<T, bool>) {
            if (!j.is_boolean()) fail(std::string("expected true or false, got ") + json_type_name(j));
            return j.get<bool>();
        } else if constexpr (std::is_integral_v<T>) {
            if (!j.is_number_integer()) fail(std::string("expected an integer, got ") + json_type_name(j));
            if (j.is_number_unsigned()) {
                auto v = j.get<std::uint64_t>();
                if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
                    fail("integer " + std::to_string(v) + " is too large");
                return static_cast<T>(v);
            }
            auto v = j.get<std::int64_t>();
            if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
                (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
                fail("integer " + std::to_string(v) + " is out of range" +
                     (std::is_unsigned_v<T> ? " (must be >= 0)" : ""));
            return static_cast<T>(v);
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!j.is_number()) fail(std::string("expected a number, got ") + json_type_name(j));
            return j.get<T>();
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!j.is_string()) fail(std::string("expected a string, got ") + json_type_name(j));
            return j.get<std::string>();
        } else {
            static_assert(sizeof(T) == 0, "unsupported type");
        }
    }
    template <class T>
    T get(std::string_view key) const {
        return at(key).get<T>();
    }
    template <class T>
    T get_or(std::string_view key, T fallback) const {
        auto f = find(key);
        return f ? f->get<T>() : fallback;
    }

private:
    const nlohmann::json* value_;
    std::string path_;
};

// Parses `text`; a syntax error names `source` (a file name) with line and column.
inline nlohmann::json parse_json(const std::string& text, const std::string& source) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        std::size_t line = 1, col = 1;
        for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
            if (text[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        throw FormatError(source + ":" + std::to_string(line) + ":" + std::to_string(col),
                          std::string("malformed JSON: ") + e.what());
    }
}

inline std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open '" + path + "' for reading");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline nlohmann::json load_json_file(const std::string& path) { return parse_json(read_text_file(path), path); }

}  // namespace braid::detail
