// The restricted unpickler's memory (torch_pickle.hpp): the value stack and its marks, the memo, and the
// arenas that hold strings and containers. Every value kept is charged to the reader's budget; the stack,
// the marks and the memo are bounded by the limits (torch_pickle_reader.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/torch_pickle_reader.hpp"
#include "flashdeberta/io/torch_pickle_values.hpp"

namespace flashdeberta::io::detail {

class PickleStack : public PickleReader {
 public:
  using Value = PickleValue;
  using Kind = PickleKind;

  PickleStack(std::span<std::byte const> bytes, std::string source, std::string what)
      : PickleReader(bytes, std::move(source), std::move(what)) {}

  Kind kind(Value const& v) const { return v.kind; }
  std::string const& string_of(Value const& v) const { return strings_[v.ref]; }
  std::vector<Value> const& items_of(Value const& v) const { return seqs_[v.ref]; }  // tuple or list
  std::vector<std::pair<Value, Value>> const& dict_of(Value const& v) const { return dicts_[v.ref]; }

 protected:
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
  void mark() {
    FLASHDEBERTA_REQUIRE(marks_.size() < kMaxMarks, where() << "more than " << kMaxMarks << " nested marks");
    marks_.push_back(stack_.size());
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

  // Values read as the types a call's arguments must have.
  std::int64_t as_int(Value const& v, char const* what) const {
    FLASHDEBERTA_REQUIRE(v.kind == Kind::kInt, where()
                                                   << what << " must be an int, found " << pickle_kind_name(v.kind));
    return v.i;
  }
  std::vector<std::int64_t> as_int_tuple(Value const& v, char const* what) const {
    FLASHDEBERTA_REQUIRE(v.kind == Kind::kTuple,
                         where() << what << " must be a tuple of ints, found " << pickle_kind_name(v.kind));
    FLASHDEBERTA_REQUIRE(seqs_[v.ref].size() <= kMaxDims, where() << what << " has " << seqs_[v.ref].size()
                                                                  << " dimensions; at most " << kMaxDims
                                                                  << " are supported");
    std::vector<std::int64_t> out;
    for (Value const& item : seqs_[v.ref]) out.push_back(as_int(item, what));
    return out;
  }

  // The opcodes (torch_pickle_opcodes.hpp, torch_pickle.hpp) work on these directly.
  std::vector<Value> stack_;
  std::vector<std::string> strings_;
  std::vector<std::vector<Value>> seqs_;
  std::vector<std::vector<std::pair<Value, Value>>> dicts_;

 private:
  std::vector<std::size_t> marks_;                        // stack sizes at each MARK
  std::vector<Value> memo_dense_;                         // keys 0 .. size - 1
  std::unordered_map<std::uint64_t, Value> memo_sparse_;  // any other key
};

}  // namespace flashdeberta::io::detail
