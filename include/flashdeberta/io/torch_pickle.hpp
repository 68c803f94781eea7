// A restricted unpickler for what torch.save writes for a state dict: a (possibly ordered) dict of
// tensors, each rebuilt by torch._utils._rebuild_tensor_v2 from a storage named by a persistent id.
//
// Nothing is ever executed: the pickle is interpreted as data. Only the opcodes pickle protocols 2-5
// use for tuples, lists, dicts, strings, numbers, the memo and REDUCE/BUILD are accepted, and only
// these globals: collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
// _rebuild_parameter and the torch.*Storage types. Any other global or opcode (INST, OBJ, NEWOBJ,
// extension codes, ...) is a flashdeberta::Error naming the file, the byte offset and the offender.
// The machine is iterative (no recursion) and its stack, mark stack and memo are bounded.
//
// The memo lets a pickle name a value again for 2 bytes, so what it builds is not bounded by its size:
// REDUCE on a memoized _rebuild_tensor_v2 and 64-dimension arguments makes a 1 KB tensor record for
// every 6 bytes. Every value the machine keeps (strings, container items, memo entries, tensor records,
// storages, the state dict's copies) is therefore charged its size in bytes, and the total may not pass
// kBudgetPerByte x the pickle bytes read so far (plus kBudgetSlack), so the memory and the time a pickle
// costs stay linear in its size whatever it does. The stack is not charged: every opcode pushes at most
// one value, so it never holds more values than bytes were read (and at most kMaxStack).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io {

// What a persistent id ('storage', storage_type, key, location, numel[, view]) names: the record
// `data/<key>` of the archive (or the key's slot after a legacy file's pickles), `numel` elements.
struct TorchStorageRef {
  std::string key;
  DType dtype = DType::kF32;
  std::int64_t numel = 0;        // elements of the whole storage
  std::int64_t view_offset = 0;  // legacy storage views (torch < 0.4): first element inside the storage
  std::int64_t view_numel = -1;  // and length; -1 for the whole storage
};

// _rebuild_tensor_v2(storage, offset, size, stride, ...), checked only for types here; shapes and
// bounds are checked where the tensor's name is known (torch_checkpoint.hpp).
struct TorchTensorRecord {
  std::size_t storage = 0;  // index into TorchStateDict::storages
  std::int64_t offset = 0;  // elements into the storage
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
};

struct TorchStateDict {
  std::vector<TorchStorageRef> storages;
  std::vector<std::pair<std::string, TorchTensorRecord>> tensors;  // in file order
};

// Zip archives write 5-element persistent ids; the legacy format adds view metadata as a sixth.
enum class TorchPersistentIds { kZip, kLegacy };

