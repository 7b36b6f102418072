// Reading JSON documents with errors that point at the field: every accessor
// knows its JSON path ("$.steps[3].stream") and says what it expected.
#pragma once

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"

namespace braid::detail {

inline const char* json_type_name(const nlohmann::json& j) {
    if (j.is_number_integer()) return "an integer";
    if (j.is_number_float()) return "a number";
    if (j.is_object()) return "an object";
    if (j.is_array()) return "an array";
    if (j.is_string()) return "a string";
    if (j.is_boolean()) return "true or false";
    if (j.is_null()) return "null";
    return j.type_name();
}

// What a document braid reads may hold. Far above anything braid writes
// (its largest profiles are under 1 MB, 6 levels deep), low enough that a
// hostile file is refused before it costs much memory or stack.
struct DocumentLimits {
    static constexpr std::uint64_t max_bytes = std::uint64_t{256} << 20;   // the whole file
    static constexpr std::size_t max_depth = 64;                           // nested arrays and objects
    static constexpr std::size_t max_string_bytes = std::size_t{1} << 20;  // one string or key
    static constexpr std::size_t max_array_items = std::size_t{1} << 22;   // one array
};

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
        if (value_->size() > DocumentLimits::max_array_items)
            fail("an array of " + std::to_string(value_->size()) + " items, more than the " +
                 std::to_string(DocumentLimits::max_array_items) + " braid reads");
        return value_->size();
    }

    // The document is a `format` ("braid.plan"): says so when it is another
    // braid document or none, before any field is looked at.
    void expect_format(std::string_view format) const {
        const std::string want(format);
        if (!value_->is_object())
            fail("expected a " + want + " document (a JSON object), got " + json_type_name(*value_));
        auto it = value_->find("format");
        if (it == value_->end())
            fail("no \"format\" field: not a " + want + " document");
        if (!it->is_string()) at("format").fail("expected a string such as \"" + want + "\"");
        const std::string got = it->get<std::string>();
        if (got == want) return;
        if (got.rfind("braid.", 0) == 0) fail("this is a " + got + ", not a " + want);
        at("format").fail("expected \"" + want + "\", got \"" + got + "\"");
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
            if (!j.is_number_integer())
                fail("expected an integer, got " + (j.is_number() ? j.dump() : std::string(json_type_name(j))));
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
    // An integer of type T that must be at least `least` (a count: 1). Below
    // it, negative numbers included, the error says the rule, not T's range.
    template <class T>
    T at_least(T least) const {
        static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
        const nlohmann::json& j = *value_;
        if (j.is_number_integer() && !j.is_number_unsigned() &&
            j.get<std::int64_t>() < static_cast<std::int64_t>(least))
            fail("must be >= " + std::to_string(least) + ", got " + std::to_string(j.get<std::int64_t>()));
        const T v = get<T>();
        if (v < least) fail("must be >= " + std::to_string(least) + ", got " + std::to_string(v));
        return v;
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

namespace json_text {

// "3:14": line and column of byte `at` (1-based, counting bytes).
inline std::string position(std::string_view text, std::size_t at) {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < at && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return std::to_string(line) + ":" + std::to_string(col);
}

inline std::string describe_byte(std::string_view text, std::size_t at) {
    if (at >= text.size()) return "the document ends too early";
    const auto c = static_cast<unsigned char>(text[at]);
    if (c >= 0x20 && c < 0x7f) return std::string("unexpected '") + static_cast<char>(c) + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("unexpected byte 0x") + hex[c >> 4] + hex[c & 15];
}

// Refuses, before the JSON parser builds anything, what no braid document
// is: empty or binary input, and nesting or strings beyond DocumentLimits.
inline void check_shape(std::string_view text, const std::string& source) {
    if (text.empty()) throw FormatError(source, "the file is empty, not a JSON document");
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
        throw FormatError(source, "the file holds only white space, not a JSON document");
    if (const auto nul = text.find('\0'); nul != std::string_view::npos)
        throw FormatError(source, "binary data (a NUL byte at offset " + std::to_string(nul) + "), not a JSON document");
    std::size_t depth = 0, string_start = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
            if (in_string && i - string_start > DocumentLimits::max_string_bytes)
                throw FormatError(source + ":" + position(text, string_start),
                                  "a string longer than " + std::to_string(DocumentLimits::max_string_bytes) +
                                      " bytes; no braid document has one");
            continue;
        }
        if (c == '"') {
            in_string = true;
            string_start = i;
        } else if (c == '[' || c == '{') {
            if (++depth > DocumentLimits::max_depth)
                throw FormatError(source + ":" + position(text, i),
                                  "nested more than " + std::to_string(DocumentLimits::max_depth) +
                                      " levels deep; no braid document is");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}

// Refuses a key that appears twice in one object (JSON leaves open which
// of the two counts; nlohmann keeps the last, so the first would be lost
// without a word): the error names the object by its JSON path
// ("$.ops[3]"). A SAX pass that builds nothing, after the document parsed:
// nlohmann's parser callbacks would do it in one pass, but with a callback
// the parser scans an array's elements at the end of each object in it,
// which makes a long array of objects quadratic (a million objects took
// minutes).
class DuplicateKeys : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit DuplicateKeys(std::string source) : source_(std::move(source)) {}

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override {
        frames_.push_back({true});
        return true;
    }
    bool key(string_t& k) override {
        Frame& f = frames_.back();
        f.key = k;
        if (!f.keys.insert(k).second)
            throw FormatError(source_, path_of_object() + ": the key '" + k + "' appears twice in one object; give it once");
        return true;
    }
    bool end_object() override { return end(); }
    bool start_array(std::size_t) override {
        frames_.push_back({false});
        return true;
    }
    bool end_array() override { return end(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;  // the document parsed before this pass; nothing to add
    }

private:
    struct Frame {
        bool object = false;
        std::set<std::string> keys;  // an object's keys so far
        std::string key;             // an object's current key
        std::size_t index = 0;       // an array's current element
    };
    bool value() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
        return true;
    }
    bool end() {
        frames_.pop_back();
        return value();
    }
    // "$.ops[3]": the object whose key is being read (the innermost frame).
    std::string path_of_object() const {
        std::string path = "$";
        for (std::size_t i = 0; i + 1 < frames_.size(); ++i)
            path += frames_[i].object ? "." + frames_[i].key : "[" + std::to_string(frames_[i].index) + "]";
        return path;
    }

    std::string source_;
    std::vector<Frame> frames_;
};

}  // namespace json_text

// Parses `text`; errors name `source` (a file name) with line and column.
inline nlohmann::json parse_json(const std::string& text, const std::string& source) {
    if (text.size() > DocumentLimits::max_bytes)
        throw FormatError(source, "the document has " + std::to_string(text.size()) + " bytes, more than the " +
                                      std::to_string(DocumentLimits::max_bytes) + " braid reads");
    json_text::check_shape(text, source);
    try {
        nlohmann::json doc = nlohmann::json::parse(text);
        json_text::DuplicateKeys duplicates(source);
        nlohmann::json::sax_parse(text, &duplicates);
        return doc;
    } catch (const nlohmann::json::parse_error& e) {
        // e.byte (1-based) is the last byte the parser read; the token it
        // could not use ends there. Point at the token's start and show it
        // when it is short, printable text.
        if (e.byte > text.size())
            throw FormatError(source + ":" + json_text::position(text, text.size()),
                              "not valid JSON: the document ends too early");
        const std::size_t end = e.byte;
        std::size_t start = end == 0 ? 0 : end - 1;
        while (start > 0 && end - start < 24 && std::isalnum(static_cast<unsigned char>(text[start - 1]))) --start;
        const std::string_view token = std::string_view(text).substr(start, end - start);
        const bool printable = !token.empty() && std::all_of(token.begin(), token.end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
        });
        throw FormatError(source + ":" + json_text::position(text, start),
                          "not valid JSON: " + (printable ? "unexpected '" + std::string(token) + "'"
                                                          : json_text::describe_byte(text, end == 0 ? 0 : end - 1)));
    } catch (const nlohmann::json::out_of_range&) {
        throw FormatError(source, "not valid JSON: a number too large for a 64-bit floating-point value");
    } catch (const nlohmann::json::exception&) {
        throw FormatError(source, "not valid JSON");
    }
}

