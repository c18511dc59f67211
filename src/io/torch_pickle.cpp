// Restricted pickle machine for torch.save'd state dicts. Opcode semantics follow CPython's
// Lib/pickletools.py (protocol 2, plus the few protocol 3/4 opcodes a newer pickler may use).
// Nothing is ever called by name: GLOBAL resolves against a fixed whitelist at the moment it is
// read, and REDUCE only applies the whitelisted constructors below, so a pickle that names any
// other callable is refused before a single side effect could happen.
//
// What torch.save writes for {name: tensor} (torch/serialization.py, torch/_utils.py):
//   collections.OrderedDict() + SETITEMS of
//     name -> torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
//                                             backward_hooks = OrderedDict()[, metadata])
//   where storage = BINPERSID(('storage', torch.FloatStorage, key, location, numel)), optionally
//   followed by BUILD with {'_metadata': ...} (nn.Module.state_dict). torch::pickle_save writes
//   torch.jit._pickle.restore_type_tag(dict, 'Dict[str, Tensor]') around a plain dict.
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <unordered_map>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/torch_pickle.hpp"

namespace sinkscope::io {

namespace {

// Callables and types a state-dict pickle may name (module, name, what it is).
enum class Global {
    OrderedDict,
    RebuildTensor,              // torch._utils._rebuild_tensor (storage, offset, size, stride)
    RebuildTensorV2,            // ... + requires_grad, backward_hooks[, metadata]
    RebuildParameter,           // (tensor, requires_grad, backward_hooks)
    RebuildParameterWithState,  // (tensor, requires_grad, backward_hooks, state)
    RestoreTypeTag,             // torch.jit._pickle.restore_type_tag(value, type_str) -> value
    StorageType,                // torch.<T>Storage: only meaningful inside a persistent id
};

struct GlobalName {
    const char* module;
    const char* name;
    Global global;
};

constexpr GlobalName k_globals[] = {
    {"collections", "OrderedDict", Global::OrderedDict},
    {"torch._utils", "_rebuild_tensor", Global::RebuildTensor},
    {"torch._utils", "_rebuild_tensor_v2", Global::RebuildTensorV2},
    {"torch._utils", "_rebuild_parameter", Global::RebuildParameter},
    {"torch._utils", "_rebuild_parameter_with_state", Global::RebuildParameterWithState},
    {"torch.jit._pickle", "restore_type_tag", Global::RestoreTypeTag},
};

// torch.<T>Storage names (torch/storage.py _LegacyStorage subclasses).
constexpr const char* k_storage_types[] = {
    "FloatStorage", "HalfStorage", "BFloat16Storage",     "DoubleStorage",
    "LongStorage",  "IntStorage",  "ShortStorage",        "CharStorage",
    "ByteStorage",  "BoolStorage", "ComplexFloatStorage", "ComplexDoubleStorage",
};

enum class Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::None:
            return "None";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::Str:
            return "str";
        case Kind::Tuple:
            return "tuple";
        case Kind::List:
            return "list";
        case Kind::Dict:
            return "dict";
        case Kind::Global:
            return "global";
        case Kind::Storage:
            return "storage";
        case Kind::Tensor:
            return "tensor";
    }
    return "?";
}

struct Obj;
using Ref = std::shared_ptr<Obj>;

// One pickled value. Containers are shared (the memo and the stack may both hold one, and
// SETITEMS mutates it in place, as in Python).
struct Obj {
    Kind kind = Kind::None;
    int64_t i = 0;                          // Int, Bool
    double f = 0;                           // Float
    std::string s;                          // Str; Global: dotted name; Storage: storage type
    std::vector<Ref> items;                 // Tuple, List
    std::vector<std::pair<Ref, Ref>> dict;  // Dict, in insertion order
    Global global = Global::OrderedDict;    // Global
    PickledTensor tensor;                   // Storage (type, key, numel), Tensor
};

