// Binary state files for long runs: accumulators write their exact state (doubles bit for bit)
// so that a resumed run continues with identical numbers. Little-endian host layout; every read
// is bounds-checked and a mismatch names the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope {

class BinaryWriter {
public:
    template <typename T>
    void put(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }
    // `n` bytes from `p`, as put_string writes a string of them (no intermediate copy).
    void put_bytes(const void* p, size_t n) {
        put<uint64_t>(n);
        buf_.append(static_cast<const char*>(p), n);
    }
    template <typename T>
    void put_vector(const std::vector<T>& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        put<uint64_t>(v.size());
        if (!v.empty()) buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    }
    void put_doubles(const double* p, size_t n) {
        put<uint64_t>(n);
        buf_.append(reinterpret_cast<const char*>(p), n * sizeof(double));
    }
    // Section tags catch a reader that is out of step with the writer.
    void tag(const char* name) { put_string(name); }
    const std::string& bytes() const { return buf_; }

private:
    std::string buf_;
};

class BinaryReader {
public:
    BinaryReader(const std::string& bytes, std::string origin)
        : data_(bytes), origin_(std::move(origin)) {}

    template <typename T>
    T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        if constexpr (std::is_same_v<T, bool>) {
            // A byte other than 0 or 1 is not a bool (reading it as one is undefined behaviour).
            const auto b = get<uint8_t>();
            if (b > 1) fail("byte " + std::to_string(b) + " where a flag (0 or 1) belongs");
            return b == 1;
        }
        need(sizeof(T));
        T v;
        std::memcpy(&v, data_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string get_string() { return std::string(get_bytes()); }
    // What put_bytes / put_string wrote, in place: valid while the reader's bytes live.
    std::string_view get_bytes() {
        auto n = get<uint64_t>();
        need(n);
        const std::string_view s(data_.data() + pos_, n);
        pos_ += n;
        return s;
    }
    template <typename T>
    std::vector<T> get_vector() {
        auto n = get<uint64_t>();
        if (n > (data_.size() - pos_) / sizeof(T)) fail("vector length beyond the end");
        std::vector<T> v(n);
        if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));
        pos_ += n * sizeof(T);
        return v;
    }
    void get_doubles(double* p, size_t n) {
        auto stored = get<uint64_t>();
        if (stored != n)
            fail("expected " + std::to_string(n) + " numbers, found " + std::to_string(stored));
        need(n * sizeof(double));
        std::memcpy(p, data_.data() + pos_, n * sizeof(double));
        pos_ += n * sizeof(double);
    }
    void expect_tag(const char* name) {
        std::string t = get_string();
        if (t != name) fail(std::string("expected section '") + name + "', found " + quote(t));
    }
    bool at_end() const { return pos_ == data_.size(); }
    [[noreturn]] void fail(const std::string& what) const {
        throw InputError(origin_, "corrupt or incompatible state file: " + what);
    }

private:
    void need(uint64_t n) const {
        if (n > data_.size() - pos_) fail("truncated");
    }
    const std::string& data_;
    std::string origin_;
    size_t pos_ = 0;
};

// Writes or reads a state field by field, so one visit of a state's fields both saves it
// (FieldIo over a BinaryWriter) and loads it back (over a BinaryReader) in the same layout:
// trivially copyable values as they are, strings and vectors length first, maps as their
// length and then each key and value, pairs as their two members, and any other type T by a
// function `void fields(FieldIo&, T&)` found beside T. Loading reads element by element and
// every read is bounds-checked, so a damaged length fails at the end of the bytes.
class FieldIo {
public:
    explicit FieldIo(BinaryWriter& w) : w_(&w) {}
    explicit FieldIo(BinaryReader& r) : r_(&r) {}
    bool loading() const { return r_ != nullptr; }
    // The reader, to fail() with a message; only while loading.
    BinaryReader& reader() const { return *r_; }
    void tag(const char* name) {
        if (r_)
            r_->expect_tag(name);
        else
            w_->tag(name);
    }

    template <typename T>
    void operator()(T& x) {
        if constexpr (std::is_same_v<T, std::string>) {
            if (r_)
                x = r_->get_string();
            else
                w_->put_string(x);
        } else if constexpr (is_pair<T>::value) {
            (*this)(x.first);
            (*this)(x.second);
        } else if constexpr (is_vector<T>::value) {
            using E = typename T::value_type;
            if constexpr (std::is_trivially_copyable_v<E> && !is_pair<E>::value) {
                if (r_)
                    x = r_->get_vector<E>();
                else
                    w_->put_vector(x);
            } else {
                uint64_t n = x.size();
                (*this)(n);
                if (!r_) {
                    for (E& e : x) (*this)(e);
                    return;
                }
                x.clear();
                for (uint64_t i = 0; i < n; ++i) {
                    E e{};
                    (*this)(e);
                    x.push_back(std::move(e));
                }
            }
        } else if constexpr (is_map<T>::value) {
            uint64_t n = x.size();
            (*this)(n);
            if (!r_) {
                for (auto& [k, v] : x) {
                    auto key = k;
                    (*this)(key);
                    (*this)(v);
                }
                return;
            }
            x.clear();
            for (uint64_t i = 0; i < n; ++i) {
                typename T::key_type key{};
                (*this)(key);
                (*this)(x[key]);
            }
        } else if constexpr (std::is_trivially_copyable_v<T>) {
            if (r_)
                x = r_->get<T>();
            else
                w_->put(x);
        } else {
            fields(*this, x);
        }
    }

private:
    template <typename T>
    struct is_vector : std::false_type {};
    template <typename E, typename A>
    struct is_vector<std::vector<E, A>> : std::true_type {};
    template <typename T>
    struct is_map : std::false_type {};
    template <typename K, typename V, typename C, typename A>
    struct is_map<std::map<K, V, C, A>> : std::true_type {};
    template <typename T>
    struct is_pair : std::false_type {};
    template <typename A, typename B>
    struct is_pair<std::pair<A, B>> : std::true_type {};

    BinaryWriter* w_ = nullptr;
    BinaryReader* r_ = nullptr;
};

}  // namespace sinkscope
