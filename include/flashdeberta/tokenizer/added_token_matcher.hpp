// Finds added tokens in a text: the leftmost match, the longest there, as HF's added vocabulary does
// (its aho-corasick automaton runs with MatchKind::LeftmostLongest), with a filter for single_word.
//
// An Aho-Corasick automaton over code points: one pass over the text finds every token ending at each
// position, longest first, whatever the number of tokens. A search stops once no token starting at or
// before its best match can still end further on (the automaton's state is shorter than that), so a
// search costs the characters up to its match plus at most the longest token's length, so a file listing
// many added tokens does not multiply the cost of every text by their number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flashdeberta::tokenizer {

class AddedTokenMatcher {
 public:
  struct Match {
    std::size_t token;  // index into the tokens the matcher was built from
    std::size_t begin;  // text[begin, end) is the token
    std::size_t end;
  };

  AddedTokenMatcher() : nodes_(1) {}

  // Empty tokens never match; of tokens with equal contents, the earlier is tried first.
  explicit AddedTokenMatcher(std::vector<std::u32string> const& tokens) : nodes_(1) {
    next_same_.assign(tokens.size(), kNone);
    std::vector<std::size_t> last_same;  // per node: the last token ending there, to chain equal contents
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (tokens[k].empty()) continue;
      std::size_t node = 0;
      for (char32_t c : tokens[k]) node = child_or_add(node, c);
      last_same.resize(nodes_.size(), kNone);
      if (nodes_[node].token == kNone) {
        nodes_[node].token = k;
      } else {
        next_same_[last_same[node]] = k;
      }
      last_same[node] = k;
    }
    link();
  }

  // The match with the smallest begin >= from, the longest there, among those `accept(token, begin,
  // end)` allows; nothing if there is none.
  template <class Accept>
  std::optional<Match> find(std::u32string_view text, std::size_t from, Accept const& accept) const {
    std::optional<Match> best;
    std::size_t state = 0;
    for (std::size_t j = from; j < text.size(); ++j) {
      state = step(state, text[j]);
      std::size_t const reach = j + 1 - nodes_[state].depth;  // no token can start before this any more
      if (best && best->begin < reach) return best;
      // Tokens ending here, longest (leftmost) first; the first one accepted is the best for this end.
      std::size_t node = nodes_[state].token != kNone ? state : nodes_[state].output;
      for (; node != kNone; node = nodes_[node].output) {
        std::size_t const begin = j + 1 - nodes_[node].depth;
        if (best && begin > best->begin) break;
        std::size_t token = nodes_[node].token;
        while (token != kNone && !accept(token, begin, j + 1)) token = next_same_[token];
        if (token != kNone) {  // leftmost so far, or as far left as `best` and longer (it ends later)
          best = Match{token, begin, j + 1};
          break;
        }
      }
    }
    return best;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  struct Node {
    std::size_t depth = 0;
    std::size_t fail = 0;             // longest proper suffix that is a trie node
    std::size_t output = kNone;       // nearest node on the fail chain where a token ends
    std::size_t token = kNone;        // first token ending here
    std::size_t first_child = kNone;  // children as a list, for the breadth-first walk
    std::size_t next_sibling = kNone;
    char32_t label = 0;  // the character on the edge into this node
  };

  static std::uint64_t edge_key(std::size_t node, char32_t c) {
    return (static_cast<std::uint64_t>(node) << 21) | static_cast<std::uint64_t>(c & 0x1FFFFF);
  }

  std::size_t child(std::size_t node, char32_t c) const {
    auto it = edges_.find(edge_key(node, c));
    return it == edges_.end() ? kNone : it->second;
  }

  std::size_t child_or_add(std::size_t node, char32_t c) {
    if (std::size_t const existing = child(node, c); existing != kNone) return existing;
    std::size_t const added = nodes_.size();
    nodes_.push_back(Node{});
    nodes_[added].depth = nodes_[node].depth + 1;
    nodes_[added].label = c;
    nodes_[added].next_sibling = nodes_[node].first_child;
    nodes_[node].first_child = added;
    edges_.emplace(edge_key(node, c), added);
    return added;
  }

  // Fail and output links, breadth first (a node's fail target is shallower, so already linked).
  void link() {
    std::vector<std::size_t> queue{0};
    for (std::size_t q = 0; q < queue.size(); ++q) {
      std::size_t const u = queue[q];
      for (std::size_t v = nodes_[u].first_child; v != kNone; v = nodes_[v].next_sibling) {
        std::size_t fail = 0;
        if (u != 0) fail = step(nodes_[u].fail, nodes_[v].label);
        nodes_[v].fail = fail;
        nodes_[v].output = nodes_[fail].token != kNone ? fail : nodes_[fail].output;
        queue.push_back(v);
      }
    }
  }

  // The state after reading `c` in `state`.
  std::size_t step(std::size_t state, char32_t c) const {
    while (true) {
      if (std::size_t const next = child(state, c); next != kNone) return next;
      if (state == 0) return 0;
      state = nodes_[state].fail;
    }
  }

  std::vector<Node> nodes_;
  std::unordered_map<std::uint64_t, std::size_t> edges_;  // edge_key(node, c) -> child
  std::vector<std::size_t> next_same_;                    // next token with the same content
};

}  // namespace flashdeberta::tokenizer