class Machine {
public:
    Machine(const uint8_t* data, size_t size, const std::string& file)
        : d_(data), size_(size), file_(file) {}
    // A hostile pickle can put a container inside itself (memo + SETITEM); emptying every
    // container breaks such shared_ptr cycles so nothing leaks.
    ~Machine() {
        for (const Ref& o : arena_) {
            o->items.clear();
            o->dict.clear();
        }
    }
    Machine(const Machine&) = delete;
    Machine& operator=(const Machine&) = delete;

    Ref run() {
        for (;;) {
            const size_t at = pos_;
            const uint8_t op = u8();
            if (op == '.') {  // STOP
                SS_CHECK_INPUT(marks_.empty() && stack_.size() == 1, file_, "pickle: STOP with ",
                               stack_.size(), " values on the stack and ", marks_.size(),
                               " open marks (malformed data.pkl)");
                return stack_.back();
            }
            step(op, at);
        }
    }

private:
    // Every value costs an Obj (a few hundred bytes) for an opcode of one or two bytes: the
    // number made is bounded, and only containers (which can form cycles) are kept in the arena.
    Ref make(Kind k) {
        if (++n_made_ > max_objects_)
            throw_limit(file_, Limit::PickleObjects, "pickle: values made", n_made_);
        Ref r = std::make_shared<Obj>();
        r->kind = k;
        if (k == Kind::Tuple || k == Kind::List || k == Kind::Dict) arena_.push_back(r);
        return r;
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw InputError(file_, "pickle: " + what + " (malformed data.pkl)");
    }

    const uint8_t* take(size_t n) {
        if (n > size_ - pos_)
            fail("truncated: needs " + std::to_string(n) + " bytes at byte " +
                 std::to_string(pos_) + " of " + std::to_string(size_));
        const uint8_t* p = d_ + pos_;
        pos_ += n;
        return p;
    }
    template <typename T>
    T le() {
        T v;
        std::memcpy(&v, take(sizeof(T)), sizeof(T));  // little-endian host
        return v;
    }
    uint8_t u8() { return le<uint8_t>(); }
    std::string str(size_t n) {
        const uint8_t* p = take(n);
        return std::string(reinterpret_cast<const char*>(p), n);
    }
    std::string line() {  // GLOBAL's module and name, each ended by '\n'
        const void* nl = std::memchr(d_ + pos_, '\n', size_ - pos_);
        if (!nl) fail("GLOBAL name without a newline");
        const size_t n = size_t(static_cast<const uint8_t*>(nl) - (d_ + pos_));
        std::string s = str(n);
        pos_ += 1;
        return s;
    }