namespace detail {

enum class PickleKind : std::uint8_t {
  // clang-format off
  kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor
  // clang-format on
};
enum class PickleGlobal : std::uint8_t {
  kOrderedDict,
  kRebuildTensorV2,
  kRebuildTensor,
  kRebuildParameter,
  kStorageType
};

// A value on the machine's stack. Containers, strings, storages and tensors live in the machine's
// arenas and are referred to by index, so the memo shares them as pickle requires and a self-referencing
// pickle cannot leak or recurse. 16 bytes: containers of memo references are the commonest large thing.
struct PickleValue {
  PickleKind kind = PickleKind::kNone;
  std::uint32_t ref = 0;  // arena index; kGlobal kStorageType: the DType
  std::int64_t i = 0;     // kBool, kInt; kGlobal: the PickleGlobal; kFloat: the double's bits (never read)
};
static_assert(sizeof(PickleValue) == 16, "the memory budget charges 16 bytes per value");

// With its article, for "found a tuple", "is an int".
inline char const* pickle_kind_name(PickleKind k) {
  constexpr char const* kNames[] = {"None",   "a bool", "an int",   "a float",   "a string", "a tuple",
                                    "a list", "a dict", "a global", "a storage", "a tensor"};
  return kNames[static_cast<int>(k)];
}

// Names of the opcodes of pickle protocols 0-5, for messages.
inline std::string pickle_opcode_name(std::uint8_t op) {
  // clang-format off
  static std::map<std::uint8_t, char const*> const kNames = {
      {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"}, {'I', "INT"},
      {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"},
      {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
      {'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
      {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"},
      {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"}, {'r', "LONG_BINPUT"},
      {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"},
      {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
      {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"},
      {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"},
      {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
      {0x98, "READONLY_BUFFER"}};
  // clang-format on
  auto it = kNames.find(op);
  std::string const code = op >= 0x20 && op < 0x7f
                               ? std::string("'") + static_cast<char>(op) + "'"
                               : "0x" + std::string(1, "0123456789abcdef"[op >> 4]) + "0123456789abcdef"[op & 15];
  return code + " (" + (it != kNames.end() ? it->second : "unknown") + ")";
}

// torch.<Name>Storage -> element type; UntypedStorage is bytes.
inline std::optional<DType> torch_storage_dtype(std::string_view name) {
  static std::pair<std::string_view, DType> const kTypes[] = {
      {"FloatStorage", DType::kF32},  {"HalfStorage", DType::kF16},  {"BFloat16Storage", DType::kBF16},
      {"DoubleStorage", DType::kF64}, {"LongStorage", DType::kI64},  {"IntStorage", DType::kI32},
      {"ShortStorage", DType::kI16},  {"CharStorage", DType::kI8},   {"ByteStorage", DType::kU8},
      {"BoolStorage", DType::kBool},  {"UntypedStorage", DType::kU8}};
  for (auto const& [n, t] : kTypes) {
    if (n == name) return t;
  }
  return std::nullopt;
}

}  // namespace detail

class TorchUnpickler {
 public:
  using Value = detail::PickleValue;
  using Kind = detail::PickleKind;

  static constexpr std::size_t kMaxStack = std::size_t{1} << 20;  // a state dict needs a dozen
  static constexpr std::size_t kMaxMarks = std::size_t{1} << 12;  // nesting depth of MARKs; a state dict needs 3
  static constexpr std::size_t kMaxMemo = std::size_t{1} << 22;   // about 7 per tensor
  static constexpr std::size_t kMaxGlobalName = 256;
  // The memo lets a file refer to one value many times for a few bytes each, so whatever is copied per
  // reference is bounded: a tensor's dimensions and a storage key.
  static constexpr std::size_t kMaxDims = 64;
  static constexpr std::size_t kMaxStorageKey = 256;
  // Memory (in bytes, counted as below) allowed per pickle byte read, plus a constant for tiny pickles.
  // The state dicts torch writes take 10 to 13 per byte (test_torch_pickle_bounds.cpp checks the
  // fixtures), so 32 leaves room for other writers while a hostile 4 MB pickle stops before 130 MB.
  static constexpr std::uint64_t kBudgetPerByte = 32;
  static constexpr std::uint64_t kBudgetSlack = std::uint64_t{1} << 16;
  // What one node of a std::map / std::set / hash map costs beyond its payload, with allocator overhead.
  static constexpr std::uint64_t kNodeBytes = 64;

  // `bytes` holds the pickle (and possibly more after its STOP); `what` names it in messages
  // ("archive/data.pkl", "the main pickle").
  TorchUnpickler(std::span<std::byte const> bytes, std::string source, std::string what, TorchPersistentIds ids)
      : bytes_(bytes), source_(std::move(source)), what_(std::move(what)), ids_(ids) {}

  // Runs from `pos` through STOP and returns the value left on top; `pos` ends just past the STOP.
  Value run(std::size_t& pos) {
    pos_ = pos;
    start_ = pos;
    for (;;) {
      op_at_ = pos_;
      FLASHDEBERTA_REQUIRE(pos_ < bytes_.size(), source_ << ": " << what_ << " ends at byte " << pos_
                                                         << " without a STOP opcode; the file is truncated");
      op_ = std::to_integer<std::uint8_t>(bytes_[pos_++]);
      if (op_ == '.') {
        need(1);
        pos = pos_;
        return stack_.back();
      }
      step();
    }
  }

  Kind kind(Value const& v) const { return v.kind; }
  std::string const& string_of(Value const& v) const { return strings_[v.ref]; }
  std::vector<Value> const& items_of(Value const& v) const { return seqs_[v.ref]; }  // tuple or list
  std::vector<std::pair<Value, Value>> const& dict_of(Value const& v) const { return dicts_[v.ref]; }
  TorchTensorRecord const& tensor_of(Value const& v) const { return tensors_[v.ref]; }
  std::vector<TorchStorageRef>& storages() { return storages_; }

  // Bytes charged so far (see kBudgetPerByte), for tests and for callers that copy values out.
  std::uint64_t cost() const { return cost_; }

  // Charges `bytes` of memory kept (or work done) on behalf of the pickle; throws once the total
  // passes the bound. Callers copying values out of a finished machine charge their copies here.
  void charge(std::uint64_t bytes) {
    cost_ += bytes;
    std::uint64_t const read = pos_ - start_;
    FLASHDEBERTA_REQUIRE(cost_ <= kBudgetPerByte * read + kBudgetSlack,
                         where() << "unpickling takes " << cost_ << " bytes of memory, which exceeds the bound of "
                                 << kBudgetPerByte << " x the pickle's " << read << " bytes read so far + "
                                 << kBudgetSlack
                                 << "; its memo references multiply values far beyond what a state "
                                    "dict of this size holds");
  }

  // "source: what byte N, opcode 'c' (GLOBAL): " for messages about the current opcode.
  std::string where() const {
    return source_ + ": " + what_ + " byte " + std::to_string(op_at_) + ", opcode " + detail::pickle_opcode_name(op_) +
           ": ";
  }

 private:
  void need(std::size_t n) const {
    FLASHDEBERTA_REQUIRE(stack_.size() >= n + (marks_.empty() ? 0 : marks_.back()),
                         where() << "needs " << n << " value(s) on the stack above the last mark");
  }
  Value pop() {
    need(1);
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  void push(Value v) {
    FLASHDEBERTA_REQUIRE(stack_.size() < kMaxStack, where() << "stack exceeds " << kMaxStack << " values");
    stack_.push_back(v);
  }
  std::span<std::byte const> read(std::size_t n) {
    FLASHDEBERTA_REQUIRE(n <= bytes_.size() - pos_,
                         where() << "needs " << n << " bytes, only " << bytes_.size() - pos_ << " remain");
    auto const out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::uint64_t read_le(std::size_t n) {
    auto const b = read(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | std::to_integer<std::uint64_t>(b[i]);
    return v;
  }
  std::string read_line() {
    std::size_t end = pos_;
    while (end < bytes_.size() && end - pos_ <= kMaxGlobalName && bytes_[end] != std::byte{'\n'}) ++end;
    FLASHDEBERTA_REQUIRE(end < bytes_.size() && bytes_[end] == std::byte{'\n'},
                         where() << "no end of line within " << kMaxGlobalName << " bytes");
    std::string line(reinterpret_cast<char const*>(bytes_.data() + pos_), end - pos_);
    pos_ = end + 1;
    return line;
  }

  static std::uint32_t index_of_last(std::size_t arena_size) { return static_cast<std::uint32_t>(arena_size - 1); }
  Value make_string(std::size_t n) {
    auto const b = read(n);
    charge(sizeof(std::string) + n);
    strings_.emplace_back(reinterpret_cast<char const*>(b.data()), b.size());
    return {Kind::kString, index_of_last(strings_.size()), 0};
  }
  Value make_seq(Kind kind, std::vector<Value> items) {
    charge(sizeof(std::vector<Value>) + items.size() * sizeof(Value));
    seqs_.push_back(std::move(items));
    return {kind, index_of_last(seqs_.size()), 0};
  }
  Value make_dict() {
    charge(sizeof(std::vector<std::pair<Value, Value>>));
    dicts_.emplace_back();
    return {Kind::kDict, index_of_last(dicts_.size()), 0};
  }
  static Value make_int(std::int64_t v) { return {Kind::kInt, 0, v}; }

  // Everything above the last mark, removing the mark.
  std::vector<Value> pop_to_mark() {
    FLASHDEBERTA_REQUIRE(!marks_.empty(), where() << "no MARK precedes it");
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  // Picklers number memo entries 0, 1, 2, ..., so keys are kept in a vector while they come in that
  // order (16 bytes each) and in a hash map otherwise. Invariant: no sparse key is below dense's size.
  std::size_t memo_size() const { return memo_dense_.size() + memo_sparse_.size(); }
  void memo_put(std::uint64_t key) {
    need(1);
    Value const value = stack_.back();
    if (key < memo_dense_.size()) {
      memo_dense_[key] = value;
      return;
    }
    auto const sparse = memo_sparse_.find(key);
    if (sparse != memo_sparse_.end()) {
      sparse->second = value;
      return;
    }
    FLASHDEBERTA_REQUIRE(memo_size() < kMaxMemo, where() << "memo exceeds " << kMaxMemo << " entries");
    if (key != memo_dense_.size()) {
      charge(sizeof(std::pair<std::uint64_t, Value>) + kNodeBytes);
      memo_sparse_.emplace(key, value);
      return;
    }
    charge(sizeof(Value));
    memo_dense_.push_back(value);
    for (auto next = memo_sparse_.find(memo_dense_.size()); next != memo_sparse_.end();
         next = memo_sparse_.find(memo_dense_.size())) {
      memo_dense_.push_back(next->second);
      memo_sparse_.erase(next);
    }
  }
  void memo_get(std::uint64_t key) {
    if (key < memo_dense_.size()) return push(memo_dense_[key]);
    auto it = memo_sparse_.find(key);
    FLASHDEBERTA_REQUIRE(it != memo_sparse_.end(), where() << "memo key " << key << " was never stored");
    push(it->second);
  }

  Value global(std::string const& module, std::string const& name) {
    using G = detail::PickleGlobal;
    auto make = [](G g, std::uint32_t ref = 0) { return Value{Kind::kGlobal, ref, static_cast<std::int64_t>(g)}; };
    if (module == "collections" && name == "OrderedDict") return make(G::kOrderedDict);
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return make(G::kRebuildTensorV2);
    if (module == "torch._utils" && name == "_rebuild_tensor") return make(G::kRebuildTensor);
    if (module == "torch._utils" && name == "_rebuild_parameter") return make(G::kRebuildParameter);
    if (module == "torch") {
      if (auto const dtype = detail::torch_storage_dtype(name))
        return make(G::kStorageType, static_cast<std::uint32_t>(*dtype));
    }
    FLASHDEBERTA_FAIL(where() << "global '" << module << "." << name
                              << "' is not allowed; a torch state dict uses only collections.OrderedDict, "
                                 "torch._utils._rebuild_tensor_v2 and the torch.*Storage types (nothing is executed)");
  }

  void step();
  void reduce();
  Value persistent_load(Value const& pid);
  Value rebuild_tensor(std::vector<Value> const& args, bool v2);
  std::int64_t as_int(Value const& v, char const* what) const {
    FLASHDEBERTA_REQUIRE(v.kind == Kind::kInt,
                         where() << what << " must be an int, found " << detail::pickle_kind_name(v.kind));
    return v.i;
  }
  std::vector<std::int64_t> as_int_tuple(Value const& v, char const* what) const {
    FLASHDEBERTA_REQUIRE(v.kind == Kind::kTuple,
                         where() << what << " must be a tuple of ints, found " << detail::pickle_kind_name(v.kind));
    FLASHDEBERTA_REQUIRE(seqs_[v.ref].size() <= kMaxDims, where() << what << " has " << seqs_[v.ref].size()
                                                                  << " dimensions; at most " << kMaxDims
                                                                  << " are supported");
    std::vector<std::int64_t> out;
    for (Value const& item : seqs_[v.ref]) out.push_back(as_int(item, what));
    return out;
  }

  std::span<std::byte const> bytes_;
  std::string source_;
  std::string what_;
  TorchPersistentIds ids_;
  std::size_t pos_ = 0;
  std::size_t start_ = 0;  // where the pickle begins in bytes_
  std::uint64_t cost_ = 0;
  std::size_t op_at_ = 0;
  std::uint8_t op_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;                        // stack sizes at each MARK
  std::vector<Value> memo_dense_;                         // keys 0 .. size - 1
  std::unordered_map<std::uint64_t, Value> memo_sparse_;  // any other key
  std::vector<std::string> strings_;
  std::vector<std::vector<Value>> seqs_;
  std::vector<std::vector<std::pair<Value, Value>>> dicts_;
  std::vector<TorchStorageRef> storages_;
  std::map<std::string, std::pair<DType, std::int64_t>, std::less<>> storage_types_;  // key -> first dtype, numel
  std::vector<TorchTensorRecord> tensors_;
};

// ---- the opcodes ----

inline void TorchUnpickler::step() {
  switch (op_) {
    case 0x80: {  // PROTO
      std::uint64_t const proto = read_le(1);
      FLASHDEBERTA_REQUIRE(proto >= 2 && proto <= 5,
                           where() << "pickle protocol " << proto << " is not supported (torch.save writes 2)");
      return;
    }
    case 0x95:  // FRAME: a length hint only
      read(8);
      return;
    case '(':
      FLASHDEBERTA_REQUIRE(marks_.size() < kMaxMarks, where() << "more than " << kMaxMarks << " nested marks");
      marks_.push_back(stack_.size());
      return;
    case 'N':
      return push({Kind::kNone, 0, 0});
    case 0x88:  // NEWTRUE
    case 0x89:  // NEWFALSE
      return push({Kind::kBool, 0, op_ == 0x88 ? 1 : 0});
    case 'K':
      return push(make_int(static_cast<std::int64_t>(read_le(1))));
    case 'M':
      return push(make_int(static_cast<std::int64_t>(read_le(2))));
    case 'J':
      return push(make_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)))));
    case 0x8a: {  // LONG1: n-byte two's complement, little-endian
      std::size_t const n = static_cast<std::size_t>(read_le(1));
      FLASHDEBERTA_REQUIRE(n <= 8, where() << "a " << n << "-byte integer does not fit in 64 bits");
      std::uint64_t v = n == 0 ? 0 : read_le(n);
      if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
      return push(make_int(static_cast<std::int64_t>(v)));
    }
    case 'G': {  // BINFLOAT: big-endian double
      auto const b = read(8);
      std::uint64_t bits = 0;
      for (std::byte x : b) bits = (bits << 8) | std::to_integer<std::uint64_t>(x);
      return push({Kind::kFloat, 0, static_cast<std::int64_t>(bits)});
    }
    case 'X':  // BINUNICODE
      return push(make_string(static_cast<std::size_t>(read_le(4))));
    case 0x8c:  // SHORT_BINUNICODE
    case 'U':   // SHORT_BINSTRING
      return push(make_string(static_cast<std::size_t>(read_le(1))));
    case 'T': {  // BINSTRING: signed 4-byte length
      auto const n = static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)));
      FLASHDEBERTA_REQUIRE(n >= 0, where() << "negative string length " << n);
      return push(make_string(static_cast<std::size_t>(n)));
    }
    case ')':
      return push(make_seq(Kind::kTuple, {}));
    case 't':
      return push(make_seq(Kind::kTuple, pop_to_mark()));
    case 0x85:  // TUPLE1..3
    case 0x86:
    case 0x87: {
      std::size_t const n = op_ - 0x84u;
      need(n);
      std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
      stack_.resize(stack_.size() - n);
      return push(make_seq(Kind::kTuple, std::move(items)));
    }
    case ']':
      return push(make_seq(Kind::kList, {}));
    case '}':
      return push(make_dict());
    case 'a':    // APPEND
    case 'e': {  // APPENDS
      std::vector<Value> items = op_ == 'a' ? std::vector<Value>{pop()} : pop_to_mark();
      need(1);
      Value const list = stack_.back();
      FLASHDEBERTA_REQUIRE(list.kind == Kind::kList,
                           where() << "appends to " << detail::pickle_kind_name(list.kind) << ", not a list");
      charge(items.size() * sizeof(Value));
      seqs_[list.ref].insert(seqs_[list.ref].end(), items.begin(), items.end());
      return;
    }
    case 's':    // SETITEM
    case 'u': {  // SETITEMS
      std::vector<Value> items;
      if (op_ == 's') {
        need(2);
        items.assign(stack_.end() - 2, stack_.end());
        stack_.resize(stack_.size() - 2);
      } else {
        items = pop_to_mark();
      }
      FLASHDEBERTA_REQUIRE(items.size() % 2 == 0, where()
                                                      << "an odd number (" << items.size() << ") of keys and values");
      need(1);
      Value const dict = stack_.back();
      FLASHDEBERTA_REQUIRE(dict.kind == Kind::kDict,
                           where() << "sets items of " << detail::pickle_kind_name(dict.kind) << ", not a dict");
      charge(items.size() * sizeof(Value));
      for (std::size_t k = 0; k < items.size(); k += 2) dicts_[dict.ref].emplace_back(items[k], items[k + 1]);
      return;
    }
    case 'q':
      return memo_put(read_le(1));
    case 'r':
      return memo_put(read_le(4));
    case 0x94:  // MEMOIZE
      return memo_put(memo_size());
    case 'h':
      return memo_get(read_le(1));
    case 'j':
      return memo_get(read_le(4));
    case 'c': {  // GLOBAL "module\nname\n"
      std::string const module = read_line();
      std::string const name = read_line();
      return push(global(module, name));
    }
    case 0x93: {  // STACK_GLOBAL
      Value const name = pop();
      Value const module = pop();
      FLASHDEBERTA_REQUIRE(module.kind == Kind::kString && name.kind == Kind::kString &&
                               strings_[module.ref].size() <= kMaxGlobalName &&
                               strings_[name.ref].size() <= kMaxGlobalName,
                           where() << "module and name must be strings of at most " << kMaxGlobalName << " bytes");
      return push(global(strings_[module.ref], strings_[name.ref]));
    }
    case 'R':
      return reduce();
    case 'b': {  // BUILD: only OrderedDict's _metadata attribute, accepted and ignored
      Value const state = pop();
      need(1);
      Value const target = stack_.back();
      FLASHDEBERTA_REQUIRE(target.kind == Kind::kDict && state.kind == Kind::kDict,
                           where() << "sets the state of " << detail::pickle_kind_name(target.kind) << " from "
                                   << detail::pickle_kind_name(state.kind)
                                   << "; only a dict's attributes (its _metadata) may be set");
      return;
    }
    case 'Q': {  // BINPERSID
      Value const pid = pop();
      return push(persistent_load(pid));
    }
    default:
      FLASHDEBERTA_FAIL(where() << "opcode not allowed in a torch state dict (nothing is executed)");
  }
}

inline void TorchUnpickler::reduce() {
  using G = detail::PickleGlobal;
  Value const args = pop();
  Value const callable = pop();
  FLASHDEBERTA_REQUIRE(args.kind == Kind::kTuple,
                       where() << "arguments must be a tuple, found " << detail::pickle_kind_name(args.kind));
  FLASHDEBERTA_REQUIRE(callable.kind == Kind::kGlobal,
                       where() << "calls " << detail::pickle_kind_name(callable.kind) << ", which is not callable");
  std::vector<Value> const& a = seqs_[args.ref];
  switch (static_cast<G>(callable.i)) {
    case G::kOrderedDict:
      FLASHDEBERTA_REQUIRE(a.empty(), where() << "collections.OrderedDict is called with " << a.size()
                                              << " arguments; only OrderedDict() is allowed");
      return push(make_dict());
    case G::kRebuildTensorV2:
      return push(rebuild_tensor(a, true));
    case G::kRebuildTensor:
      return push(rebuild_tensor(a, false));
    case G::kRebuildParameter:  // (data, requires_grad, backward_hooks): the tensor itself
      FLASHDEBERTA_REQUIRE(a.size() == 3 && a[0].kind == Kind::kTensor,
                           where() << "_rebuild_parameter takes (tensor, requires_grad, backward_hooks)");
      return push(a[0]);
    case G::kStorageType:
      FLASHDEBERTA_FAIL(where() << "calls a storage type, which a state dict never does");
  }
  FLASHDEBERTA_FAIL(where() << "unknown callable");
}

// (storage, storage_offset, size, stride[, requires_grad, backward_hooks[, metadata]])
inline detail::PickleValue TorchUnpickler::rebuild_tensor(std::vector<Value> const& a, bool v2) {
  char const* const fn = v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor";
  FLASHDEBERTA_REQUIRE(v2 ? (a.size() == 6 || a.size() == 7) : a.size() == 4,
                       where() << fn << " is called with " << a.size() << " arguments; expected "
                               << (v2 ? "(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])"
                                      : "(storage, offset, size, stride)"));
  FLASHDEBERTA_REQUIRE(a[0].kind == Kind::kStorage, where() << fn << ": argument 0 must be a storage, found "
                                                            << detail::pickle_kind_name(a[0].kind));
  TorchTensorRecord t;
  t.storage = a[0].ref;
  t.offset = as_int(a[1], "storage offset");
  t.shape = as_int_tuple(a[2], "size");
  t.stride = as_int_tuple(a[3], "stride");
  charge(sizeof(TorchTensorRecord) + (t.shape.size() + t.stride.size()) * sizeof(std::int64_t));
  if (v2) {
    FLASHDEBERTA_REQUIRE(a[4].kind == Kind::kBool, where() << fn << ": requires_grad must be a bool");
    for (std::size_t k = 5; k < a.size(); ++k) {
      FLASHDEBERTA_REQUIRE(a[k].kind == Kind::kDict && dicts_[a[k].ref].empty(),
                           where() << fn << ": argument " << k << " ("
                                   << (k == 5 ? "backward hooks" : "tensor metadata")
                                   << ") must be an empty dict; a state dict carries neither");
    }
  }
  tensors_.push_back(std::move(t));
  return {Kind::kTensor, index_of_last(tensors_.size()), 0};
}

// ('storage', storage_type, key, location, numel) in archives; legacy files add view metadata:
// None or (view_key, offset, view_numel).
inline detail::PickleValue TorchUnpickler::persistent_load(Value const& pid) {
  std::size_t const want = ids_ == TorchPersistentIds::kZip ? 5 : 6;
  FLASHDEBERTA_REQUIRE(pid.kind == Kind::kTuple && seqs_[pid.ref].size() == want,
                       where() << "a persistent id must be a tuple ('storage', type, key, location, numel"
                               << (want == 6 ? ", view" : "") << "), found " << detail::pickle_kind_name(pid.kind)
                               << (pid.kind == Kind::kTuple ? " of " + std::to_string(seqs_[pid.ref].size()) : ""));
  std::vector<Value> const& p = seqs_[pid.ref];  // nothing below adds to seqs_
  FLASHDEBERTA_REQUIRE(p[0].kind == Kind::kString && strings_[p[0].ref] == "storage",
                       where() << "persistent id of unknown type; only 'storage' ids are allowed");
  FLASHDEBERTA_REQUIRE(
      p[1].kind == Kind::kGlobal && static_cast<detail::PickleGlobal>(p[1].i) == detail::PickleGlobal::kStorageType,
      where() << "persistent id's storage type is " << detail::pickle_kind_name(p[1].kind)
              << ", not a torch.*Storage type");
  TorchStorageRef ref;
  ref.dtype = static_cast<DType>(p[1].ref);
  if (p[2].kind == Kind::kInt) {
    ref.key = std::to_string(p[2].i);
  } else {
    FLASHDEBERTA_REQUIRE(p[2].kind == Kind::kString && strings_[p[2].ref].size() <= kMaxStorageKey,
                         where() << "storage key must be a string of at most " << kMaxStorageKey << " bytes");
    ref.key = strings_[p[2].ref];
  }
  FLASHDEBERTA_REQUIRE(p[3].kind == Kind::kString, where() << "storage location must be a string");
  ref.numel = as_int(p[4], "storage size");
  FLASHDEBERTA_REQUIRE(ref.numel >= 0, where() << "storage '" << ref.key << "' has negative size " << ref.numel);
  charge(sizeof(TorchStorageRef) + ref.key.size());
  // No structured bindings here: clang < 16 cannot capture them in the message lambdas.
  auto const emplaced = storage_types_.emplace(ref.key, std::pair{ref.dtype, ref.numel});
  auto const it = emplaced.first;
  bool const inserted = emplaced.second;
  if (inserted) charge(kNodeBytes + sizeof(std::string) + ref.key.size());
  FLASHDEBERTA_REQUIRE(inserted || (it->second == std::pair<DType, std::int64_t>(ref.dtype, ref.numel)),
                       where() << "storage '" << ref.key << "' is named twice, as " << dtype_name(it->second.first)
                               << " x " << it->second.second << " and as " << dtype_name(ref.dtype) << " x "
                               << ref.numel);
  if (want == 6 && p[5].kind != Kind::kNone) {
    FLASHDEBERTA_REQUIRE(p[5].kind == Kind::kTuple && seqs_[p[5].ref].size() == 3,
                         where() << "storage view metadata must be None or (view_key, offset, size)");
    std::vector<Value> const& view = seqs_[p[5].ref];
    ref.view_offset = as_int(view[1], "storage view offset");
    ref.view_numel = as_int(view[2], "storage view size");
    FLASHDEBERTA_REQUIRE(ref.view_offset >= 0 && ref.view_numel >= 0 && ref.view_offset <= ref.numel &&
                             ref.view_numel <= ref.numel - ref.view_offset,
                         where() << "storage view [" << ref.view_offset << ", +" << ref.view_numel
                                 << ") lies outside storage '" << ref.key << "' of " << ref.numel << " elements");
  }
  storages_.push_back(std::move(ref));
  return {Kind::kStorage, index_of_last(storages_.size()), 0};
}

// Runs the pickle at `pos` (advanced past its STOP) and returns its dict of tensors.
inline TorchStateDict unpickle_state_dict(std::span<std::byte const> bytes, std::size_t& pos, std::string const& source,
                                          std::string const& what, TorchPersistentIds ids) {
  TorchUnpickler u(bytes, source, what, ids);
  auto const root = u.run(pos);
  using Kind = detail::PickleKind;
  FLASHDEBERTA_REQUIRE(u.kind(root) == Kind::kDict, source << ": " << what << " holds "
                                                           << detail::pickle_kind_name(u.kind(root))
                                                           << ", not a state dict (a dict of tensors)");
  TorchStateDict out;
  std::set<std::string_view> names;           // views into the finished machine's strings; checked before copying
  for (auto const& item : u.dict_of(root)) {  // no structured bindings: clang < 16 cannot capture them
    auto const& key = item.first;
    auto const& value = item.second;
    FLASHDEBERTA_REQUIRE(u.kind(key) == Kind::kString, source << ": " << what << " has a state dict key that is "
                                                              << detail::pickle_kind_name(u.kind(key))
                                                              << ", not a string");
    std::string const& name = u.string_of(key);
    FLASHDEBERTA_REQUIRE(names.insert(name).second,
                         source << ": " << what << ": tensor '" << name << "' appears twice in the state dict");
    FLASHDEBERTA_REQUIRE(u.kind(value) == Kind::kTensor, source << ": " << what << ": state dict entry '" << name
                                                                << "' is " << detail::pickle_kind_name(u.kind(value))
                                                                << ", not a tensor");
    // One memoized tensor may be saved under many names (tied weights are), so the copies are charged.
    TorchTensorRecord const& record = u.tensor_of(value);
    u.charge(TorchUnpickler::kNodeBytes + sizeof(out.tensors[0]) + name.size() +
             (record.shape.size() + record.stride.size()) * sizeof(std::int64_t));
    out.tensors.emplace_back(name, record);
  }
  out.storages = std::move(u.storages());
  return out;
}

}  // namespace flashdeberta::io
