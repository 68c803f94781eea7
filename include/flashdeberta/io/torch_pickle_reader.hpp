// The restricted unpickler's reader (torch_pickle.hpp): the bytes of one pickle, read opcode by opcode,
// with what bounds the machine. The limits every part of it checks, the memory budget, and the place every
// message names (where(): the file, the pickle, the byte offset and the opcode) live here.
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
#include <map>
#include <span>
#include <string>
#include <utility>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io {

// The bounds of the restricted unpickler; TorchUnpickler::kName names them.
struct TorchPickleLimits {
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
};

namespace detail {

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

// A pickle's bytes read from a start offset: opcodes and their arguments, the memory charged so far and
// the current opcode's place for messages.
class PickleReader : public TorchPickleLimits {
 public:
  // `bytes` holds the pickle (and possibly more after its STOP); `what` names it in messages
  // ("archive/data.pkl", "the main pickle").
  PickleReader(std::span<std::byte const> bytes, std::string source, std::string what)
      : bytes_(bytes), source_(std::move(source)), what_(std::move(what)) {}

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

 protected:
  // The pickle begins at `pos`: the budget counts the bytes read from there.
  void begin(std::size_t pos) {
    pos_ = pos;
    start_ = pos;
  }
  std::size_t position() const { return pos_; }

  // The next opcode, remembered with its offset for where(); the bytes must not end before a STOP.
  std::uint8_t next_opcode() {
    op_at_ = pos_;
    FLASHDEBERTA_REQUIRE(pos_ < bytes_.size(), source_ << ": " << what_ << " ends at byte " << pos_
                                                       << " without a STOP opcode; the file is truncated");
    op_ = std::to_integer<std::uint8_t>(bytes_[pos_++]);
    return op_;
  }

  // The current opcode's arguments: n bytes, an n-byte little-endian integer, a line (GLOBAL's names).
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

 private:
  std::span<std::byte const> bytes_;
  std::string source_;
  std::string what_;
  std::size_t pos_ = 0;
  std::size_t start_ = 0;  // where the pickle begins in bytes_
  std::uint64_t cost_ = 0;
  std::size_t op_at_ = 0;
  std::uint8_t op_ = 0;
};

}  // namespace detail
}  // namespace flashdeberta::io
