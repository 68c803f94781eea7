// The restricted unpickler's data opcodes (torch_pickle.hpp): those of pickle protocols 2-5 that build
// None, bools, ints, floats, strings, tuples, lists and dicts, the marks and the memo. Nothing here names
// or calls a global; the opcodes that do (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, BINPERSID) are the torch
// layer's, and every other opcode is refused there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/torch_pickle_stack.hpp"
#include "flashdeberta/io/torch_pickle_values.hpp"

namespace flashdeberta::io::detail {

class PickleMachine : public PickleStack {
 public:
  PickleMachine(std::span<std::byte const> bytes, std::string source, std::string what)
      : PickleStack(bytes, std::move(source), std::move(what)) {}

 protected:
  // Runs opcode `op` (just read) if it is a data opcode; false, having read nothing more, if it is not.
  bool step_data(std::uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        std::uint64_t const proto = read_le(1);
        FLASHDEBERTA_REQUIRE(proto >= 2 && proto <= 5,
                             where() << "pickle protocol " << proto << " is not supported (torch.save writes 2)");
        return true;
      }
      case 0x95:  // FRAME: a length hint only
        read(8);
        return true;
      case '(':
        mark();
        return true;
      case 'N':
        push({Kind::kNone, 0, 0});
        return true;
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
        push({Kind::kBool, 0, op == 0x88 ? 1 : 0});
        return true;
      case 'K':
        push(make_int(static_cast<std::int64_t>(read_le(1))));
        return true;
      case 'M':
        push(make_int(static_cast<std::int64_t>(read_le(2))));
        return true;
      case 'J':
        push(make_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)))));
        return true;
      case 0x8a: {  // LONG1: n-byte two's complement, little-endian
        std::size_t const n = static_cast<std::size_t>(read_le(1));
        FLASHDEBERTA_REQUIRE(n <= 8, where() << "a " << n << "-byte integer does not fit in 64 bits");
        std::uint64_t v = n == 0 ? 0 : read_le(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
        push(make_int(static_cast<std::int64_t>(v)));
        return true;
      }
      case 'G': {  // BINFLOAT: big-endian double
        auto const b = read(8);
        std::uint64_t bits = 0;
        for (std::byte x : b) bits = (bits << 8) | std::to_integer<std::uint64_t>(x);
        push({Kind::kFloat, 0, static_cast<std::int64_t>(bits)});
        return true;
      }
      case 'X':  // BINUNICODE
        push(make_string(static_cast<std::size_t>(read_le(4))));
        return true;
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
        push(make_string(static_cast<std::size_t>(read_le(1))));
        return true;
      case 'T': {  // BINSTRING: signed 4-byte length
        auto const n = static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)));
        FLASHDEBERTA_REQUIRE(n >= 0, where() << "negative string length " << n);
        push(make_string(static_cast<std::size_t>(n)));
        return true;
      }
      case ')':
        push(make_seq(Kind::kTuple, {}));
        return true;
      case 't':
        push(make_seq(Kind::kTuple, pop_to_mark()));
        return true;
      case 0x85:  // TUPLE1..3
      case 0x86:
      case 0x87: {
        std::size_t const n = op - 0x84u;
        need(n);
        std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(make_seq(Kind::kTuple, std::move(items)));
        return true;
      }
      case ']':
        push(make_seq(Kind::kList, {}));
        return true;
      case '}':
        push(make_dict());
        return true;
      case 'a':    // APPEND
      case 'e': {  // APPENDS
        std::vector<Value> items = op == 'a' ? std::vector<Value>{pop()} : pop_to_mark();
        need(1);
        Value const list = stack_.back();
        FLASHDEBERTA_REQUIRE(list.kind == Kind::kList,
                             where() << "appends to " << pickle_kind_name(list.kind) << ", not a list");
        charge(items.size() * sizeof(Value));
        seqs_[list.ref].insert(seqs_[list.ref].end(), items.begin(), items.end());
        return true;
      }
      case 's':    // SETITEM
      case 'u': {  // SETITEMS
        std::vector<Value> items;
        if (op == 's') {
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
                             where() << "sets items of " << pickle_kind_name(dict.kind) << ", not a dict");
        charge(items.size() * sizeof(Value));
        for (std::size_t k = 0; k < items.size(); k += 2) dicts_[dict.ref].emplace_back(items[k], items[k + 1]);
        return true;
      }
      case 'q':  // BINPUT
        memo_put(read_le(1));
        return true;
      case 'r':  // LONG_BINPUT
        memo_put(read_le(4));
        return true;
      case 0x94:  // MEMOIZE
        memo_put(memo_size());
        return true;
      case 'h':  // BINGET
        memo_get(read_le(1));
        return true;
      case 'j':  // LONG_BINGET
        memo_get(read_le(4));
        return true;
      default:
        return false;
    }
  }
};

}  // namespace flashdeberta::io::detail