// The whole of `path`, at most DocumentLimits::max_bytes: a file, or a
// pipe (`--device <(...)`, /dev/stdin), read in pieces so that an endless
// one (/dev/zero) stops at the limit instead of filling memory.
inline std::string read_text_file(const std::string& path) {
    if (std::filesystem::is_directory(path)) throw Error("'" + path + "' is a folder, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open '" + path + "' for reading");
    const std::string most = std::to_string(DocumentLimits::max_bytes);
    const auto too_big = [&](const std::string& size) {
        return FormatError(path, "the file has " + size + " bytes, more than the " + most + " braid reads");
    };
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
        const std::uintmax_t size = std::filesystem::file_size(path, ec);
        if (!ec && size > DocumentLimits::max_bytes) throw too_big(std::to_string(size));
    }
    std::string text;
    char piece[1 << 16];
    while (in.read(piece, sizeof piece) || in.gcount() > 0) {
        text.append(piece, static_cast<std::size_t>(in.gcount()));
        if (text.size() > DocumentLimits::max_bytes) throw too_big("over " + most);
    }
    if (in.bad()) throw Error("could not read '" + path + "': " + std::strerror(errno));
    return text;
}

inline nlohmann::json load_json_file(const std::string& path) { return parse_json(read_text_file(path), path); }

}  // namespace braid::detail