    void push(Ref r) {
        if (stack_.size() >= max_stack_)
            throw_limit(file_, Limit::PickleStack, "pickle: values on the stack",
                        stack_.size() + 1);
        stack_.push_back(std::move(r));
    }
    Ref pop() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
        Ref r = std::move(stack_.back());
        stack_.pop_back();
        return r;
    }
    Ref& top() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("empty stack");
        return stack_.back();
    }
    // Everything above the last MARK, removing the mark.
    std::vector<Ref> pop_mark() {
        if (marks_.empty()) fail("no MARK to pop to");
        const size_t m = marks_.back();
        marks_.pop_back();
        std::vector<Ref> out(std::make_move_iterator(stack_.begin() + ptrdiff_t(m)),
                             std::make_move_iterator(stack_.end()));
        stack_.resize(m);
        return out;
    }
    Ref tuple(std::vector<Ref> items) {
        Ref t = make(Kind::Tuple);
        t->items = std::move(items);
        return t;
    }
    Ref integer(int64_t v) {
        Ref r = make(Kind::Int);
        r->i = v;
        return r;
    }
    void set_items(Ref& dict, std::vector<Ref>& kv) {
        if (dict->kind != Kind::Dict) fail("SETITEM(S) on a " + std::string(kind_name(dict->kind)));
        if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of values");
        for (size_t i = 0; i < kv.size(); i += 2) dict->dict.emplace_back(kv[i], kv[i + 1]);
    }
    void memo_put(uint32_t idx) {
        if (memo_.size() >= max_memo_ && memo_.count(idx) == 0)
            throw_limit(file_, Limit::PickleMemo, "pickle: memo entries", memo_.size() + 1);
        memo_[idx] = top();
    }
    void memo_get(uint32_t idx) {
        auto it = memo_.find(idx);
        if (it == memo_.end()) fail("memo key " + std::to_string(idx) + " read before it is set");
        push(it->second);
    }

    // GLOBAL: the only place a name becomes a value; anything off the whitelist is refused.
    Ref resolve_global(const std::string& module, const std::string& name) {
        Ref g = make(Kind::Global);
        g->s = module + "." + name;
        for (const GlobalName& k : k_globals)
            if (module == k.module && name == k.name) {
                g->global = k.global;
                return g;
            }
        if (module == "torch")
            for (const char* st : k_storage_types)
                if (name == st) {
                    g->global = Global::StorageType;
                    return g;
                }
        throw InputError(file_,
                         "pickle references " + quote(g->s) + ", refused (only tensors are read)");
    }

    std::vector<int64_t> int_tuple(const Ref& r, const char* what) {
        if (r->kind != Kind::Tuple)
            fail(std::string(what) + " is a " + kind_name(r->kind) + ", expected a tuple of ints");
        std::vector<int64_t> out;
        for (const Ref& x : r->items) {
            if (x->kind != Kind::Int) fail(std::string(what) + " holds a " + kind_name(x->kind));
            out.push_back(x->i);
        }
        return out;
    }

    // REDUCE: applies a whitelisted callable to its argument tuple.
    Ref apply(const Ref& fn, const Ref& args) {
        if (fn->kind != Kind::Global) fail("REDUCE calls a " + std::string(kind_name(fn->kind)));
        if (args->kind != Kind::Tuple) fail("REDUCE arguments are not a tuple");
        const std::vector<Ref>& a = args->items;
        const std::string& who = fn->s;
        auto want = [&](bool ok) {
            if (!ok) fail("unexpected arguments to " + who);
        };
        switch (fn->global) {
            case Global::OrderedDict:
                want(a.empty());
                return make(Kind::Dict);
            case Global::RebuildTensor:
            case Global::RebuildTensorV2: {
                const bool v2 = fn->global == Global::RebuildTensorV2;
                want(v2 ? (a.size() == 6 || a.size() == 7) : a.size() == 4);
                want(a[0]->kind == Kind::Storage && a[1]->kind == Kind::Int);
                Ref t = make(Kind::Tensor);
                t->tensor = a[0]->tensor;
                t->tensor.offset = a[1]->i;
                t->tensor.shape = int_tuple(a[2], "tensor size");
                t->tensor.stride = int_tuple(a[3], "tensor stride");
                want(t->tensor.shape.size() == t->tensor.stride.size());
                if (v2)
                    want(a[4]->kind == Kind::Bool && a[5]->kind == Kind::Dict &&
                         a[5]->dict.empty());  // backward hooks would be code
                return t;
            }
            case Global::RebuildParameter:
            case Global::RebuildParameterWithState: {
                const size_t n = fn->global == Global::RebuildParameter ? 3 : 4;
                want(a.size() == n && a[0]->kind == Kind::Tensor && a[1]->kind == Kind::Bool &&
                     a[2]->kind == Kind::Dict && a[2]->dict.empty());
                return a[0];
            }
            case Global::RestoreTypeTag:
                want(a.size() == 2 && a[1]->kind == Kind::Str);
                return a[0];
            case Global::StorageType:
                break;
        }
        fail("REDUCE calls " + who + ", which is not callable here");
    }

    // BINPERSID: ('storage', torch.<T>Storage, key, location, numel) -> a storage reference.
    Ref persistent(const Ref& pid) {
        const std::vector<Ref>& a = pid->items;
        const bool ok = pid->kind == Kind::Tuple && a.size() == 5 && a[0]->kind == Kind::Str &&
                        a[0]->s == "storage" && a[1]->kind == Kind::Global &&
                        a[1]->global == Global::StorageType && a[2]->kind == Kind::Str &&
                        a[3]->kind == Kind::Str && a[4]->kind == Kind::Int && a[4]->i >= 0;
        if (!ok) fail("persistent id is not ('storage', torch.<T>Storage, key, location, numel)");
        Ref s = make(Kind::Storage);
        s->tensor.storage_type = a[1]->s.substr(a[1]->s.rfind('.') + 1);
        s->tensor.storage_key = a[2]->s;
        s->tensor.storage_numel = a[4]->i;
        return s;
    }

    void step(uint8_t op, size_t at) {
        switch (op) {
            case 0x80: {  // PROTO
                const uint8_t v = u8();
                if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v));
                return;
            }
            case 0x95:  // FRAME (protocol 4): a length hint only
                take(8);
                return;
            case '(':  // MARK
                if (marks_.size() >= max_stack_)
                    throw_limit(file_, Limit::PickleStack, "pickle: open marks", marks_.size() + 1);
                marks_.push_back(stack_.size());
                return;
            case '}':  // EMPTY_DICT
                push(make(Kind::Dict));
                return;
            case ']':  // EMPTY_LIST
                push(make(Kind::List));
                return;
            case ')':  // EMPTY_TUPLE
                push(make(Kind::Tuple));
                return;
            case 'N':  // NONE
                push(make(Kind::None));
                return;
            case 0x88:    // NEWTRUE
            case 0x89: {  // NEWFALSE
                Ref b = make(Kind::Bool);
                b->i = op == 0x88;
                push(b);
                return;
            }
            case 'K':  // BININT1
                push(integer(u8()));
                return;
            case 'M':  // BININT2
                push(integer(le<uint16_t>()));
                return;
            case 'J':  // BININT
                push(integer(le<int32_t>()));
                return;
            case 0x8a: {  // LONG1: n-byte little-endian two's complement
                const uint8_t n = u8();
                if (n > 8) fail("integer of " + std::to_string(n) + " bytes (more than 64 bits)");
                const uint8_t* p = take(n);
                uint64_t v = 0;
                for (size_t k = 0; k < n; ++k) v |= uint64_t(p[k]) << (8 * k);
                if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t(0) << (8 * n);
                push(integer(int64_t(v)));
                return;
            }
            case 'G': {  // BINFLOAT: big-endian double
                const uint8_t* p = take(8);
                uint64_t bits = 0;
                for (size_t k = 0; k < 8; ++k) bits = bits << 8 | p[k];
                Ref r = make(Kind::Float);
                std::memcpy(&r->f, &bits, 8);
                push(r);
                return;
            }
            case 'X': {  // BINUNICODE
                Ref r = make(Kind::Str);
                r->s = str(le<uint32_t>());
                push(r);
                return;
            }
            case 0x8c: {  // SHORT_BINUNICODE
                Ref r = make(Kind::Str);
                r->s = str(u8());
                push(r);
                return;
            }
            case 't':  // TUPLE
                push(tuple(pop_mark()));
                return;
            case 0x85:    // TUPLE1
            case 0x86:    // TUPLE2
            case 0x87: {  // TUPLE3
                std::vector<Ref> items(size_t(op - 0x84));
                for (size_t k = items.size(); k-- > 0;) items[k] = pop();
                push(tuple(std::move(items)));
                return;
            }
            case 'l': {  // LIST
                Ref l = make(Kind::List);
                l->items = pop_mark();
                push(l);
                return;
            }
            case 'd': {  // DICT
                std::vector<Ref> kv = pop_mark();
                Ref dict = make(Kind::Dict);
                set_items(dict, kv);
                push(dict);
                return;
            }
            case 'a': {  // APPEND
                Ref v = pop();
                Ref& l = top();
                if (l->kind != Kind::List) fail("APPEND to a " + std::string(kind_name(l->kind)));
                l->items.push_back(std::move(v));
                return;
            }
            case 'e': {  // APPENDS
                std::vector<Ref> vs = pop_mark();
                Ref& l = top();
                if (l->kind != Kind::List) fail("APPENDS to a " + std::string(kind_name(l->kind)));
                for (Ref& v : vs) l->items.push_back(std::move(v));
                return;
            }
            case 's': {  // SETITEM
                std::vector<Ref> kv(2);
                kv[1] = pop();
                kv[0] = pop();
                set_items(top(), kv);
                return;
            }
            case 'u': {  // SETITEMS
                std::vector<Ref> kv = pop_mark();
                set_items(top(), kv);
                return;
            }
            case 'q':  // BINPUT
                memo_put(u8());
                return;
            case 'r':  // LONG_BINPUT
                memo_put(le<uint32_t>());
                return;
            case 0x94:  // MEMOIZE (protocol 4)
                memo_put(uint32_t(memo_.size()));
                return;
            case 'h':  // BINGET
                memo_get(u8());
                return;
            case 'j':  // LONG_BINGET
                memo_get(le<uint32_t>());
                return;
            case '0':  // POP
                pop();
                return;
            case '2':  // DUP
                push(top());
                return;
            case 'c': {  // GLOBAL "module\nname\n"
                const std::string module = line();
                const std::string name = line();
                push(resolve_global(module, name));
                return;
            }
            case 0x93: {  // STACK_GLOBAL (protocol 4): module and name from the stack
                Ref name = pop();
                Ref module = pop();
                if (module->kind != Kind::Str || name->kind != Kind::Str)
                    fail("STACK_GLOBAL of non-strings");
                push(resolve_global(module->s, name->s));
                return;
            }
            case 'Q': {  // BINPERSID
                Ref pid = pop();
                push(persistent(pid));
                return;
            }
            case 'R': {  // REDUCE
                Ref args = pop();
                Ref fn = pop();
                push(apply(fn, args));
                return;
            }
            case 'b': {  // BUILD: only a state dict's attributes ({'_metadata': ...}) are accepted
                Ref state = pop();
                const Ref& target = top();
                if (target->kind != Kind::Dict || state->kind != Kind::Dict)
                    fail("BUILD of a " + std::string(kind_name(target->kind)) + " with a " +
                         kind_name(state->kind) + " state");
                return;  // attributes of the dict object (module versions) are not weights
            }
            default:
                break;
        }
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        throw InputError(file_, "pickle: unsupported opcode " + std::string(hex) +
                                    (op >= 0x20 && op < 0x7f ? std::string(" '") + char(op) + "'"
                                                             : std::string()) +
                                    " at byte " + std::to_string(at) +
                                    " (only what torch.save writes for a state dict is read)");
    }

    const uint8_t* d_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& file_;
    std::vector<Ref> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint32_t, Ref> memo_;
    std::vector<Ref> arena_;  // every container made, for the destructor
    uint64_t n_made_ = 0;
    const uint64_t max_objects_ = limit_value(Limit::PickleObjects);
    const uint64_t max_stack_ = limit_value(Limit::PickleStack);
    const uint64_t max_memo_ = limit_value(Limit::PickleMemo);
};

}  // namespace

std::vector<PickledTensor> unpickle_state_dict(const uint8_t* data, size_t size,
                                               const std::string& file) {
    Machine machine(data, size, file);
    const Ref result = machine.run();
    SS_CHECK_INPUT(result->kind == Kind::Dict, file, "pickle holds a value of type ",
                   kind_name(result->kind), ", expected a state dict {name: tensor}");
    std::vector<PickledTensor> out;
    std::set<std::string> seen;
    for (const auto& [k, v] : result->dict) {
        SS_CHECK_INPUT(k->kind == Kind::Str, file, "state dict key is not a str (found ",
                       kind_name(k->kind), ")");
        SS_CHECK_INPUT(v->kind == Kind::Tensor, file, "state dict entry ", quote(k->s),
                       " is not a tensor (found ", kind_name(v->kind), ")");
        SS_CHECK_INPUT(seen.insert(k->s).second, file, "state dict key ", quote(k->s),
                       " appears twice");
        out.push_back(v->tensor);
        out.back().name = k->s;
    }
    return out;
}

}  // namespace sinkscope::io
